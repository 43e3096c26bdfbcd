"""Import, validating: the rules one `.panda.json` dialog must meet to become a node of a session.

Each check returns what it read from the dialog, or raises `DialogRefused` with the problems as
(field, message) pairs; the parser reports them and goes on with the next dialog, so that one report
names every bad dialog. What is refused is what the conversation model cannot hold (a role it does
not know, content it cannot store), malformed keys, verdicts, operations and parents.
"""

from django.utils.translation import gettext

from dataplatform.conversations.model import Conversation
from dataplatform.conversations.reading import read_conversation

from ..models import Node

# Flags on a first operation that make its dialog the root of a new tree (as PandaTree reads them).
ROOT_FLAGS = ("is_new_generated", "is_prompt_modified")
FINISH_MAX = Node._meta.get_field("finish_reason").max_length
MODEL_MAX = Node._meta.get_field("model_id").max_length

Problem = tuple[str, str]  # (field, message)


class DialogRefused(Exception):
    """A dialog that cannot be imported, and why."""

    def __init__(self, *problems: Problem):
        super().__init__(*problems)
        self.problems = list(problems)


def read_dialog(dialog, where: str) -> Conversation:
    """The dialog's messages and tools, read by the conversation model's reader: the prompt with its
    reasoning, tool calls and tool results, and the answer (the last message, when it is the
    assistant's) with its reasoning and tool calls too."""
    if not isinstance(dialog, dict):
        raise DialogRefused((where, gettext("must be an object")))
    messages = dialog.get("messages")
    path = f"{where}.messages"
    read = read_conversation(messages, dialog.get("tools"), path=path, tools_path=f"{where}.tools")
    problems = _finish_reason_problems(messages, path) + read.problems
    if problems:
        raise DialogRefused(*problems)
    return read.conversation


def _finish_reason_problems(messages, path: str) -> list[Problem]:
    last = messages[-1] if isinstance(messages, list) and messages else None
    finish_reason = last.get("finish_reason") if isinstance(last, dict) else None
    if finish_reason is not None and (not isinstance(finish_reason, str) or len(finish_reason) > FINISH_MAX):
        return [(f"{path}[{len(messages) - 1}].finish_reason",
                 gettext("must be a string of at most %(max)s characters, such as 'stop' or 'length'")
                 % {"max": FINISH_MAX})]
    return []


def prompt_of(dialog: Conversation, where: str) -> Conversation:
    """The prompt the dialog's last message answers, with the dialog's tools: it holds a 'user' message and
    does not end with the assistant's."""
    prompt = dialog.messages[:-1]
    if not any(m.role == "user" for m in prompt) or prompt[-1].role == "assistant":
        raise DialogRefused((f"{where}.messages",
                             gettext("needs a prompt with a 'user' message, followed by one assistant response")))
    return Conversation(messages=prompt, tools=dialog.tools)


def verdict(dialog: dict, where: str) -> bool | None:
    """The dialog's `annotate.is_good` as written: true, false, or None when unset."""
    annotate = dialog.get("annotate") or {}
    value = annotate.get("is_good") if isinstance(annotate, dict) else None
    if not isinstance(annotate, dict) or not isinstance(value, bool | None):
        raise DialogRefused((f"{where}.annotate.is_good", gettext("must be true, false or null")))
    return value


def operations_of(dialog: dict, where: str) -> list[dict]:
    operations = dialog.get("operations") or []
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise DialogRefused((f"{where}.operations", gettext("must be a list of objects")))
    first = operations[0] if operations else {}
    if len(model_of(first)) > MODEL_MAX:
        raise DialogRefused((f"{where}.operations[0].chat_config.model",
                             gettext("must be at most %(max)s characters long") % {"max": MODEL_MAX}))
    return operations


def is_root(operations: list[dict]) -> bool:
    """Whether the dialog starts a tree of its own, by PandaTree's rule."""
    first = operations[0] if operations else {}
    return not first.get("parent") or any(first.get(flag) for flag in ROOT_FLAGS)


def parent_of(operations: list[dict], where: str) -> int | None:
    """The key of the dialog the first operation names: the one it corrects, or (for a tree's root: a new
    round, tool results, a regenerate) the one it was made from."""
    first = operations[0] if operations else {}
    if not first.get("parent"):
        return None
    try:
        return int(first["parent"])
    except (TypeError, ValueError):
        raise DialogRefused((f"{where}.operations[0].parent", gettext("must be the key of another dialog"))) from None


def model_of(operation: dict) -> str:
    """The model an operation's `chat_config` names ("" for none)."""
    config = operation.get("chat_config")
    return str(config.get("model") or "") if isinstance(config, dict) else ""
