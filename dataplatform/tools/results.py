"""What a tool brings back, bounded before it is stored: a result becomes a tool message, is shown to the
annotator, put into the next prompt and trained on, so one server answering megabytes (a `cat` of a log, a
listing of a huge folder) must not become a megabyte prompt or a page that never loads."""

import json

from django.conf import settings

from dataplatform.imports.parsers import UNSTORABLE, JsonProblem, check_storable

MARKER_ROOM = 120  # the marker's characters, within the limit


def bounded_result_text(text: str) -> str:
    """A result's text cut to TOOL_RESULT_MAX_CHARS: its head and its tail (where an error or a summary
    usually is) around a marker that says how much was cut, as agent harnesses cut long observations.
    Characters that cannot be stored (NUL, unpaired surrogates) become U+FFFD."""
    text = UNSTORABLE.sub("\ufffd", text)
    limit = settings.TOOL_RESULT_MAX_CHARS
    if len(text) <= limit:
        return text
    kept = max(limit - MARKER_ROOM, 0)
    head = kept * 2 // 3
    marker = (f"\n[... {len(text) - kept:,} characters cut: the result was longer than {limit:,} characters "
              "...]\n")
    return text[:head] + marker + text[len(text) - (kept - head):]

def bounded_structured(value: dict | None) -> dict | None:
    """structuredContent as it came, or None when it could not be stored or is over TOOL_RESULT_MAX_CHARS as
    JSON (the text parts carry the same result, MCP's spec says, so nothing the model reads is lost)."""
    if value is None:
        return None
    try:
        check_storable(value)
        size = len(json.dumps(value, ensure_ascii=False))
    except (JsonProblem, TypeError, ValueError, RecursionError):
        return None
    return value if size <= settings.TOOL_RESULT_MAX_CHARS else None
