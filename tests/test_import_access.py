"""Access before work, at every upload entry point (API and page, every app): the endpoint resolves the
project and the caller's role before it touches the upload. A member whose role may not import gets
403 and an outsider 404 while the upload is still unparsed.

The tripwire is the multipart parser: the size check and every importer read the parsed upload, so a
parser that fails when called proves they did not run (nor anything else that reads the form). The
curator's request, which is allowed, trips it: the tripwire is armed."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http.multipartparser import MultiPartParser
from django.urls import reverse

from .conftest import api_client_for
from .hostile.uploads import ENTRIES

pytestmark = pytest.mark.django_db
API_ENTRIES = [pytest.param(entry, id=entry.name) for entry in ENTRIES if entry.api]
PAGE_ENTRIES = [pytest.param(entry, id=entry.name) for entry in ENTRIES if entry.page]
REFUSED = [("annotator", 403), ("trainer", 403), ("outsider", 404)]


class UploadParsed(AssertionError):
    """The request's upload was parsed."""


@pytest.fixture(autouse=True)
def tripwire(monkeypatch):
    def parse(self):
        raise UploadParsed("the upload was parsed")

    monkeypatch.setattr(MultiPartParser, "parse", parse)


def _post_api(entry, user):
    return api_client_for(user).post(f"/api/v1/projects/alpha/{entry.api}",
                                     {**entry.form, "file": SimpleUploadedFile(entry.filename, entry.body)},
                                     format="multipart")


def _post_page(entry, client, user):
    client.force_login(user)
    return client.post(reverse(entry.page, args=["alpha"]),
                       {**entry.form, "file": SimpleUploadedFile(entry.filename, entry.body)})


@pytest.mark.parametrize(("who", "status"), REFUSED)
@pytest.mark.parametrize("entry", API_ENTRIES)
def test_an_api_upload_is_refused_before_it_is_read(entry, project, members, who, status):
    before = entry.rows()
    assert _post_api(entry, members[who]).status_code == status
    assert entry.rows() == before


@pytest.mark.parametrize(("who", "status"), REFUSED)
@pytest.mark.parametrize("entry", PAGE_ENTRIES)
def test_a_page_upload_is_refused_before_it_is_read(entry, client, project, members, who, status):
    before = entry.rows()
    assert _post_page(entry, client, members[who]).status_code == status
    assert entry.rows() == before


@pytest.mark.parametrize("entry", API_ENTRIES)
def test_a_curators_api_upload_is_read(entry, project, members):
    with pytest.raises(UploadParsed):
        _post_api(entry, members["curator"])


@pytest.mark.parametrize("entry", PAGE_ENTRIES)
def test_a_curators_page_upload_is_read(entry, client, project, members):
    with pytest.raises(UploadParsed):
        _post_page(entry, client, members["curator"])
