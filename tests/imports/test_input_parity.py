"""One input layer (dataplatform/imports/inputs.py): an upload's dry_run and skip_bad_lines are read by one
serializer on the API (apiutils.import_upload) and on the import pages (pages.page_import), so both take the same
yes and no, and refuse anything else alike, naming the box (the page once took any text as yes, the API as no)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from corpora.atd.models import AtdPrompt
from tests.conftest import api_client_for

from ..input_parity import assert_refused_alike

pytestmark = pytest.mark.django_db
GOOD = json.dumps({"id": "ok", "prompt": "hi", "candidates": ["a", "b"]})
BAD = json.dumps({"id": ""})


def send_both(client, members, fields: dict, *lines: str):
    def upload():
        return SimpleUploadedFile("pool.jsonl", "\n".join(lines).encode())

    api = api_client_for(members["curator"]).post("/api/v1/projects/alpha/atd/import/",
                                                  {"file": upload(), **fields}, format="multipart")
    client.force_login(members["curator"])
    return api, client.post("/projects/alpha/atd/import", {"file": upload(), **fields})


@pytest.mark.parametrize("field", ["dry_run", "skip_bad_lines"])
@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_box_that_is_not_yes_or_no_is_refused_alike(client, members, project, field, value):
    api, page = send_both(client, members, {field: value}, GOOD)
    assert_refused_alike(api, page, field, "Must be a valid boolean.", page_status=400)
    assert not AtdPrompt.objects.exists()


@pytest.mark.parametrize("yes", ["1", "on", "true", "yes"])
def test_a_dry_run_writes_nothing_through_both(client, members, project, yes):
    api, page = send_both(client, members, {"dry_run": yes}, GOOD)
    assert api.status_code == 200 and api.json()["dry_run"] and page.status_code == 200
    assert not AtdPrompt.objects.exists()


@pytest.mark.parametrize("no", ["", "0", "off", "false"])
def test_skip_bad_lines_left_off_refuses_the_file_through_both(client, members, project, no):
    api, page = send_both(client, members, {"skip_bad_lines": no}, GOOD, BAD)
    assert api.status_code == 400 and "Nothing was written" in page.content.decode()
    assert not AtdPrompt.objects.exists()
    api, page = send_both(client, members, {"skip_bad_lines": "1"}, GOOD, BAD)
    assert api.status_code == 200 and api.json()["created"] == 1 and page.status_code == 200
    assert AtdPrompt.objects.count() == 1  # the page's import of the same line adds nothing
