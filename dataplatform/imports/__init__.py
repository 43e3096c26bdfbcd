"""The shared plumbing of every line-based import (JSONL uploads).

An import goes reader -> parser -> validator -> writer:

- the reader (`read_lines`, readers.py) turns an iterable of lines (bytes or str: a list), or a binary
  file (a Django `UploadedFile`, an open file), into numbered text, reporting undecodable or oversized
  lines, a byte-order mark and an empty file instead of raising; a file is read in chunks, so a
  line too long to import is counted and dropped, never held whole in memory;
  wrap the lines in `HashingLines` first when the importer needs the sha256 of the whole file;
- each app's parser and validator turn a line into a record, or into errors (`parse_json_object`
  and `load_json`, parsers.py, read untrusted JSON);
- the writer stores the records in one transaction.

Every problem is a `LineError` — {file, line, field, message} — collected in an `ImportReport`
(report.py). A dry run reports without writing. A file imports whole or not at all, unless the caller
asks to skip bad lines. Records carry a content hash (`canonical_sha256`), so importing the same
record again adds nothing; each app keeps its imported files in a subclass of `ImportedFile`
(models.py). The HTML import pages run an importer through `page_import` (pages.py).
"""

from .models import ImportedFile
from .pages import page_import
from .parsers import (
    MAX_JSON_DEPTH,
    JsonProblem,
    canonical_sha256,
    check_storable,
    json_error,
    json_path,
    load_json,
    load_json_at,
    parse_json_object,
)
from .readers import (
    MAX_LINE_BYTES,
    SAVE_AS_UTF8,
    UTF8_BOM,
    UTF16_BOMS,
    FileTooLarge,
    HashingLines,
    check_upload_size,
    decode_whole_file,
    human_bytes,
    read_error,
    read_lines,
)
from .report import WHOLE, ImportReport, LineError, field_label

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "SAVE_AS_UTF8",
    "UTF8_BOM",
    "UTF16_BOMS",
    "FileTooLarge",
    "HashingLines",
    "ImportReport",
    "ImportedFile",
    "JsonProblem",
    "LineError",
    "canonical_sha256",
    "check_storable",
    "check_upload_size",
    "decode_whole_file",
    "human_bytes",
    "json_error",
    "json_path",
    "load_json",
    "load_json_at",
    "page_import",
    "parse_json_object",
    "read_error",
    "read_lines",
    "WHOLE",
    "field_label",
]
