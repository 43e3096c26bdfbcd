"""Serving a stored file over HTTP with ETag, conditional requests and single byte ranges.

Enough of RFC 9110 for resumable downloads: `Range: bytes=a-b | a- | -n`, `If-Range`,
`If-None-Match`. Several ranges in one request are not supported; the whole file is sent.
The file is streamed in chunks, never read whole into memory.
"""

import re

from django.http import HttpResponse, StreamingHttpResponse

CHUNK = 256 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Unsatisfiable(Exception):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive (start, end) byte range asked for, or None for the whole file.

    Raises Unsatisfiable for a range that is malformed or lies outside the file.
    """
    if not header:
        return None
    header = header.strip()
    if "," in header:
        return None  # multiple ranges: answer with the whole file (allowed by RFC 9110)
    match = _RANGE.match(header)
    if not match or (not match.group(1) and not match.group(2)):
        raise Unsatisfiable(header)
    first, last = match.groups()
    if not first:  # suffix: the last N bytes
        length = int(last)
        if length == 0 or size == 0:
            raise Unsatisfiable(header)
        return max(0, size - length), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or (last and int(last) < start):
        raise Unsatisfiable(header)
    return start, end


def _chunks(handle, start: int, length: int):
    try:
        handle.seek(start)
        remaining = length
        while remaining > 0:
            chunk = handle.read(min(CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            yield chunk
    finally:
        handle.close()


def file_response(request, *, open_file, size: int, etag: str, content_type: str, filename: str) -> HttpResponse:
    """A 200, 206, 304 or 416 response for a file of `size` bytes whose content hash is `etag`."""
    quoted = f'"{etag}"'
    common = {"ETag": quoted, "Accept-Ranges": "bytes", "Cache-Control": "private, max-age=31536000, immutable"}
    if_none_match = request.headers.get("If-None-Match", "")
    if quoted in [tag.strip() for tag in if_none_match.split(",")] or if_none_match.strip() == "*":
        response = HttpResponse(status=304)
        for key, value in common.items():
            response[key] = value
        return response

    range_header = request.headers.get("Range")
    if_range = request.headers.get("If-Range")
    if if_range is not None and if_range.strip() != quoted:
        range_header = None  # the client's partial copy is of another version: send it all
    try:
        byte_range = parse_range(range_header, size)
    except Unsatisfiable:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        for key, value in common.items():
            response[key] = value
        return response

    start, end = byte_range if byte_range else (0, size - 1)
    length = max(0, end - start + 1)
    response = StreamingHttpResponse(_chunks(open_file(), start, length), status=206 if byte_range else 200,
                                     content_type=content_type)
    response["Content-Length"] = str(length)
    if byte_range:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    for key, value in common.items():
        response[key] = value
    return response
