"""The reader, the first stage of an import: bytes in, numbered lines of text out, problems as messages.

A file is read in chunks, so a line too long to import is counted and dropped, never held whole in
memory; undecodable lines, a byte-order mark and an empty file are reported instead of raised. An
upload's size is checked before a byte of it is read.
"""

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext, gettext_lazy

from .report import LineError

MAX_LINE_BYTES = 1_000_000
READ_CHUNK_BYTES = 64 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian (UTF-32 LE starts the same way)


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
        return gettext("%(count)s bytes") % {"count": f"{count:,}"}
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
        size, most = (gettext("%(count)s bytes") % {"count": f"{count:,}"} for count in (upload.size, limit))
    raise FileTooLarge(gettext("%(file)s: %(size)s is over the %(limit)s limit per file (IMPORT_MAX_FILE_BYTES)")
                       % {"file": upload.name, "size": size, "limit": most})


# In the language of the request that reads the file (lazy: other messages take it in).
SAVE_AS_UTF8 = gettext_lazy("save the file as UTF-8 without a byte-order mark and import it again")
EMPTY_FILE = gettext_lazy("the file is empty: it holds no lines of JSON (one JSON object per line)")


def _too_long(size: int) -> str:
    return (gettext("line is %(size)s bytes long; a line may hold at most %(limit)s bytes")
            % {"size": f"{size:,}", "limit": f"{MAX_LINE_BYTES:,}"})


def decode_whole_file(data: bytes) -> str:
    """The text of a small uploaded file read whole (a taxonomy); ValueError with the line and what
    to do when it is UTF-16 or not UTF-8. A UTF-8 byte-order mark is dropped: YAML allows one."""
    if data.startswith(UTF16_BOMS):
        raise ValueError(gettext("line %(line)s: %(problem)s") % {"line": 1, "problem": _utf16()})
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(gettext("line %(line)s: %(problem)s") % {"line": line, "problem": _not_utf8(exc)}) from None


def _utf16() -> str:
    return (gettext("not UTF-8: the file is UTF-16 (it starts with a UTF-16 byte-order mark); %(fix)s")
            % {"fix": SAVE_AS_UTF8})


def _not_utf8(exc: UnicodeDecodeError) -> str:
    # exc.reason is Python's ("invalid start byte"...): it names the byte, it is left as it is.
    return (gettext("not UTF-8 (%(reason)s at byte %(byte)s); %(fix)s")
            % {"reason": exc.reason, "byte": exc.start, "fix": SAVE_AS_UTF8})


def _decode(raw: bytes | str | TooLongLine, first: bool) -> tuple[str | None, str | None, bool]:
    """(text, problem, give up on the rest of the file) for one physical line."""
    if isinstance(raw, TooLongLine):
        return None, _too_long(raw.size), False
    if isinstance(raw, bytes):
        if first and raw.startswith(UTF16_BOMS):
            # Every later "line" is half of a UTF-16 character or worse: one error says it all.
            return None, _utf16(), True
        if first and raw.startswith(UTF8_BOM):
            return None, gettext("the file starts with a UTF-8 byte-order mark (BOM); %(fix)s") % {"fix": SAVE_AS_UTF8}, False
    elif first and raw.startswith("\ufeff"):
        return None, gettext("the file starts with a byte-order mark (BOM); %(fix)s") % {"fix": SAVE_AS_UTF8}, False
    size = len(raw) - _ending(raw)
    if size > MAX_LINE_BYTES:
        return None, _too_long(size), False
    if (b"\x00" if isinstance(raw, bytes) else "\x00") in raw:
        # Never in JSON text (a NUL inside a string is written \u0000); typical of UTF-16 without a BOM.
        return None, (gettext("holds NUL bytes, so it is not UTF-8 text (is the file UTF-16?); %(fix)s")
                      % {"fix": SAVE_AS_UTF8}), False
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, _not_utf8(exc), False
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
        yield 0, None, str(EMPTY_FILE)


def read_error(file: str, number: int, problem: str) -> LineError:
    """The LineError for a problem `read_lines` yielded: on the whole file when it names line 0."""
    return LineError(file, number, "(file)" if number == 0 else "(line)", problem)
