"""The check of a chat `messages` list as an importer receives it: `[{role, content, ...}, ...]`.

Every importer of chats runs it (annotate's prompts and .panda.json dialogs, the SWE Labeler's
trajectories, AED's and ATD's imports), each with its own policy as options:

- `roles`: the set a role must be one of, or None for any non-empty string (trajectories name roles
  of their own, such as "agent");
- `content`: what a message's content may be and how its text is read: `STRING`,
  `STRING_OR_TEXT_PARTS` (onPanda's multi-part text) or `ANY_PARTS_OR_NULL` (OpenAI's content parts,
  and null beside tool calls);
- `message_rules`: an importer's own rules for each message, checked after the shared ones.

It reports every problem as a (field path, message) pair, which each importer turns into its own
errors, and reads the text of each message for the importers that store text.
"""

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from django.utils.translation import gettext, gettext_noop

Problem = tuple[str, str]  # (field path, message)


@dataclass(frozen=True)
class ContentRule:
    """What a message's content may be. `text` reads the content's text, or gives None when the content is
    not allowed; `refusal` then says what it must be."""

    text: Callable[[object], str | None]
    refusal: str  # marked with gettext_noop; translated where it is reported


def _string(content) -> str | None:
    return content if isinstance(content, str) else None


def _string_or_text_parts(content) -> str | None:
    if isinstance(content, list) and all(isinstance(part, dict) and part.get("type") == "text"
                                         and isinstance(part.get("text"), str) for part in content):
        return "".join(part["text"] for part in content)
    return _string(content)


def _any_parts_or_null(content) -> str | None:
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "\n".join(part["text"] for part in content
                         if part.get("type", "text") == "text" and isinstance(part.get("text"), str))
    return _string(content)


STRING = ContentRule(_string, gettext_noop("must be a string"))
# onPanda writes long text as a list of text chunks; together they are the message's text.
STRING_OR_TEXT_PARTS = ContentRule(_string_or_text_parts, gettext_noop("must be text (a string or a list of text chunks)"))
# OpenAI's: null beside tool calls, or parts of any type (images...) of which the text parts are read, one a line.
ANY_PARTS_OR_NULL = ContentRule(_any_parts_or_null,
                                gettext_noop("must be a string, null, or a list of content-part objects"))


@dataclass
class CheckedMessages:
    problems: list[Problem] = field(default_factory=list)
    texts: list[str | None] = field(default_factory=list)  # one a message; None for a message with a problem


def check_messages(messages, *, path: str = "messages", roles: Collection[str] | None = None,
                   content: ContentRule = STRING,
                   message_rules: Callable[[dict, str], Iterable[Problem]] | None = None) -> CheckedMessages:
    """Check `messages` (found at `path`): a non-empty list of objects, each with a role and a content
    as the options allow. `message_rules(message, its path)` gives an importer's own problems with an
    object message."""
    checked = CheckedMessages()
    if not isinstance(messages, list) or not messages:
        checked.problems.append((path, gettext("must be a non-empty list of {role, content} objects")))
        return checked
    for index, message in enumerate(messages):
        where = f"{path}[{index}]"
        if not isinstance(message, dict):
            checked.problems.append((where, gettext("must be an object with role and content")))
            checked.texts.append(None)
            continue
        found = []
        if (refusal := _role_refusal(message.get("role"), roles)) is not None:
            found.append((f"{where}.role", refusal))
        text = content.text(message.get("content"))
        if text is None:
            found.append((f"{where}.content", gettext(content.refusal)))
        if message_rules is not None:
            found.extend(message_rules(message, where))
        checked.problems.extend(found)
        checked.texts.append(None if found else text)
    return checked


def _role_refusal(role, roles: Collection[str] | None) -> str | None:
    if roles is None:
        return None if isinstance(role, str) and role.strip() else gettext("must be a non-empty string")
    return (None if isinstance(role, str) and role in roles
            else gettext("must be one of %(roles)s") % {"roles": ", ".join(sorted(roles))})
