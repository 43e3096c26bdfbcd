"""What every trace reader gives back, and the helpers they share.

A reader turns one record of its format into a `TraceRecord` (the conversation in the one model, plus the
record's own facts: ids, model, scaffold, outcome, and everything else as `meta`), or into problems, each
(field path in the record as the file spells it, message).

Nothing is dropped silently: a record that reads to a conversation without a user turn (the task the agent was
given), or whose assistant turns are all empty although the source recorded actions, is refused by
`conversation_of` with a problem naming what is missing, never imported as an empty conversation; the events
a reader keeps in `meta` rather than in the conversation are counted per kind (`TraceRecord.outside`), for the
import report to show before anything is written.

Readers first build OpenAI-shaped message dicts from the record (`Built`: the dict, where in the record it
comes from, and the source's own fields of that message), then read them all with `read_conversation`, which
normalises spellings and finds what does not fit; `conversation_of` names each of its problems by the
record's own path (`history[5].tool_call_metadata.model_response.choices[0].message.content`), not by the
position of the built message.
"""

import math
import re
from dataclasses import dataclass, field, replace

from django.utils.translation import gettext, ngettext

from ..model import Conversation
from ..reading import Problem, read_conversation

# The path read_conversation gives the built list: a character no JSON path here starts with.
_BUILT = "@"
_BUILT_MESSAGE = re.compile(r"^@\[(\d+)\](.*)$", re.DOTALL)


@dataclass(frozen=True)
class TraceRecord:
    format: str  # the reader's name: "openai", "swe_agent", "openhands", "swe_labeler"
    conversation: Conversation
    extras: tuple[dict, ...]  # per message: the source's own fields beyond the message (event ids, flags...)
    trace_id: str = ""  # the run's own id; "" when the format has none (see `id_or`)
    task_id: str = ""  # the task the run attempts (a SWE-bench instance_id)
    model: str = ""
    harness: str = ""  # the agent scaffold that ran it
    environment: str = ""
    passed: bool | None = None  # None: the record does not say
    score: float | None = None  # the run's reward, when its format records one (tau-bench's `reward`)
    meta: dict = field(default_factory=dict)  # every other field of the record
    # Where each of the text fields above was read, for an importer's errors ("model": "metadata.llm_config.model").
    origins: dict = field(default_factory=dict)
    # The source's events kept in meta rather than in the conversation, counted per kind ("recall action": 2).
    outside: dict = field(default_factory=dict)

    def id_or(self, sha256: str) -> str:
        """The run's id, or one made from the task (or the format) and the record's content hash: stable, so
        the same record imported again is matched, and two runs of one task never collide."""
        return self.trace_id or f"{self.task_id or self.format}-{sha256[:12]}"

    def stored_messages(self) -> list[dict]:
        """The messages in the stored shape (`Message.as_dict()`), each with the source's own fields beside it."""
        return [extra | message.as_dict() for message, extra in zip(self.conversation.messages, self.extras,
                                                                    strict=True)]

    def named(self, task_id: str) -> "TraceRecord":
        """This record with `task_id` as its task when it names none (a SWE-agent .traj file is named after it)."""
        if self.task_id or not task_id:
            return self
        return replace(self, task_id=task_id, origins={**self.origins, "task_id": "(file name)"})


@dataclass
class Built:
    """A message built from the record, before it is read."""

    message: dict  # OpenAI-shaped: role, content, tool_calls, tool_call_id, reasoning...
    origin: str  # the record's path of the object the message's fields are read from
    extras: dict = field(default_factory=dict)


def conversation_of(built: list[Built], problems: list[Problem], *, list_path: str, tools=None,
                    tools_path: str = "tools", actions: int | None = None) -> Conversation | None:
    """Read the built messages (and the tools) into a Conversation; problems are named by the record's paths.

    A conversation without a user turn that says something (the task), or whose assistant turns are all empty
    (no text, reasoning or tool call) although the source recorded `actions` of the agent (by default: its
    assistant messages), is a problem on `list_path`: what is missing, never an empty import."""
    read = read_conversation([b.message for b in built], tools, path=_BUILT, tools_path=tools_path)
    for where, message in read.problems:
        match = _BUILT_MESSAGE.match(where)
        if match:
            where = built[int(match[1])].origin + match[2]
        elif where == _BUILT:
            where = list_path
        problems.append((where, message))
    if read.conversation is not None:
        if actions is None:
            actions = sum(1 for b in built if isinstance(b.message, dict) and b.message.get("role") == "assistant")
        problems.extend((list_path, message) for message in _missing(read.conversation, actions))
    return read.conversation


def _missing(conversation: Conversation, actions: int) -> list[str]:
    messages = conversation.messages
    missing = []
    if not any(m.role == "user" and m.content.strip() for m in messages):
        missing.append(gettext("reads to no user turn with text: the task the agent was given is missing"))
    if actions and not any(m.role == "assistant" and (m.content.strip() or m.reasoning.strip() or m.tool_calls)
                           for m in messages):
        missing.append(ngettext("the source records %(count)s action of the agent, but no assistant turn read from "
                                "it has text, reasoning or a tool call",
                                "the source records %(count)s actions of the agent, but no assistant turn read from "
                                "them has text, reasoning or a tool call", actions) % {"count": actions})
    return missing


# Where formats write whether the run passed, in the order they are tried: SWE-bench's evaluation of an OpenHands
# output, OpenHands' other benchmarks, the OpenHands resolver, tau-bench (a reward of 1 is a success).
OUTCOMES = (("test_result", "report", "resolved"), ("test_result", "result"), ("success",), ("reward",))


def outcome(record: dict) -> tuple[bool | None, float | None, str]:
    """(passed, score, the field read) from the first of OUTCOMES the record fills with a boolean (or, for a
    reward, a number); (None, None, "") when it says nothing."""
    for path in OUTCOMES:
        value = dig(record, *path)
        if path == ("reward",):
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return abs(value - 1) < 1e-6, float(value), "reward"
        elif isinstance(value, bool):
            return value, None, ".".join(path)
    return None, None, ""


def text(record: dict, key: str, problems: list[Problem], *, where: str = "", required: bool = False) -> str:
    """A text field of the record: "" when absent or null; a problem when it is not a string (or, when
    `required`, when it is blank)."""
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        problems.append((where or key, gettext("must be a non-empty string") if required else gettext("must be a string")))
        return ""
    return value


def dig(value, *path):
    """value[path[0]][path[1]]... for nested JSON objects and lists; None where the path leads nowhere."""
    for key in path:
        if isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value):
            value = value[key]
        elif isinstance(key, str) and isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def without(record: dict, *keys: str) -> dict:
    """The record's other fields: what a reader keeps as meta."""
    return {key: value for key, value in record.items() if key not in keys}


# What read_conversation reads of a message; a message's other fields are the source's own (`extras`).
MESSAGE_KEYS = ("role", "content", "reasoning_content", "reasoning", "thinking", "tool_calls", "tool_call_id", "name",
                "finish_reason")


def openai_messages(messages, path: str) -> list[Built]:
    """OpenAI-shaped messages as they are, each keeping its other fields (a fine-tuning file's `weight`...)."""
    if not isinstance(messages, list):
        return []
    return [Built(message, f"{path}[{index}]", without(message, *MESSAGE_KEYS) if isinstance(message, dict) else {})
            for index, message in enumerate(messages)]
