"""The per-file upload limit (IMPORT_MAX_FILE_BYTES) at every upload entry point, over the API and on the
pages: a file one byte over is refused with a message naming the file, its size and the limit, and
nothing is written; a file of exactly the limit imports. Over the API an upload carries one file: two
parts named `file` are refused.

The limit is lowered with override_settings to the size of a small good file, so no test builds a big one."""

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile
from django.test import override_settings
from django.urls import reverse

from dataplatform.imports import FileTooLarge, check_upload_size, human_bytes

from ..conftest import api_client_for
from ..doubles import CharBackend
from .importers import TASKS
from .uploads import ENTRIES, Entry

pytestmark = pytest.mark.django_db


API_ENTRIES = [pytest.param(entry, id=entry.name) for entry in ENTRIES if entry.api]
PAGE_ENTRIES = [pytest.param(entry, id=entry.name) for entry in ENTRIES if entry.page]


@pytest.fixture(autouse=True)
def chars(use_backend):
    """.panda.json imports tokenize with the project's backend: a character tokenizer, no model."""
    use_backend(CharBackend())


def _too_big(entry: Entry) -> str:
    size = len(entry.body)
    return (f"{entry.filename}: {size:,} bytes is over the {size - 1:,} bytes limit per file "
            f"(IMPORT_MAX_FILE_BYTES){entry.suffix}")


def _post_api(entry: Entry, user, **extra):
    return api_client_for(user).post(f"/api/v1/projects/alpha/{entry.api}",
                                     {**entry.form, **extra, "file": SimpleUploadedFile(entry.filename, entry.body)},
                                     format="multipart")


def _post_page(entry: Entry, client, **extra) -> str:
    response = client.post(reverse(entry.page, args=["alpha"]),
                           {**entry.form, **extra, "file": SimpleUploadedFile(entry.filename, entry.body)},
                           follow=True)
    assert response.status_code == 200
    return response.content.decode()


# --- the message ----------------------------------------------------------------------------------------

def test_the_message_names_the_file_its_size_and_the_limit_in_human_units(settings):
    settings.IMPORT_MAX_FILE_BYTES = 2 * 1024**3
    upload = UploadedFile(io.BytesIO(), name="tasks.jsonl", size=int(3.1 * 1024**3))
    with pytest.raises(FileTooLarge) as refused:
        check_upload_size(upload)
    assert str(refused.value) == "tasks.jsonl: 3.1 GiB is over the 2.0 GiB limit per file (IMPORT_MAX_FILE_BYTES)"


def test_when_rounding_hides_the_difference_the_message_gives_bytes(settings):
    settings.IMPORT_MAX_FILE_BYTES = 2 * 1024**3
    with pytest.raises(FileTooLarge, match=r"^t.jsonl: 2,147,483,649 bytes is over the 2,147,483,648 bytes limit"):
        check_upload_size(UploadedFile(io.BytesIO(), name="t.jsonl", size=2 * 1024**3 + 1))


@pytest.mark.parametrize(("count", "text"), [(0, "0 bytes"), (1023, "1,023 bytes"), (1024, "1.0 KiB"),
                                             (1536, "1.5 KiB"), (50 * 1024**2, "50.0 MiB"), (5 * 1024**4, "5.0 TiB")])
def test_human_bytes(count, text):
    assert human_bytes(count) == text


def test_the_size_is_checked_without_reading_the_file(settings):
    class Unreadable(io.BytesIO):
        def read(self, *args):
            raise AssertionError("the file was read")

    settings.IMPORT_MAX_FILE_BYTES = 10
    with pytest.raises(FileTooLarge):
        check_upload_size(UploadedFile(Unreadable(), name="big.jsonl", size=11))
    check_upload_size(UploadedFile(Unreadable(), name="fits.jsonl", size=10))


def test_the_default_limit_is_2_gib():
    from django.conf import settings

    assert settings.IMPORT_MAX_FILE_BYTES == 2 * 1024**3


# --- over the API ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("entry", API_ENTRIES)
def test_an_api_upload_over_the_limit_is_a_400_naming_the_file_and_writes_nothing(entry, project, members):
    before = entry.rows()
    with override_settings(IMPORT_MAX_FILE_BYTES=len(entry.body) - 1):
        # skip_bad_lines does not turn a file refused whole into a 200
        response = _post_api(entry, members["curator"], skip_bad_lines="1")
    assert response.status_code == 400, response.content
    assert response.json() == {"file": [_too_big(entry)]}
    assert entry.rows() == before


@pytest.mark.parametrize("entry", API_ENTRIES)
def test_an_api_upload_of_exactly_the_limit_imports(entry, project, members):
    before = entry.rows()
    with override_settings(IMPORT_MAX_FILE_BYTES=len(entry.body)):
        response = _post_api(entry, members["curator"])
    assert response.status_code == entry.created, response.content
    assert entry.rows() != before


@pytest.mark.parametrize("entry", API_ENTRIES)
def test_an_api_upload_with_two_file_parts_is_a_400_naming_the_field_and_writes_nothing(entry, project, members):
    """The attack's probe: two parts named `file` imported the last one and answered 200."""
    before = entry.rows()
    two_files = [SimpleUploadedFile(entry.filename, entry.body), SimpleUploadedFile(f"second-{entry.filename}",
                                                                                    entry.body)]
    response = api_client_for(members["curator"]).post(f"/api/v1/projects/alpha/{entry.api}",
                                                       {**entry.form, "file": two_files}, format="multipart")
    assert response.status_code == 400, response.content
    assert response.json() == {"file": ["Send one file in the field 'file', not 2: each upload imports exactly one "
                                        "file."]}
    assert entry.rows() == before


# --- on the pages ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("entry", PAGE_ENTRIES)
def test_a_page_upload_over_the_limit_shows_the_message_and_writes_nothing(entry, client, project, members):
    client.force_login(members["curator"])
    before = entry.rows()
    with override_settings(IMPORT_MAX_FILE_BYTES=len(entry.body) - 1):
        page = _post_page(entry, client)
    assert _too_big(entry) in page, page
    assert entry.rows() == before


@pytest.mark.parametrize("entry", PAGE_ENTRIES)
def test_a_page_upload_of_exactly_the_limit_imports(entry, client, project, members):
    client.force_login(members["curator"])
    before = entry.rows()
    with override_settings(IMPORT_MAX_FILE_BYTES=len(entry.body)):
        page = _post_page(entry, client)
    assert "IMPORT_MAX_FILE_BYTES" not in page
    assert entry.rows() != before


def test_the_import_form_tables_the_refusal_as_a_whole_file_error(client, project, members):
    """The pages with an import report show the refusal on line 0, field (file), with no advice to
    skip bad lines: there is no line to skip."""
    entry = next(entry for entry in ENTRIES if entry.name == TASKS.name)
    client.force_login(members["curator"])
    with override_settings(IMPORT_MAX_FILE_BYTES=len(entry.body) - 1):
        page = _post_page(entry, client, skip_bad_lines="1")
    assert f'<td translate="no">{entry.filename}</td><td>0</td><td>(file)</td><td>{_too_big(entry)}</td>' in page
    assert "Nothing was written." in page and "Skip bad lines”." not in page


def test_the_schema_documents_the_400_of_every_upload(client):
    """The refusal is a 400 validation error, which the schema's post-processing gives every operation
    that takes input (dataplatform/openapi.py): no 413 to document."""
    paths = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    for entry in ENTRIES:
        responses = paths["/api/v1/projects/{slug}/" + entry.api]["post"]["responses"]
        assert responses["400"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ValidationError"}
