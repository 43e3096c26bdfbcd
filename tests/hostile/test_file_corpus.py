"""The same corpus for the whole-file importers: `.panda.json` (one JSON document, read as an upload)
and the two taxonomy YAML loaders; and, over the API, a bad JSONL upload is a 400 carrying the errors.

A `.panda.json` has no lines to speak of once parsed: decoding and syntax errors name the line and
column, validation errors the JSON path of the field."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile

from annotate.models import Event, Item, Node, Session
from annotate.panda_json import MAX_FILE_BYTES, UnreadableFile, import_panda_json, read_panda_upload
from corpora.aed.taxonomy import parse_error_taxonomy
from dataplatform.yamlfile import YamlFileError
from labeler import services as labeler_services
from labeler.models import Taxonomy
from labeler.taxonomy import parse_taxonomy

from ..conftest import api_client_for
from ..doubles import CharBackend
from .importers import ANNOTATE
from .whole_files import GOOD_PANDA, SWE_TAXONOMY, panda_document

pytestmark = pytest.mark.django_db

SAVE_AS_UTF8 = "save the file as UTF-8 without a byte-order mark"


# --- .panda.json ------------------------------------------------------------------------------------------


def _panda_rows() -> tuple[int, ...]:
    return Item.objects.count(), Session.objects.count(), Node.objects.count(), Event.objects.count()


@pytest.fixture
def chars(use_backend):
    backend = CharBackend()
    use_backend(backend)
    return backend


def _panda_errors(body: bytes, project, user) -> list[str]:
    """What an upload of `body` is told: the upload's own message, or each report error as "field: message"."""
    try:
        data = read_panda_upload(SimpleUploadedFile("bad.panda.json", body))
    except UnreadableFile as exc:
        return [str(exc)]
    report = import_panda_json(project=project, data=data, annotator=user, file="bad.panda.json")
    assert not report.created and all(error.file == "bad.panda.json" for error in report.errors)
    return [f"{error.field}: {error.message}" for error in report.errors]


def _with(path: str, value) -> bytes:
    document = panda_document()
    *parents, last = path.split("/")
    target = document
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[int(last) if isinstance(target, list) else last] = value
    return json.dumps(document, indent=1).encode()


THREE_LINE = GOOD_PANDA.splitlines().index(next(line for line in GOOD_PANDA.splitlines() if b"three" in line)) + 1
PANDA_CASES = {
    "utf-8 with BOM": (b"\xef\xbb\xbf" + GOOD_PANDA, ["line 1", SAVE_AS_UTF8]),
    "utf-16 with BOM": (GOOD_PANDA.decode().encode("utf-16"), ["UTF-16", SAVE_AS_UTF8]),
    "invalid utf-8": (GOOD_PANDA.replace(b"three", b"thr\xffee"),
                      [f"line {THREE_LINE}:", "not UTF-8"]),
    "truncated json": (GOOD_PANDA[:200], ["line ", "column", "not a JSON file"]),
    "deeply nested json": (b"[" * 100_000, ["nested more than 100 levels"]),
    "deeply nested value": (_with("dialogs/1/annotate/note", json.loads("[" * 150 + "]" * 150)),
                            ["dialogs.1.annotate.note", "nested more than 100 levels"]),
    "NaN": (GOOD_PANDA.replace(b"1755600000000", b"NaN"), ["NaN is not allowed"]),
    "time beyond a datetime": (GOOD_PANDA.replace(b"1755600000000", b"1" + b"0" * 30), ["update_time"]),
    "NUL in a string": (_with("dialogs/2/messages/1/content", "t\u0000wo"), ["dialogs.2.messages[1].content", "NUL"]),
    "duplicate dialog key": (GOOD_PANDA.replace(b'"2": {', b'"1": {'), ["dialogs.1", "twice"]),
    "empty file": (b"", ["empty"]),
    "whitespace only": (b" \n\n", ["empty"]),
    "version is a number": (_with("version", 2), ["version: "]),
    "update_time is a string": (_with("update_time", "now"), ["update_time: "]),
    "dialogs is a list": (_with("dialogs", [1]), ["dialogs: "]),
    "a dialog is a string": (_with("dialogs/1", "x"), ["dialogs.1: "]),
    "messages is an object": (_with("dialogs/1/messages", {}), ["dialogs.1.messages: "]),
    "role is a number": (_with("dialogs/1/messages/0/role", 1), ["dialogs.1.messages[0].role: "]),
    "content is a number": (_with("dialogs/1/messages/1/content", 1), ["dialogs.1.messages[1].content: "]),
    "is_good is a string": (_with("dialogs/1/annotate/is_good", "yes"), ["dialogs.1.annotate.is_good: "]),
    "operations is a string": (_with("dialogs/2/operations", "x"), ["dialogs.2.operations: "]),
    "parent is not a key": (_with("dialogs/2/operations/0/parent", "one"), ["dialogs.2.operations[0].parent: "]),
    "finish_reason is too long": (_with("dialogs/1/messages/1/finish_reason", "s" * 17),
                                  ["dialogs.1.messages[1].finish_reason: "]),
    "model is too long": (_with("dialogs/1/operations/0/chat_config", {"model": "m" * 201}),
                          ["dialogs.1.operations[0].chat_config.model: "]),
}


def test_the_good_panda_document_imports(project, members, chars):
    report = import_panda_json(project=project, data=json.loads(GOOD_PANDA), annotator=members["annotator"])
    assert report.ok and report.created, report.as_dict()


@pytest.mark.parametrize("case", PANDA_CASES)
def test_a_bad_panda_file_is_refused_and_writes_nothing(case, project, members, chars):
    body, says = PANDA_CASES[case]
    before = _panda_rows()
    errors = _panda_errors(body, project, members["annotator"])
    assert errors and all(any(part in error for error in errors) for part in says), errors
    assert _panda_rows() == before


def test_a_50_mb_panda_file_is_refused_before_it_is_read(project, tmp_path):
    path = tmp_path / "huge.panda.json"
    with path.open("wb") as handle:  # one line: a document with a 50 MB string
        handle.write(b'{"version": "2.0", "pad": "')
        handle.truncate(MAX_FILE_BYTES + 10)
        handle.seek(0, 2)
        handle.write(b'"}')
    with path.open("rb") as handle:
        upload = UploadedFile(handle, name="huge.panda.json", size=path.stat().st_size)
        with pytest.raises(UnreadableFile, match=f"more than the {MAX_FILE_BYTES:,} allowed"):
            read_panda_upload(upload)
        assert handle.tell() == 0  # refused on its size, not a byte read


# --- taxonomy YAML ----------------------------------------------------------------------------------------


AED_TAXONOMY = """\
schema: aed-errors/1
name: hostile
version: "1"
categories:
  - slug: wrong-tool
    name: Wrong tool
    definition: The agent called the wrong tool.
"""


# (text, line, field) the first error must name; None: any line
YAML_CASES = {
    "swe": (labeler_services.load_taxonomy, YamlFileError, SWE_TAXONOMY, {
        "truncated": (SWE_TAXONOMY[:SWE_TAXONOMY.index("definition: Fixes") + 3] + "{[", None, "(file)"),
        "deeply nested": ("[" * 100_000, 1, "(file)"),
        "deeply nested mapping": ("a: " + "{b: " * 5000 + "}" * 5000, 1, "(file)"),
        "empty": ("", 0, "(file)"),
        "whitespace only": ("  \n\n", 0, "(file)"),
        "name is a list": (SWE_TAXONOMY.replace("name: hostile", "name: [1]"), 1, ".name"),
        "axes is a number": (SWE_TAXONOMY.split("axes:")[0] + "axes: 5\n", 1, "axes"),
        "tags is a number": (SWE_TAXONOMY.replace("tags:\n          - {slug: logic-error, name: Logic error, "
                                                  "definition: Wrong logic.}", "tags: 5"), 7,
                             "axes.task_type.families[0].tags"),
        "routing key is a number": (SWE_TAXONOMY.replace("  domain_l1:\n    web: A", "  1: 2"), 24, "routing"),
        "routing category is a list": (SWE_TAXONOMY.replace("web: A", "web: [A]"), 27, "routing.domain_l1.web"),
        # A tag's slug is unique in its family (the published files repeat one under two families).
        "duplicate slug": (SWE_TAXONOMY.replace(
            "          - {slug: rest-api, name: REST API, definition: An HTTP API.}",
            "          - {slug: rest-api, name: REST API, definition: An HTTP API.}\n"
            "          - {slug: rest-api, name: REST API again, definition: An HTTP API.}"), 19,
            "axes.domain.families[0].tags[1].slug"),
    }),
    "aed": (lambda text, filename: parse_error_taxonomy(text, filename=filename), YamlFileError, AED_TAXONOMY, {
        "deeply nested": ("[" * 100_000, 1, "(file)"),
        "truncated": (AED_TAXONOMY[:AED_TAXONOMY.index('"1"') + 2], None, "(file)"),
        "empty": ("", 1, "(file)"),
        "name is a list": (AED_TAXONOMY.replace("name: hostile", "name: [1]"), 2, "name"),
        "categories is a number": (AED_TAXONOMY.split("categories:")[0] + "categories: 5\n", 4, "categories"),
        "slug is a number": (AED_TAXONOMY.replace("slug: wrong-tool", "slug: 5"), 5, "categories[0].slug"),
        "duplicate slug": (AED_TAXONOMY + AED_TAXONOMY.split("categories:\n")[1], 8, "categories[1].slug"),
        "key given twice": (AED_TAXONOMY.replace('version: "1"', 'version: "1"\nversion: "2"'), 4, "version"),
    }),
}
YAML_PARAMS = [pytest.param(kind, case, id=f"{kind}: {case}") for kind, (*_, cases) in YAML_CASES.items()
               for case in cases]


def _load(kind: str, text: str):
    load, _, _, _ = YAML_CASES[kind]
    return load(text=text, filename="hostile.yaml")


@pytest.mark.parametrize(("kind", "case"), YAML_PARAMS)
def test_a_bad_taxonomy_is_refused_by_line_and_field(kind, case):
    _, error_type, _, cases = YAML_CASES[kind]
    text, line, field = cases[case]
    before = Taxonomy.objects.count()
    with pytest.raises(error_type) as raised:
        _load(kind, text)
    first = raised.value.errors[0]
    assert first["file"] == "hostile.yaml" and first["field"].lstrip(".") == field.lstrip("."), raised.value.errors
    assert line is None or first["line"] == line, raised.value.errors
    assert Taxonomy.objects.count() == before


@pytest.mark.parametrize("kind", YAML_CASES)
def test_a_taxonomy_with_a_bom_loads_like_one_without(kind):
    """YAML allows a byte-order mark (unlike JSON lines), and PyYAML drops it: the same taxonomy, no error."""
    parse = {"swe": lambda text: parse_taxonomy(text, filename="t.yaml").data,
             "aed": lambda text: parse_error_taxonomy(text, filename="t.yaml")}[kind]
    good = YAML_CASES[kind][2]
    assert parse("\ufeff" + good) == parse(good)


# --- over the API -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "line", "field", "says"), [
    (b"\xef\xbb\xbf" + json.dumps(ANNOTATE.good("a")).encode() + b"\n", 1, "(line)", SAVE_AS_UTF8),
    ("\n".join(json.dumps(ANNOTATE.good(k)) for k in "ab").encode("utf-16"), 1, "(line)", "UTF-16"),
    (json.dumps(ANNOTATE.good("a")).encode() + b"\n" + b"[" * 100_000 + b"\n", 2, "(line)", "nested"),
    (b"", 0, "(file)", "empty"),
], ids=["bom", "utf-16", "deeply nested", "empty"])
def test_an_api_upload_of_a_bad_file_is_a_400_with_the_errors(body, line, field, says, project, members):
    before = ANNOTATE.row_counts()
    response = api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/annotate/import/", {"file": SimpleUploadedFile("bad.jsonl", body)}, format="multipart")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert errors[0]["file"] == "bad.jsonl" and (errors[0]["line"], errors[0]["field"]) == (line, field)
    assert says in errors[0]["message"]
    assert ANNOTATE.row_counts() == before


def test_an_api_upload_of_a_bad_panda_file_is_a_400(project, members, chars):
    response = api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/annotate/import-panda/",
        {"file": SimpleUploadedFile("bad.panda.json", b"[" * 100_000)}, format="multipart")
    assert response.status_code == 400 and "nested more than 100 levels" in str(response.json())
    assert _panda_rows() == (0, 0, 0, 0)


@pytest.mark.parametrize(("body", "says"), [
    (b"\xff\xfe" + "schema: swe-taxonomy/1\n".encode("utf-16-le"), "line 1: not UTF-8: the file is UTF-16"),
    (b"schema: swe-taxonomy/1\nname: caf\xe9\n", "line 2: not UTF-8"),
])
def test_an_api_taxonomy_upload_in_the_wrong_encoding_says_which_line_and_what_to_do(body, says, project, members):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.conftest import api_client_for

    before = Taxonomy.objects.count()
    response = api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/labeler/taxonomy/", {"file": SimpleUploadedFile("swe.yaml", body)}, format="multipart")
    assert response.status_code == 400, response.content
    message = response.json()["file"][0]
    assert message.startswith("swe.yaml, " + says) and "save the file as UTF-8" in message
    assert Taxonomy.objects.count() == before
