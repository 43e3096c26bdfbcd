"""The shared plumbing of every line-based import (JSONL uploads).

An import goes reader -> parser -> validator -> writer:

- the reader (`read_lines`) turns an iterable of lines (bytes or str: a list), or a binary file
  (a Django `UploadedFile`, an open file), into numbered text, reporting undecodable or oversized
  lines, a byte-order mark and an empty file instead of raising; a file is read in chunks, so a
  line too long to import is counted and dropped, never held whole in memory;
  wrap the lines in `HashingLines` first when the importer needs the sha256 of the whole file;
- each app's parser and validator turn a line into a record, or into errors;
- the writer stores the records in one transaction.

Every problem is a `LineError` — {file, line, field, message} — collected in an `ImportReport`.
A dry run reports without writing. A file imports whole or not at all, unless the caller asks
to skip bad lines. Records carry a content hash (`canonical_sha256`), so importing the same
record again adds nothing.
"""

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import models

MAX_LINE_BYTES = 1_000_000
# Deeper JSON is refused: nothing we import nests this deep, and Python's json (and json.dumps, and the
# checks below) recurse, so a line of 100,000 "[" would otherwise end in a RecursionError.
MAX_JSON_DEPTH = 100
READ_CHUNK_BYTES = 64 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian (UTF-32 LE starts the same way)
# NUL and unpaired surrogates: valid in a JSON string, but PostgreSQL (text or jsonb) and UTF-8 cannot hold them.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass
class LineError:
    file: str
    line: int
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


@dataclass
class ImportReport:
    file: str
    dry_run: bool
    lines: int = 0
    created: int = 0
    duplicates: int = 0
    skipped: int = 0
    errors: list[LineError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "lines": self.lines, "created": self.created,
                "duplicates": self.duplicates, "skipped": self.skipped, "errors": [e.as_dict() for e in self.errors]}


def canonical_sha256(obj) -> str:
    """sha256 of the canonical JSON of `obj`: the same content hashes the same however its keys were ordered."""
    canonical = json.dumps(obj, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TooLongLine:
    """Stands in for a line longer than MAX_LINE_BYTES: its bytes were read (and hashed) but never kept."""

    size: int  # bytes (characters, for text), without the line ending


def _file_chunks(source) -> Iterator[bytes | str] | None:
    """The chunks of a file-like `source`; None when `source` is already an iterable of lines.

    Iterating a Django `UploadedFile` (or an open file) by lines would build each line whole, however long;
    reading fixed chunks and cutting them here keeps memory bounded by MAX_LINE_BYTES.
    """
    if hasattr(source, "chunks"):  # a Django File: chunks() starts from the beginning of the file
        return source.chunks(READ_CHUNK_BYTES)
    if hasattr(source, "read"):
        return _read_chunks(source)
    return None


def _read_chunks(file) -> Iterator[bytes | str]:
    while chunk := file.read(READ_CHUNK_BYTES):
        yield chunk


def _ending(line: bytes | str) -> int:
    """The length of a line's ending: 2 for CRLF, 1 for LF, 0 for a last line without one."""
    newline = b"\n" if isinstance(line, bytes) else "\n"
    if not line.endswith(newline):
        return 0
    return 2 if line[-2:-1] in (b"\r", "\r") else 1


def _split_lines(chunks: Iterable[bytes | str]) -> Iterator[bytes | str | TooLongLine]:
    """Cut chunks into lines (each ending in a newline but maybe the last); an overlong line is a TooLongLine."""
    parts: list | None = []  # the current line's pieces; None once it is too long to keep
    size = 0  # the current line's length so far, kept or not
    for chunk in chunks:
        newline = b"\n" if isinstance(chunk, bytes) else "\n"
        start = 0
        while start < len(chunk):
            end = chunk.find(newline, start)
            stop = len(chunk) if end < 0 else end + 1
            size += stop - start
            # Two bytes of slack for a CRLF ending, which does not count towards the limit.
            if parts is not None and size <= MAX_LINE_BYTES + 2:
                parts.append(chunk[start:stop])
            else:
                parts = None
            if end >= 0:
                yield _whole_line(parts, size, chunk[max(start, stop - 2):stop])
                parts, size = [], 0
            start = stop
    if size:
        yield _whole_line(parts, size, b"")


def _whole_line(parts: list | None, size: int, tail: bytes | str) -> bytes | str | TooLongLine:
    """The line made of `parts`, or a TooLongLine when it was dropped; `tail` is how the line ended."""
    if parts is None:
        return TooLongLine(size - _ending(tail))
    line = tail[:0].join(parts)
    return TooLongLine(size - _ending(line)) if size - _ending(line) > MAX_LINE_BYTES else line


class HashingLines:
    """Hands lines on unchanged while keeping the sha256 of every byte seen (str lines count as UTF-8).

    A file-like source is read in chunks (each hashed) and cut into lines, overlong ones as TooLongLine."""

    def __init__(self, lines: Iterable[bytes | str]):
        self._lines = lines
        self._hash = hashlib.sha256()

    def _update(self, raw: bytes | str) -> None:
        self._hash.update(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"))

    def __iter__(self) -> Iterator[bytes | str | TooLongLine]:
        chunks = _file_chunks(self._lines)
        if chunks is None:
            for raw in self._lines:
                self._update(raw)
                yield raw
            return
        yield from _split_lines(self._hashed(chunks))

    def _hashed(self, chunks: Iterable[bytes | str]) -> Iterator[bytes | str]:
        for chunk in chunks:
            self._update(chunk)
            yield chunk

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class FileTooLarge(ValueError):
    """An upload over settings.IMPORT_MAX_FILE_BYTES; the message names the file, its size and the limit."""


def human_bytes(count: int) -> str:
    """512 -> "512 bytes", 1536 -> "1.5 KiB", 2 * 1024**3 -> "2.0 GiB" (binary units, as the setting is)."""
    if count < 1024:
        return f"{count:,} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def check_upload_size(upload) -> None:
    """Refuse an uploaded file over IMPORT_MAX_FILE_BYTES (raise FileTooLarge) from `upload.size` alone,
    before a byte is read: every upload entry point calls this before it hands the file on."""
    limit = settings.IMPORT_MAX_FILE_BYTES
    if upload.size <= limit:
        return
    size, most = human_bytes(upload.size), human_bytes(limit)
    if size == most:  # one decimal hides the difference ("2.0 GiB is over the 2.0 GiB limit"): say the bytes
        size, most = f"{upload.size:,} bytes", f"{limit:,} bytes"
    raise FileTooLarge(f"{upload.name}: {size} is over the {most} limit per file (IMPORT_MAX_FILE_BYTES)")


SAVE_AS_UTF8 = "save the file as UTF-8 without a byte-order mark and import it again"
EMPTY_FILE = "the file is empty: it holds no lines of JSON (one JSON object per line)"


def decode_whole_file(data: bytes) -> str:
    """The text of a small uploaded file read whole (a taxonomy); ValueError with the line and what
    to do when it is UTF-16 or not UTF-8. A UTF-8 byte-order mark is dropped: YAML allows one."""
    if data.startswith(UTF16_BOMS):
        raise ValueError(f"line 1: not UTF-8: the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                         f"{SAVE_AS_UTF8}")
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"line {line}: not UTF-8 ({exc.reason} at byte {exc.start}); {SAVE_AS_UTF8}") from None


def _decode(raw: bytes | str | TooLongLine, first: bool) -> tuple[str | None, str | None, bool]:
    """(text, problem, give up on the rest of the file) for one physical line."""
    if isinstance(raw, TooLongLine):
        return None, f"line is {raw.size:,} bytes long; a line may hold at most {MAX_LINE_BYTES:,} bytes", False
    if isinstance(raw, bytes):
        if first and raw.startswith(UTF16_BOMS):
            # Every later "line" is half of a UTF-16 character or worse: one error says it all.
            return None, f"not UTF-8: the file is UTF-16 (it starts with a UTF-16 byte-order mark); {SAVE_AS_UTF8}", True
        if first and raw.startswith(UTF8_BOM):
            return None, f"the file starts with a UTF-8 byte-order mark (BOM); {SAVE_AS_UTF8}", False
    elif first and raw.startswith("\ufeff"):
        return None, f"the file starts with a byte-order mark (BOM); {SAVE_AS_UTF8}", False
    size = len(raw) - _ending(raw)
    if size > MAX_LINE_BYTES:
        return None, f"line is {size:,} bytes long; a line may hold at most {MAX_LINE_BYTES:,} bytes", False
    if (b"\x00" if isinstance(raw, bytes) else "\x00") in raw:
        # Never in JSON text (a NUL inside a string is written \u0000); typical of UTF-16 without a BOM.
        return None, f"holds NUL bytes, so it is not UTF-8 text (is the file UTF-16?); {SAVE_AS_UTF8}", False
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"not UTF-8 ({exc.reason} at byte {exc.start}); {SAVE_AS_UTF8}", False
    return raw, None, False


def read_lines(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, problem) for each non-blank line; exactly one of text and problem is set.

    `lines` is an iterable of lines (bytes or str) or a binary file (read in chunks). A file with no
    non-blank line yields (0, None, problem): an empty file is an error, not an import of nothing.
    Turn a problem into a LineError with `read_error`.
    """
    chunks = _file_chunks(lines)
    physical = lines if chunks is None else _split_lines(chunks)
    anything = False
    for number, raw in enumerate(physical, start=1):
        text, problem, give_up = _decode(raw, first=number == 1)
        if problem:
            anything = True
            yield number, None, problem
            if give_up:
                return
        elif text.strip():
            anything = True
            yield number, text, None
    if not anything:
        yield 0, None, EMPTY_FILE


def read_error(file: str, number: int, problem: str) -> LineError:
    """The LineError for a problem `read_lines` yielded: on the whole file when it names line 0."""
    return LineError(file, number, "(file)" if number == 0 else "(line)", problem)


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
    raise JsonProblem(f"invalid JSON: {name} is not allowed")


def _loads(text: str):
    """json.loads, raising only json.JSONDecodeError (bad syntax) or JsonProblem (with an empty path)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_json_object)
    except (json.JSONDecodeError, JsonProblem):
        raise
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise JsonProblem(f"invalid JSON: nested more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise JsonProblem(f"invalid JSON: {exc}") from None


def load_json(text: str):
    """`json.loads` for untrusted text. Raises json.JSONDecodeError for bad syntax and JsonProblem for
    what standard JSON or the database refuses: NaN or Infinity, a number beyond a float (1e999) or
    an integer of more than 4,300 digits, a key given twice in one object, nesting deeper than
    MAX_JSON_DEPTH, a NUL character or an unpaired surrogate."""
    data = _loads(text)
    check_storable(data)
    return data


UNSTORABLE_MESSAGE = "contains a NUL character or an unpaired surrogate (\\u0000, \\ud800-\\udfff), which cannot be stored"


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
        return (UNSTORABLE_MESSAGE, []) if UNSTORABLE.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else ("is a number too large to store", [])
    if isinstance(value, dict):
        if depth > MAX_JSON_DEPTH:
            return f"nested more than {MAX_JSON_DEPTH} levels deep", []
        if isinstance(value, _RepeatedKey):
            return "is given twice in one object", [value.repeated]
        for key, item in value.items():
            if UNSTORABLE.search(key):
                return UNSTORABLE_MESSAGE, [key]
            found = _first_problem(item, depth + 1)
            if found is not None:
                found[1].append(key)
                return found
    elif isinstance(value, list):
        if depth > MAX_JSON_DEPTH:
            return f"nested more than {MAX_JSON_DEPTH} levels deep", []
        for index, item in enumerate(value):
            found = _first_problem(item, depth + 1)
            if found is not None:
                found[1].append(index)
                return found
    return None


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
        return None, LineError(file, number, "(line)", f"invalid JSON: {exc.msg} at column {exc.colno}")
    except JsonProblem as exc:
        return None, LineError(file, number, "(line)", exc.message)
    if not isinstance(data, dict):
        return None, LineError(file, number, "(line)", "each line must be a JSON object")
    try:
        check_storable(data)
    except JsonProblem as exc:
        inner = json_path(exc.path)
        inner = f"{inner} " if len(exc.path) > 1 and len(inner) <= 80 else ""  # no a[0][0][0]... for deep nesting
        return None, LineError(file, number, str(exc.path[0]) if exc.path else "(line)", inner + exc.message)
    return data, None


MAX_ERRORS_SHOWN = 200  # a page lists this many line errors; the rest are counted


def page_import(request, importer, **arguments) -> dict | None:
    """Run `importer` on a page form's uploaded `file` (with its dry_run and skip_bad_lines boxes) and
    return what the `frontend/import_result.html` partial shows; None when no file was chosen."""
    upload = request.FILES.get("file")
    if upload is None:
        return None
    dry_run = bool(request.POST.get("dry_run"))
    try:
        check_upload_size(upload)
    except FileTooLarge as exc:  # refused whole from its size: the importer never sees it
        report = ImportReport(file=upload.name, dry_run=dry_run, errors=[read_error(upload.name, 0, str(exc))])
    else:
        report = importer(lines=upload, file=upload.name, dry_run=dry_run,
                          skip_bad_lines=bool(request.POST.get("skip_bad_lines")), **arguments)
    report = report.as_dict()
    return {"report": report, "errors": report["errors"][:MAX_ERRORS_SHOWN],
            "more_errors": max(0, len(report["errors"]) - MAX_ERRORS_SHOWN), "written": report["created"] > 0,
            # an error on line 0 is about the whole file (too big, empty...): no line to fix or skip
            "file_refused": any(error["line"] == 0 for error in report["errors"])}


class ImportedFile(models.Model):
    """What every app records of an imported file: the same bytes imported again into a project add
    nothing (a subclass adds the project foreign key and a unique (project, sha256) constraint)."""

    filename = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    rows = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
