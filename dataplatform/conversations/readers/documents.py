"""Trace files: JSONL (one record a line), or a SWE-agent `.traj` file, which is one JSON document written
over many lines (SWE-agent indents it) and named after the instance it attempts."""

from collections.abc import Iterable, Iterator
from pathlib import PurePath

from django.utils.translation import gettext

from dataplatform.imports import human_bytes, read_lines

DOCUMENT_SUFFIX = ".traj"
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # a .traj is read whole; a real one is a few MB


def document_name(file: str) -> str:
    """The instance a .traj file is named after ("django__django-11099.traj" -> "django__django-11099"); ""
    for a JSONL file."""
    path = PurePath(file)
    return path.stem if path.suffix == DOCUMENT_SUFFIX else ""


def json_texts(lines: Iterable[bytes | str], file: str) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, JSON text, problem) as `read_lines` gives them for JSONL; a .traj file is one text, at the
    line it starts on, unless one of its lines cannot be read (each such line is a problem of its own)."""
    if not document_name(file):
        yield from read_lines(lines)
        return
    parts, size, first, readable = [], 0, None, True
    for number, text, problem in read_lines(lines):
        if problem:
            readable = False
            yield number, None, problem
            continue
        first = number if first is None else first
        size += len(text)
        if size > MAX_DOCUMENT_BYTES:
            yield 0, None, (gettext("a .traj file is read whole, and this one is over %(limit)s; import its "
                                    "trajectory as a line of JSONL instead") % {"limit": human_bytes(MAX_DOCUMENT_BYTES)})
            return
        parts.append(text)
    if readable and parts:
        yield first, "".join(parts), None
