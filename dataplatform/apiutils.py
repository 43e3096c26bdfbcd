"""Small pieces every app's API shares."""

import json

from django.conf import settings
from django.utils.translation import gettext
from rest_framework import status
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response

from .imports import FileTooLarge, JsonProblem, check_upload_size, json_error, json_path, load_json
from .imports.inputs import ImportOptions
from .inputs import check_form_fields, read

# Upper bounds for the integers a client sends, from the PostgreSQL columns they end up in: a value past
# its column is refused by its serializer field (400), never by the database (500). Every integer field
# a client can send has a min_value and a max_value (tests/test_integer_bounds.py fails on one without).
MAX_INT = 2**31 - 1  # integer columns: IntegerField, PositiveIntegerField (versions, counts, budgets)
MAX_ID = 2**63 - 1  # bigint columns: the BigAutoField primary keys (DEFAULT_AUTO_FIELD)
MAX_SEED = 2**32 - 1  # a sampling seed: the range numpy and the samplers behind the backends take


class JSONObjectParser(JSONParser):
    """Every JSON body, parsed strictly by the platform's own parser for untrusted JSON (what importers use):
    nesting past MAX_JSON_DEPTH, NaN/Infinity, a key given twice, an integer outside 64 bits, a NUL or an
    unpaired surrogate are a 400 naming where they are, before any view sees the data. Python's json alone
    would end a body nested 1,000 deep in a RecursionError (a 500), keep the last of two keys without a
    word, and hand NUL to PostgreSQL, which refuses it.

    The body must also be an object: every write in this API takes named fields, and a view that reads
    `request.data.get(...)` from a list would fail with a 500 instead of saying why."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            data = parse_json_body(raw.decode(encoding))
        except UnicodeDecodeError as exc:
            raise ParseError(gettext("The JSON body is not %(encoding)s text: %(problem)s")
                             % {"encoding": encoding, "problem": exc.reason}) from None
        if not isinstance(data, dict):
            raise ParseError(gettext("The JSON body must be an object with named fields, not %(type)s.")
                             % {"type": type(data).__name__})
        return data


def parse_json_body(text: str):
    """Untrusted JSON text to a value, as a 400: a ParseError for bad syntax or a whole text at fault, a
    ValidationError on the top-level field whose value cannot be taken (`{"arguments": ["... nested more
    than 100 levels deep"]}`)."""
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise ParseError(gettext("JSON parse error: %(problem)s at line %(line)s, column %(column)s.")
                         % {"problem": json_error(exc.msg), "line": exc.lineno, "column": exc.colno}) from None
    except JsonProblem as exc:
        if not exc.path:
            raise ParseError(exc.message) from None
        inner = json_path(exc.path)
        inner = f"{inner}: " if len(exc.path) > 1 and len(inner) <= 80 else ""  # no a[0][0][0]... for deep nesting
        raise ValidationError({str(exc.path[0]): [inner + exc.message]}) from None


class StrictFormParser(FormParser):
    """FormParser, refusing NUL characters in field names and values (inputs.check_form_fields)."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        check_form_fields(data)
        return data


class StrictMultiPartParser(MultiPartParser):
    """MultiPartParser, refusing NUL characters in its form fields (file parts are read by their importers)."""

    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        check_form_fields(parsed.data)
        return parsed


# What an upload view accepts: a multipart body with its file, or plain form fields.
UPLOAD_PARSERS = [StrictMultiPartParser, StrictFormParser]


def truthy(value) -> bool:
    """A form or query flag: "1", "true", "yes", "on" (any case) are true."""
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def checked_upload_size(upload) -> None:
    """Refuse an upload over IMPORT_MAX_FILE_BYTES as a 400 on the field `file`, before it is read.

    A 400 like every other refusal of a file (empty, not UTF-8, a .panda.json or taxonomy over its own
    limit), which the schema documents for every operation that takes input; a body over the proxy's
    limit never gets here (the proxy answers 413 itself)."""
    try:
        check_upload_size(upload)
    except FileTooLarge as exc:
        raise ValidationError({"file": [str(exc)]}) from None


def _no_file(expected: str) -> ValidationError:
    """The 400 for an upload without its file; `expected` says what to send, in the request's language
    (`gettext("a JSONL file")`), the field stays `file`."""
    return ValidationError({"file": [gettext("Upload %(expected)s in the field 'file'.") % {"expected": expected}]})


def uploaded_files(request, *, expected: str) -> list:
    """Every file of the multipart field `file`, for an upload that is several files (400 when there is none)."""
    uploads = request.FILES.getlist("file")
    if not uploads:
        raise _no_file(expected)
    for upload in uploads:
        checked_upload_size(upload)
    return uploads


def uploaded_file(request, *, expected: str):
    """The one file of the multipart field `file` (400 when there is none). Two or more parts named
    `file` are a 400 too: request.FILES.get() would import the last one and quietly drop the others."""
    uploads = request.FILES.getlist("file")
    if not uploads:
        raise _no_file(expected)
    if len(uploads) > 1:
        raise ValidationError({"file": [gettext("Send one file in the field 'file', not %(count)s: each upload "
                                                "imports exactly one file.") % {"count": len(uploads)}]})
    return uploads[0]


def import_upload(request, importer, **arguments) -> Response:
    """Run `importer` on the request's multipart `file` with its `dry_run` and `skip_bad_lines` form
    fields; the report is the body, with 400 when the file was refused (errors, and not skipped)."""
    upload = uploaded_file(request, expected=gettext("a JSONL file"))
    checked_upload_size(upload)
    options = read(ImportOptions, request.data)
    report = importer(lines=upload, file=upload.name, **options, **arguments)
    failed = report.errors and not report.dry_run and not options["skip_bad_lines"]
    return Response(report.as_dict(), status=status.HTTP_400_BAD_REQUEST if failed else status.HTTP_200_OK)
