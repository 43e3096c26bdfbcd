"""Import, validating: the rules one `.panda.json` dialog must meet to become a node of a session.

Each check returns what it read from the dialog, or raises `DialogRefused` with the problems as
(field, message) pairs; the parser reports them and goes on with the next dialog, so that one report
names every bad dialog. The rules about the whole tree (one root, one good dialog) are the parser's.
"""

from dataplatform.conversations.validation import STRING_OR_TEXT_PARTS, check_messages

from ..importers import ROLES
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


def read_messages(dialog, where: str, warnings: list[str]) -> list[dict]:
    """The dialog's messages as {role, content}, the content read as text. A node holds the content's tokens
    only, so every other key of a message (reasoning, tool calls, names...) is left out, with a warning."""
    if not isinstance(dialog, dict):
        raise DialogRefused((where, "must be an object"))
    messages = dialog.get("messages")
    path = f"{where}.messages"
    checked = check_messages(messages, path=path, roles=ROLES, content=STRING_OR_TEXT_PARTS)
    normalized = []
    for index, text in enumerate(checked.texts):
        if text is None:
            continue
        message = messages[index]
        normalized.append({"role": message["role"], "content": text})
        dropped = sorted(set(message) - {"role", "content", "finish_reason"})
        if dropped:
            warnings.append(f"{path}[{index}]: only role and content are imported (dropped {', '.join(dropped)})")
    problems = _finish_reason_problems(messages, path) + checked.problems
    if problems:
        raise DialogRefused(*problems)
    return normalized


def _finish_reason_problems(messages, path: str) -> list[Problem]:
    last = messages[-1] if isinstance(messages, list) and messages else None
    finish_reason = last.get("finish_reason") if isinstance(last, dict) else None
    if finish_reason is not None and (not isinstance(finish_reason, str) or len(finish_reason) > FINISH_MAX):
        return [(f"{path}[{len(messages) - 1}].finish_reason",
                 f"must be a string of at most {FINISH_MAX} characters, such as 'stop' or 'length'")]
    return []


def prompt_of(messages: list[dict], where: str) -> list[dict]:
    """The prompt the dialog's last message answers: it holds a 'user' message and does not end with the
    assistant's."""
    prompt = messages[:-1]
    if not any(m["role"] == "user" for m in prompt) or prompt[-1]["role"] == "assistant":
        raise DialogRefused((f"{where}.messages",
                             "needs a prompt with a 'user' message, followed by one assistant response"))
    return prompt


def is_good(dialog: dict, where: str, *, last: bool) -> bool:
    """The dialog's `annotate.is_good`; unset, onPanda's default holds: the last dialog is the good one."""
    annotate = dialog.get("annotate") or {}
    verdict = annotate.get("is_good") if isinstance(annotate, dict) else None
    if not isinstance(annotate, dict) or not isinstance(verdict, bool | None):
        raise DialogRefused((f"{where}.annotate.is_good", "must be true, false or null"))
    return last if verdict is None else verdict


def operations_of(dialog: dict, where: str) -> list[dict]:
    operations = dialog.get("operations") or []
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise DialogRefused((f"{where}.operations", "must be a list of objects"))
    first = operations[0] if operations else {}
    if len(model_of(first)) > MODEL_MAX:
        raise DialogRefused((f"{where}.operations[0].chat_config.model",
                             f"must be at most {MODEL_MAX} characters long"))
    return operations


def parent_of(operations: list[dict], where: str) -> int | None:
    """The key of the dialog this one corrects, as its first operation names it; None for a new tree's root."""
    first = operations[0] if operations else {}
    if not first.get("parent") or any(first.get(flag) for flag in ROOT_FLAGS):
        return None
    try:
        return int(first["parent"])
    except (TypeError, ValueError):
        raise DialogRefused((f"{where}.operations[0].parent", "must be the key of another dialog")) from None


def model_of(operation: dict) -> str:
    """The model an operation's `chat_config` names ("" for none)."""
    config = operation.get("chat_config")
    return str(config.get("model") or "") if isinstance(config, dict) else ""
