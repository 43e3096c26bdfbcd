"""A corpus of bad files, generated here, for every JSONL importer: each file must be refused with an error
that names the file, the line and the field (and, for encodings, says what to do), and write nothing.

Each bad file also holds a good line, so "write nothing" means the good line is not written either."""

import json
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.files.uploadedfile import UploadedFile

from dataplatform.imports import MAX_JSON_DEPTH, MAX_LINE_BYTES

from .importers import JSONL_IMPORTERS, JsonlImporter

pytestmark = pytest.mark.django_db

FILE = "hostile.jsonl"
HUGE_LINE_BYTES = 50 * 1024 * 1024
SAVE_AS_UTF8 = "save the file as UTF-8 without a byte-order mark"


def jsonl(*records) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)


@dataclass(frozen=True)
class Case:
    name: str
    body: object  # (importer) -> bytes
    line: int
    field: str | None  # None: the importer's id key
    says: str  # a part of the message


def _nested_value(importer: JsonlImporter) -> bytes:
    record = importer.good("deep")
    record[importer.id_key] = json.loads("[" * (MAX_JSON_DEPTH + 20) + "]" * (MAX_JSON_DEPTH + 20))
    return jsonl(importer.good("ok"), record)


def _duplicate_id(importer: JsonlImporter) -> bytes:
    first, second = importer.good("same"), importer.good("other")
    second[importer.id_key] = "same"
    second["note"] = "other content"  # the same record twice is a duplicate to skip, not an error
    return jsonl(first, second)


def _repeated_key(importer: JsonlImporter) -> bytes:
    text = json.dumps(importer.good("twice"))
    return jsonl(importer.good("ok")) + ("{" + json.dumps(importer.id_key) + ': "x", ' + text[1:]).encode() + b"\n"


CASES = [
    Case("utf-8 with BOM", lambda i: b"\xef\xbb\xbf" + jsonl(i.good("a"), i.good("b")), 1, "(line)", SAVE_AS_UTF8),
    Case("utf-16 with BOM", lambda i: "\n".join(json.dumps(i.good(k)) for k in "ab").encode("utf-16"), 1, "(line)",
         SAVE_AS_UTF8),
    Case("utf-16 without BOM", lambda i: jsonl(i.good("a"), i.good("b")).decode().encode("utf-16-le"), 1, "(line)",
         "UTF-16"),
    Case("invalid utf-8", lambda i: jsonl(i.good("a"), json.dumps(i.good("b")).encode().replace(b"b", b"\xff\xfe", 1)),
         2, "(line)", "not UTF-8"),
    Case("truncated json", lambda i: jsonl(i.good("a")) + json.dumps(i.good("b")).encode()[:-7], 2, "(line)",
         "invalid JSON"),
    Case("deeply nested line", lambda i: jsonl(i.good("a")) + b"[" * 100_000 + b"\n", 2, "(line)",
         f"nested more than {MAX_JSON_DEPTH} levels"),
    Case("deeply nested value", _nested_value, 2, None, f"nested more than {MAX_JSON_DEPTH} levels"),
    Case("duplicate id", _duplicate_id, 2, None, "line 1"),
    Case("key given twice", _repeated_key, 2, None, "twice"),
    Case("NaN", lambda i: jsonl(i.good("a")) + b'{"x": NaN}\n', 2, "(line)", "NaN is not allowed"),
    Case("number beyond a float", lambda i: jsonl(i.good("a"), {**i.good("b"), "weight": 12345}).replace(b"12345", b"1e999"),
         2, "weight", "too large"),
    Case("NUL in a string", lambda i: jsonl(i.good("a"), {**i.good("b"), i.id_key: "b\u0000"}), 2, None, "NUL"),
    Case("a JSON array, not an object", lambda i: jsonl(i.good("a"), [i.good("b")]), 2, "(line)", "JSON object"),
    Case("empty file", lambda i: b"", 0, "(file)", "empty"),
    Case("whitespace only", lambda i: b"  \n\n\t\r\n", 0, "(file)", "empty"),
]


def _import(importer: JsonlImporter, project, lines):
    return importer.run(project=project, lines=lines, file=FILE)


def _assert_refused(importer: JsonlImporter, report, before, line: int, field: str, says: str):
    assert not report.ok and report.created == 0
    matching = [e for e in report.errors if (e.line, e.field) == (line, field)]
    assert matching, f"no error on line {line}, field {field}: {report.as_dict()['errors']}"
    assert all(e.file == FILE for e in report.errors)
    assert says in matching[0].message, matching[0].message
    assert importer.row_counts() == before


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("importer", JSONL_IMPORTERS, ids=lambda i: i.name)
def test_a_bad_file_is_refused_line_by_line_and_writes_nothing(importer, case, project):
    before = importer.row_counts()
    report = _import(importer, project, [line for line in case.body(importer).splitlines(keepends=True)])
    _assert_refused(importer, report, before, case.line, case.field or importer.id_key, case.says)


@pytest.mark.parametrize("case", [c for c in CASES if c.name.startswith("utf")], ids=lambda c: c.name)
@pytest.mark.parametrize("importer", JSONL_IMPORTERS, ids=lambda i: i.name)
def test_an_uploaded_file_is_read_the_same_way(importer, case, project, tmp_path):
    """As uploaded (a Django file read in chunks, not a list of lines), the errors are the same."""
    path = tmp_path / "upload.jsonl"
    path.write_bytes(case.body(importer))
    before = importer.row_counts()
    with path.open("rb") as handle:
        report = _import(importer, project, UploadedFile(handle, name=FILE, size=path.stat().st_size))
    _assert_refused(importer, report, before, case.line, case.field, case.says)
    if case.name == "utf-16 with BOM":  # the rest of a UTF-16 file is not read as hundreds of lines of noise
        assert len(report.errors) == 1


WRONG_TYPES = [pytest.param(importer, broken, field, id=f"{importer.name}: {name}")
               for importer in JSONL_IMPORTERS for name, broken, field in importer.wrong_types]


@pytest.mark.parametrize(("importer", "broken", "field"), WRONG_TYPES)
def test_a_wrong_type_names_the_field(importer, broken, field, project):
    before = importer.row_counts()
    report = _import(importer, project, jsonl(importer.good("a"), broken(importer.good("b"))).splitlines(True))
    _assert_refused(importer, report, before, 2, field, "")


def _huge_file(tmp_path: Path, importer: JsonlImporter) -> tuple[Path, int]:
    """A good line, then one line of 50 MB (a valid JSON object with a 50 MB string), written in pieces;
    the path and the length of that line."""
    path = tmp_path / "huge.jsonl"
    head = json.dumps(importer.good("huge"))[:-1].encode() + b', "padding": "'
    with path.open("wb") as handle:
        handle.write(jsonl(importer.good("a")) + head)
        piece = b"x" * (1024 * 1024)
        for _ in range(HUGE_LINE_BYTES // len(piece)):
            handle.write(piece)
        handle.write(b'"}\n')
    return path, len(head) + HUGE_LINE_BYTES + 2


@pytest.mark.parametrize("importer", JSONL_IMPORTERS, ids=lambda i: i.name)
def test_a_50_mb_line_is_refused_without_holding_it(importer, project, tmp_path):
    path, size = _huge_file(tmp_path, importer)
    before = importer.row_counts()
    tracemalloc.start()
    try:
        with path.open("rb") as handle:
            report = _import(importer, project, UploadedFile(handle, name=FILE, size=path.stat().st_size))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _assert_refused(importer, report, before, 2, "(line)", f"at most {MAX_LINE_BYTES:,} bytes")
    assert f"line is {size:,} bytes long" in report.errors[0].message
    assert peak < 4 * MAX_LINE_BYTES, f"reading the file peaked at {peak:,} bytes"
