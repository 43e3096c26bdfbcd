"""The shared plumbing of every line-based import (JSONL uploads).

An import goes reader -> parser -> validator -> writer:

- the reader (`read_lines`) turns an iterable of lines (bytes or str: a list, or a Django
  `UploadedFile`) into numbered text, reporting undecodable or oversized lines instead of raising;
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
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings
from django.db import models

MAX_LINE_BYTES = 1_000_000
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


class HashingLines:
    """Hands lines on unchanged while keeping the sha256 of every byte seen (str lines count as UTF-8)."""

    def __init__(self, lines: Iterable[bytes | str]):
        self._lines = lines
        self._hash = hashlib.sha256()

    def __iter__(self) -> Iterator[bytes | str]:
        for raw in self._lines:
            self._hash.update(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"))
            yield raw

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def read_lines(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, decoding problem) for each non-blank line."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            if len(raw) > MAX_LINE_BYTES:
                yield number, None, f"line is longer than {MAX_LINE_BYTES:,} bytes"
                continue
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
                continue
        if raw.strip():
            yield number, raw, None


def parse_json_object(file: str, number: int, text: str) -> tuple[dict | None, LineError | None]:
    """Parse one line that must hold a JSON object of storable values.

    The error, if any, is on the field "(line)", or on the top-level key whose value the database cannot store.
    """
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return None, LineError(file, number, "(line)", f"invalid JSON: {exc.msg} at column {exc.colno}")
    except ValueError as exc:
        return None, LineError(file, number, "(line)", f"invalid JSON: {exc}")
    if not isinstance(data, dict):
        return None, LineError(file, number, "(line)", "each line must be a JSON object")
    for key, value in data.items():
        if _unstorable(key) or _unstorable(value):
            return None, LineError(file, number, key, "contains a NUL character or an unpaired surrogate "
                                   "(\\u0000, \\ud800-\\udfff), which cannot be stored")
    return data, None


def _unstorable(value) -> bool:
    if isinstance(value, str):
        return UNSTORABLE.search(value) is not None
    if isinstance(value, dict):
        return any(_unstorable(k) or _unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_unstorable(item) for item in value)
    return False


def _reject_constant(name: str):
    # Python's json accepts NaN and Infinity; standard JSON (and PostgreSQL's jsonb) does not.
    raise ValueError(f"{name} is not allowed")


MAX_ERRORS_SHOWN = 200  # a page lists this many line errors; the rest are counted


def page_import(request, importer, **arguments) -> dict | None:
    """Run `importer` on a page form's uploaded `file` (with its dry_run and skip_bad_lines boxes) and
    return what the `frontend/import_result.html` partial shows; None when no file was chosen."""
    upload = request.FILES.get("file")
    if upload is None:
        return None
    report = importer(lines=upload, file=upload.name, dry_run=bool(request.POST.get("dry_run")),
                      skip_bad_lines=bool(request.POST.get("skip_bad_lines")), **arguments).as_dict()
    return {"report": report, "errors": report["errors"][:MAX_ERRORS_SHOWN],
            "more_errors": max(0, len(report["errors"]) - MAX_ERRORS_SHOWN), "written": report["created"] > 0}


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
