"""The parser's shared part: untrusted JSON text to Python values, refusing what cannot be stored, and
the content hash that makes importing the same record twice add nothing."""

import hashlib
import json
import math
import re

from django.utils.translation import gettext, gettext_noop

from .report import LineError

# Deeper JSON is refused: nothing we import nests this deep, and Python's json (and json.dumps, and the
# checks below) recurse, so a line of 100,000 "[" would otherwise end in a RecursionError.
MAX_JSON_DEPTH = 100
# NUL and unpaired surrogates: valid in a JSON string, but PostgreSQL (text or jsonb) and UTF-8 cannot hold them.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Integers outside 64 bits: JSON allows any number of digits, but exports write Arrow int64/uint64 columns,
# PostgreSQL's bigint stops here, and RFC 8259 (section 6) warns that peers may not read them exactly.
# (Python itself refuses more than 4,300 digits while parsing, so the text cannot make this check slow.)
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**64 - 1


def canonical_sha256(obj) -> str:
    """sha256 of the canonical JSON of `obj`: the same content hashes the same however its keys were ordered."""
    canonical = json.dumps(obj, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class JsonProblem(ValueError):
    """Valid JSON syntax that still cannot be imported. `path` holds the keys and list indexes from the top
    down to the value at fault; it is empty when the text as a whole is at fault."""

    def __init__(self, message: str, path: tuple = ()):
        super().__init__(message)
        self.message = message
        self.path = path


class _RepeatedKey(dict):
    """An object that gave some key twice (Python's json would keep the last value without a word)."""

    repeated = ""


def _json_object(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    repeated = _RepeatedKey(obj)
    repeated.repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
    return repeated


def _reject_constant(name: str):
    # Python's json accepts NaN and Infinity; standard JSON (and PostgreSQL's jsonb) does not.
    raise JsonProblem(gettext("invalid JSON: %(name)s is not allowed") % {"name": name})


def _loads(text: str):
    """json.loads, raising only json.JSONDecodeError (bad syntax) or JsonProblem (with an empty path)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_json_object)
    except (json.JSONDecodeError, JsonProblem):
        raise
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise JsonProblem(gettext("invalid JSON: nested more than %(depth)s levels deep") % {"depth": MAX_JSON_DEPTH}) \
            from None
    except ValueError as exc:  # an integer of more digits than Python converts (Python's words)
        raise JsonProblem(gettext("invalid JSON: %(problem)s") % {"problem": exc}) from None


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_json_object)


def load_json_at(text: str, index: int) -> tuple[object, int]:
    """(the JSON value that starts at text[index], the index after it): a document's records one at a time, so each
    is known by where it starts. Raises as `load_json` does; the caller checks the value (`check_storable`)."""
    try:
        return _DECODER.raw_decode(text, index)
    except (json.JSONDecodeError, JsonProblem):
        raise
    except RecursionError:
        raise JsonProblem(gettext("invalid JSON: nested more than %(depth)s levels deep") % {"depth": MAX_JSON_DEPTH}) \
            from None
    except ValueError as exc:
        raise JsonProblem(gettext("invalid JSON: %(problem)s") % {"problem": exc}) from None


def load_json(text: str):
    """`json.loads` for untrusted text. Raises json.JSONDecodeError for bad syntax and JsonProblem for
    what standard JSON or the database refuses: NaN or Infinity, a number beyond a float (1e999) or
    an integer of more than 4,300 digits, a key given twice in one object, nesting deeper than
    MAX_JSON_DEPTH, an integer outside 64 bits, a NUL character or an unpaired surrogate."""
    data = _loads(text)
    check_storable(data)
    return data


UNSTORABLE_MESSAGE = gettext_noop("contains a NUL character or an unpaired surrogate (\\u0000, \\ud800-\\udfff), which "
                                  "cannot be stored")


def check_storable(data) -> None:
    """Raise JsonProblem (with the path) at the first value, in document order, that cannot be imported."""
    found = _first_problem(data, 1)
    if found is not None:
        message, path = found
        raise JsonProblem(message, tuple(reversed(path)))


def _first_problem(value, depth: int) -> tuple[str, list] | None:
    """(message, path from the value down, reversed) of the first problem; None if there is none.

    Recursive, but never deeper than MAX_JSON_DEPTH: deeper data is refused before it is walked."""
    if isinstance(value, str):
        return (gettext(UNSTORABLE_MESSAGE), []) if UNSTORABLE.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (gettext("is a number too large to store"), [])
    if isinstance(value, int) and not isinstance(value, bool):
        return None if MIN_INTEGER <= value <= MAX_INTEGER else (gettext("is a number too large to store"), [])
    if isinstance(value, dict):
        if depth > MAX_JSON_DEPTH:
            return gettext("nested more than %(depth)s levels deep") % {"depth": MAX_JSON_DEPTH}, []
        if isinstance(value, _RepeatedKey):
            return gettext("is given twice in one object"), [value.repeated]
        for key, item in value.items():
            if UNSTORABLE.search(key):
                return gettext(UNSTORABLE_MESSAGE), [key]
            found = _first_problem(item, depth + 1)
            if found is not None:
                found[1].append(key)
                return found
    elif isinstance(value, list):
        if depth > MAX_JSON_DEPTH:
            return gettext("nested more than %(depth)s levels deep") % {"depth": MAX_JSON_DEPTH}, []
        for index, item in enumerate(value):
            found = _first_problem(item, depth + 1)
            if found is not None:
                found[1].append(index)
                return found
    return None


# What Python's json decoder says (json.JSONDecodeError.msg), in the interface's language.
JSON_ERRORS = frozenset((
    gettext_noop("Expecting value"), gettext_noop("Extra data"), gettext_noop("Expecting ',' delimiter"),
    gettext_noop("Expecting ':' delimiter"), gettext_noop("Expecting property name enclosed in double quotes"),
    gettext_noop("Unterminated string starting at"), gettext_noop("Invalid \\uXXXX escape")))
_INVALID_ESCAPE = re.compile(r"^Invalid \\escape: (.*)$", re.DOTALL)
_CONTROL_CHARACTER = re.compile(r"^Invalid control character (.*) at$", re.DOTALL)


def json_error(msg: str) -> str:
    """A json.JSONDecodeError's `msg` translated: Python's own words when it says something not listed here."""
    if msg in JSON_ERRORS:
        return gettext(msg)
    if match := _INVALID_ESCAPE.match(msg):
        return gettext("Invalid \\escape: %(escape)s") % {"escape": match[1]}
    if match := _CONTROL_CHARACTER.match(msg):
        return gettext("Invalid control character %(character)s at") % {"character": match[1]}
    return msg


def json_path(path: tuple) -> str:
    """("messages", 0, "content") -> "messages[0].content"."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
    return text


def parse_json_object(file: str, number: int, text: str) -> tuple[dict | None, LineError | None]:
    """Parse one line that must hold a JSON object of storable values.

    The error, if any, is on the field "(line)", or on the top-level key whose value cannot be imported.
    """
    try:
        data = _loads(text)
    except json.JSONDecodeError as exc:
        return None, LineError(file, number, "(line)", gettext("invalid JSON: %(problem)s at column %(column)s")
                               % {"problem": json_error(exc.msg), "column": exc.colno})
    except JsonProblem as exc:
        return None, LineError(file, number, "(line)", exc.message)
    if not isinstance(data, dict):
        return None, LineError(file, number, "(line)", gettext("each line must be a JSON object"))
    try:
        check_storable(data)
    except JsonProblem as exc:
        inner = json_path(exc.path)
        inner = f"{inner} " if len(exc.path) > 1 and len(inner) <= 80 else ""  # no a[0][0][0]... for deep nesting
        return None, LineError(file, number, str(exc.path[0]) if exc.path else "(line)", inner + exc.message)
    return data, None
