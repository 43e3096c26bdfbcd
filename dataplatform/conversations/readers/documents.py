"""Trace files, told from their content, never from their name: JSON Lines (one record a line), one JSON document
written over many lines, or a session log whose lines are the entries of one run.

- **A document**: the file's first line opens a JSON value it does not close (`[`, or `{` alone, as pretty-printers
  and SWE-agent write them). It is read whole (at most MAX_DOCUMENT_BYTES): an array's elements are records (a
  tau-bench results file), or, when they are all chat messages, the one conversation `{"messages": [...]}` (a
  mini-swe-agent trajectory as its tests save it); an object is one record (a SWE-agent `.traj`, a mini-swe-agent
  `.traj.json`), or, when it is no trace and every value is an object, one record a value. A record's problems
  name the line it starts on. A document that does not parse is one error naming the line and column, and saying
  it was read as a document, never one "invalid JSON" a line.
- **A session log**: the first line is an entry of a Claude Code session or of a Codex CLI rollout
  (`claude_code.is_entry`, `codex.is_line`). The whole file is one record, `{"entries": [...]}`, its lines in
  order (at most MAX_DOCUMENT_BYTES together); a problem in `entries[i]` names that entry's line.
- **JSON Lines** otherwise, as `read_lines` reads them (at most MAX_LINE_BYTES a line).

`trace_records(lines, file)` yields each record, or each problem, as a `Read`. A document holding one record is
named after its file when the tool names files after the task (`<instance_id>.traj`, `<instance_id>.traj.json`).
"""

import itertools
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePath

from django.utils.translation import gettext

from dataplatform.imports import (
    JsonProblem,
    LineError,
    check_storable,
    human_bytes,
    json_error,
    json_path,
    load_json_at,
    parse_json_object,
    read_lines,
)

from . import claude_code, codex
from .detect import detect

DOCUMENT_SUFFIXES = (".traj.json", ".traj")  # SWE-agent and mini-swe-agent name a run's file after its task
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # a document or a session log is read whole; a real one is a few MB
ENTRIES = "entries"
_ENTRY_PATH = re.compile(r"^entries\[(\d+)\]\.?(.*)$", re.DOTALL)
_WHITESPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Read:
    """One record of a trace file, or one problem of it (then `record` is None)."""

    line: int  # where the record starts; 0 for the whole file
    record: dict | None = None
    problem: str = ""
    field: str = "(line)"
    name: str = ""  # the task the file is named after, for a record that names none
    end: int = 0  # the record's last line
    lines: tuple[int, ...] = ()  # a session log's: the line of each entry

    def error(self, file: str) -> LineError:
        """The problem of a Read without a record, as an import reports it."""
        return LineError(file, self.line, self.field, self.problem)

    def at(self, field: str) -> tuple[int, str]:
        """(line, field) of a problem a reader found at `field` of this record."""
        match = _ENTRY_PATH.match(field) if self.lines else None
        if match and int(match[1]) < len(self.lines):
            return self.lines[int(match[1])], match[2] or "(line)"
        return self.line, field


def document_name(file: str) -> str:
    """The task a run's file is named after ("django__django-11099.traj" -> "django__django-11099"); "" else."""
    name = PurePath(file).name
    return next((name[:-len(suffix)] for suffix in DOCUMENT_SUFFIXES if name.endswith(suffix) and name != suffix), "")


def trace_records(lines: Iterable[bytes | str], file: str) -> Iterator[Read]:
    texts = read_lines(lines)
    for number, text, problem in texts:
        if problem:
            yield Read(number, problem=problem, field="(file)" if number == 0 else "(line)", end=number)
            continue
        rest = itertools.chain([(number, text, None)], texts)
        if _opens_document(text):
            yield from _document(rest, file, bracket=text.lstrip().startswith("["))
            return
        data, _ = parse_json_object(file, number, text)
        if data is not None and (claude_code.is_entry(data) or codex.is_line(data)):
            yield from _session_log(rest, file)
        else:
            yield from _json_lines(rest, file)
        return


def _opens_document(text: str) -> bool:
    start = text.lstrip()[:1]
    if start == "[":
        return True
    if start != "{":
        return False
    try:
        json.loads(text)
    except ValueError:
        return True  # a line that opens an object and does not close it
    return False


def _whole(text: str) -> bool:
    """Whether a line holds a whole JSON value."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_lines(texts, file: str) -> Iterator[Read]:
    for number, text, problem in texts:
        if problem:
            yield Read(number, problem=problem, end=number)
            continue
        data, error = parse_json_object(file, number, text)
        yield Read(number, data, end=number) if error is None else Read(number, problem=error.message,
                                                                        field=error.field, end=number)


def _too_large(message: str) -> Read:
    return Read(0, problem=message % {"limit": human_bytes(MAX_DOCUMENT_BYTES)}, field="(file)")


def _session_log(texts, file: str) -> Iterator[Read]:
    entries, numbers, size, readable = [], [], 0, True
    for number, text, problem in texts:
        data, error = (None, None) if problem else parse_json_object(file, number, text)
        if data is None:
            readable = False
            yield Read(number, problem=problem or error.message, field="(line)" if problem else error.field,
                       end=number)
            continue
        size += len(text)
        if size > MAX_DOCUMENT_BYTES:
            yield _too_large(gettext("a session log is read whole, as one trace, and this one is over %(limit)s"))
            return
        entries.append(data)
        numbers.append(number)
    if readable:
        yield Read(numbers[0], {ENTRIES: entries}, end=numbers[-1], lines=tuple(numbers))


class _Text:
    """A document's text joined from its lines, with the file line each character is on."""

    def __init__(self):
        self.parts, self.starts, self.numbers, self.size = [], [], [], 0

    def add(self, number: int, text: str) -> None:
        self.starts.append(self.size)
        self.numbers.append(number)
        self.parts.append(text)
        self.size += len(text)

    def line(self, position: int) -> int:
        return self.numbers[max(bisect_right(self.starts, position) - 1, 0)]


def _document(texts, file: str, *, bracket: bool) -> Iterator[Read]:
    document, readable = _Text(), True
    for number, text, problem in texts:
        if problem:
            readable = False
            yield Read(number, problem=problem, end=number)
            continue
        document.add(number, text)
        if document.size > MAX_DOCUMENT_BYTES:
            yield _too_large(gettext("a file that is one JSON document (its first line opens it) is read whole, and this "
                                     "one is over %(limit)s; write its records as JSON Lines, one a line, instead "
                                     "(for an array: jq -c '.[]')"))
            return
    if not readable:
        return
    text, reads = "".join(document.parts), []
    try:
        reads = list(_values(text, document, bracket))
    except json.JSONDecodeError as exc:
        line = document.line(exc.pos)
        if _whole(document.parts[0]) or not bracket and (line == document.numbers[0]
                                                         or any(map(_whole, document.parts[1:3]))):
            # JSON Lines whose first line is broken, or holds no object (the lines after it hold whole records).
            yield from _json_lines(zip(document.numbers, document.parts, itertools.repeat(None)), file)
            return
        yield Read(line, problem=gettext("invalid JSON: %(problem)s at column %(column)s; the file is read as one JSON "
                                         "document, as its first line opens one (JSON Lines hold a whole record on "
                                         "each line)") % {"problem": json_error(exc.msg), "column": exc.colno},
                   end=document.numbers[-1])
        return
    except JsonProblem as exc:
        yield Read(document.numbers[0], problem=exc.message, end=document.numbers[-1])
        return
    yield from _records(reads, document_name(file), bracket=bracket, first=document.numbers[0],
                        end=document.numbers[-1])


def _values(text: str, document: _Text, bracket: bool) -> Iterator[tuple[int, object]]:
    """(line, value) of each element of the array `text` holds, or of the one value it holds."""
    position = _WHITESPACE.match(text).end()
    if not bracket:
        value, position = load_json_at(text, position)
        _end(text, position)
        yield document.line(_WHITESPACE.match(text).end()), value
        return
    position = _WHITESPACE.match(text, position + 1).end()
    if text[position:position + 1] == "]":
        _end(text, position + 1)
        return
    while True:
        value, after = load_json_at(text, position)
        yield document.line(position), value
        position = _WHITESPACE.match(text, after).end()
        if text[position:position + 1] == "]":
            _end(text, position + 1)
            return
        if text[position:position + 1] != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
        position = _WHITESPACE.match(text, position + 1).end()


def _end(text: str, position: int) -> None:
    """Nothing but whitespace may follow the document."""
    position = _WHITESPACE.match(text, position).end()
    if position < len(text):
        raise json.JSONDecodeError("Extra data", text, position)


def _records(values: list[tuple[int, object]], name: str, *, bracket: bool, first: int, end: int) -> Iterator[Read]:
    """The records a document's values are (see the module docstring)."""
    if not bracket:
        line, value = values[0]
        if isinstance(value, dict) and value and detect(value) is None and all(isinstance(item, dict)
                                                                                for item in value.values()):
            for key, item in value.items():  # an object of records, each named by its key
                yield _checked(line, item, key, end)
            return
        yield _checked(line, value, name, end)
        return
    if not values:
        yield Read(first, problem=gettext("the document holds no records: it is an empty list"), end=end)
        return
    if all(isinstance(value, dict) and isinstance(value.get("role"), str) for _, value in values):
        yield _checked(values[0][0], {"messages": [value for _, value in values]}, name, end, path="messages")
        return
    for line, value in values:
        yield _checked(line, value, name if len(values) == 1 else "", end)


def _checked(line: int, value: dict, name: str, end: int, path: str = "") -> Read:
    """The record, or its first value the database cannot hold."""
    if not isinstance(value, dict):
        return Read(line, problem=gettext("each record must be a JSON object"), end=end)
    try:
        check_storable(value)
    except JsonProblem as exc:
        where = json_path(((path,) if path else ()) + exc.path)
        return Read(line, problem=exc.message, field=where or "(line)", end=end)
    return Read(line, value, name=name, end=end)
