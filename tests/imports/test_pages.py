"""The import result on a page: the events a trace reader kept outside the conversations before anything is
written, and the first 200 errors of an upload with the total."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from corpora.aed.models import Trace
from tests import real_openhands

pytestmark = pytest.mark.django_db


def _result(client, name: str, body: bytes, **data) -> str:
    html = client.post(reverse("aed-import", args=["alpha"]), {"file": SimpleUploadedFile(name, body), **data}
                       ).content.decode()
    return re.search(r'<div id="import-result".*?</div>', html, re.DOTALL)[0]


def test_a_dry_run_shows_the_events_kept_outside_the_conversations(client, members):
    client.force_login(members["curator"])
    name = real_openhands.PAIRS_2024
    html = _result(client, name, b"".join(real_openhands.lines(name)), dry_run="1")
    lines, nulls = len(real_openhands.lines(name)), real_openhands.null_observations(name)
    assert f"{lines} lines read" in html and "0 errors" in html and "Nothing was written." in html
    assert f'<li>{nulls} “<span translate="no">null observation</span>” events kept outside the conversations, in the ' \
           "traces' meta</li>" in html
    assert not Trace.objects.exists()


def test_an_upload_shows_its_first_200_errors_and_counts_them_all(client, members):
    client.force_login(members["curator"])
    body = b"".join(b"{bad\n" for _ in range(250)) + json.dumps({"messages": []}).encode() + b"\n"
    html = _result(client, "many.jsonl", body)
    assert "251 lines read" in html and "251 errors" in html and "… and 51 more errors." in html
    assert html.count('<td translate="no">many.jsonl</td>') == 200
