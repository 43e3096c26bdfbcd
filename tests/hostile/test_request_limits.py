"""Django's request limits under /api/: a request over them is a JSON 400 that names the limit, like
every other API error (Django's own answer is its HTML "Bad Request (400)" page); pages keep it.

The probes are the attack's: 1,500 form fields or query parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS is
1,000), a 3 MB form field and a 3 MB JSON body (DATA_UPLOAD_MAX_MEMORY_SIZE is 2.5 MB); and 101 files
(DATA_UPLOAD_MAX_NUMBER_FILES is 100). A file part of a multipart upload does not count against
DATA_UPLOAD_MAX_MEMORY_SIZE: a 3 MB file imports.
"""

import json

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotate.models import Item

from ..conftest import api_client_for

pytestmark = pytest.mark.django_db

THREE_MB = 3 * 1024 * 1024
JOBS = "/api/v1/projects/alpha/jobs/"
IMPORT = "/api/v1/projects/alpha/annotate/import/"
TOO_BIG = (f"The request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE). "
           "The limit is for JSON bodies and form fields; file parts of a multipart upload do not count, so send "
           "large data as a file.")
TOO_MANY = (f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields or query parameters "
            "(DATA_UPLOAD_MAX_NUMBER_FIELDS).")
MANY_FIELDS = {f"field{n}": "1" for n in range(1500)}


@pytest.fixture
def curator(members):
    client = api_client_for(members["curator"])
    client.raise_request_exception = False
    return client


def assert_json_400(response, detail: str) -> None:
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": detail}


def test_a_json_body_over_the_memory_limit(curator):
    body = json.dumps({"kind": "demo.sample_continuations", "params": {"prompt": "x" * THREE_MB}})
    assert_json_400(curator.post(JOBS, body, content_type="application/json"), TOO_BIG)


def test_a_form_field_over_the_memory_limit(curator):
    assert_json_400(curator.post(IMPORT, {"dry_run": "x" * THREE_MB}, format="multipart"), TOO_BIG)


@pytest.mark.parametrize("form_format", ["multipart", "urlencoded"])
def test_too_many_form_fields(curator, form_format):
    if form_format == "multipart":
        response = curator.post(IMPORT, MANY_FIELDS, format="multipart")
    else:
        response = curator.post(JOBS, "&".join(f"{name}=1" for name in MANY_FIELDS),
                                content_type="application/x-www-form-urlencoded")
    assert_json_400(response, TOO_MANY)


def test_too_many_query_parameters(curator):
    assert_json_400(curator.get(JOBS, MANY_FIELDS), TOO_MANY)


def test_too_many_files(curator):
    files = [SimpleUploadedFile(f"f{n}.jsonl", b"{}\n") for n in range(settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)]
    assert_json_400(curator.post(IMPORT, {"file": files}, format="multipart"),
                    f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files "
                    "(DATA_UPLOAD_MAX_NUMBER_FILES).")


def test_a_file_part_does_not_count_against_the_memory_limit(curator):
    prompt = "x" * 100_000  # 30 lines of 100 kB (3 MB): each line well under the importer's MAX_LINE_BYTES
    lines = b"".join(json.dumps({"id": f"p{n}", "messages": [{"role": "user", "content": prompt}]}).encode() + b"\n"
                     for n in range(30))
    assert len(lines) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = curator.post(IMPORT, {"file": SimpleUploadedFile("big.jsonl", lines)}, format="multipart")
    assert response.status_code == 200, response.content[:500]
    assert Item.objects.filter(project__slug="alpha").count() == 30


def test_pages_keep_djangos_html_page(members):
    browser = Client(raise_request_exception=False)
    browser.force_login(members["curator"])
    response = browser.post("/projects/alpha/annotate/import", MANY_FIELDS)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"Bad Request (400)" in response.content
