import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate import services
from annotate.models import Item, Review
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who, status, curator_parts", [
    ("admin", 200, True), ("curator", 200, True), ("annotator", 200, False), ("trainer", 403, False),
    ("outsider", 404, False),
])
def test_queue_page_by_role(client, members, project, who, status, curator_parts):
    client.force_login(members[who])
    response = client.get(reverse("annotate-queue", args=["alpha"]))
    assert response.status_code == status
    assert ("Import prompts" in response.content.decode()) == curator_parts


def test_claim_opens_the_workspace(client, members, project, make_items):
    make_items(1)
    client.force_login(members["annotator"])
    response = client.post(reverse("annotate-claim", args=["alpha"]))
    assert response.status_code == 302 and "/annotate/sessions/" in response["Location"]
    page = client.get(response["Location"]).content.decode()
    assert 'data-can-write="1"' in page and 'class="tok origin-model' in page


def test_claim_with_an_empty_queue_says_so(client, members, project):
    client.force_login(members["annotator"])
    response = client.post(reverse("annotate-claim", args=["alpha"]), follow=True)
    assert "No items left for you" in response.content.decode()


def test_workspace_is_read_only_for_a_curator_and_hidden_from_other_annotators(client, members, project, session):
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    assert 'data-can-write="0"' in page
    other = UserFactory(username="other")
    MembershipFactory(project=project, user=other, role="annotator")
    client.force_login(other)
    assert client.get(reverse("annotate-workspace", args=[session.pk])).status_code == 404


def test_import_form_reports_line_errors(client, members, project):
    client.force_login(members["curator"])
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    upload = SimpleUploadedFile("p.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("annotate-import", args=["alpha"]), {"file": upload}).content.decode()
    assert "<td>p.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON" in page and "Nothing was written" in page
    assert not Item.objects.exists()


def test_import_form_imports_and_tables_up_to_200_errors(client, members, project):
    """The shared import report of every JSONL page: counts, skipped lines, and 200 errors listed."""
    client.force_login(members["curator"])
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    upload = SimpleUploadedFile("p.jsonl", (good + "\n" + "{bad\n" * 250).encode())
    page = client.post(reverse("annotate-import", args=["alpha"]),
                       {"file": upload, "skip_bad_lines": "1"}).content.decode()
    assert "1 created" in page and "250 lines skipped" in page and Item.objects.count() == 1
    assert page.count("<td>(line)</td>") == 200 and "… and 50 more errors." in page
    response = client.post(reverse("annotate-import", args=["alpha"]), follow=True)
    assert "Choose a JSONL file to import." in response.content.decode()


def test_review_page_and_decisions(client, members, project, session):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-review", args=["alpha"])).content.decode()
    assert "accepted as generated" in page
    response = client.post(reverse("annotate-review-session", args=[session.pk]), {"decision": "rejected"},
                           follow=True)
    assert "needs a comment" in response.content.decode() and not Review.objects.exists()
    client.post(reverse("annotate-review-session", args=[session.pk]),
                {"decision": "rejected", "comment": "<b>too long</b>"})
    page = client.get(reverse("annotate-review", args=["alpha"])).content.decode()
    assert "rejected: &lt;b&gt;too long&lt;/b&gt;" in page
    client.force_login(members["annotator"])
    assert client.get(reverse("annotate-review", args=["alpha"])).status_code == 403


def test_metrics_page_draws_svg_charts(client, members, project, session):
    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    client.force_login(members["curator"])
    response = client.get(reverse("annotate-metrics", args=["alpha"]))
    html = response.content.decode()
    assert response.status_code == 200 and html.count("<svg") == 6
    assert "100%" in html  # the one response was accepted as generated
    client.force_login(members["annotator"])
    assert client.get(reverse("annotate-metrics", args=["alpha"])).status_code == 403


def test_review_and_metrics_api(members, project, session):
    from tests.conftest import api_client_for

    services.finish(session=session, version=0, actor=members["annotator"], accept=True)
    curator = api_client_for(members["curator"])
    created = curator.post(f"/api/v1/sessions/{session.pk}/review/", {"decision": "approved"}, format="json")
    assert created.status_code == 201 and created.json()["decision"] == "approved"
    assert api_client_for(members["annotator"]).post(f"/api/v1/sessions/{session.pk}/review/",
                                                     {"decision": "approved"}, format="json").status_code == 403
    metrics = curator.get("/api/v1/projects/alpha/annotate/metrics/").json()
    assert metrics["accepted_sessions"] == 1 and metrics["direct_accept_rate"] == 1.0
    assert api_client_for(members["trainer"]).get("/api/v1/projects/alpha/annotate/metrics/").status_code == 403


def test_curator_saves_settings_and_bad_values_are_named(client, members, project):
    client.force_login(members["curator"])
    client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "7", "overlap": "2", "seed_policy": "fixed"})
    config = services.config_for(project)
    assert (config.top_k, config.overlap, config.seed_policy) == (7, 2, "fixed")
    page = client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "99"}, follow=True).content.decode()
    assert "top_k: Ensure this value is less than or equal to 50." in page
    client.force_login(members["annotator"])
    assert client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "3"}).status_code == 403


def test_panda_json_upload_by_form_and_api(client, members, project, monkeypatch):
    from annotate.models import Session
    from tests.annotate.test_panda_json import minimal_file
    from tests.annotate.test_supervision import CharBackend
    from tests.conftest import api_client_for

    backend = CharBackend()
    monkeypatch.setattr(services, "backend_for", lambda project: backend)
    document = json.dumps(minimal_file()).encode()
    client.force_login(members["curator"])
    page = client.post(reverse("annotate-import-panda", args=["alpha"]),
                       {"file": SimpleUploadedFile("s.panda.json", document)}, follow=True).content.decode()
    assert "s.panda.json imported" in page
    session = Session.objects.get()
    assert session.annotator == members["curator"] and session.status == "accepted"
    again = api_client_for(members["curator"]).post("/api/v1/projects/alpha/annotate/import-panda/",
                                                    {"file": SimpleUploadedFile("s.panda.json", document)},
                                                    format="multipart")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    broken = api_client_for(members["curator"]).post("/api/v1/projects/alpha/annotate/import-panda/",
                                                     {"file": SimpleUploadedFile("x.panda.json", b"{nope")},
                                                     format="multipart")
    assert broken.status_code == 400 and "x.panda.json, line 1 column 2: not a JSON file" in str(broken.json())
    assert api_client_for(members["annotator"]).post(
        "/api/v1/projects/alpha/annotate/import-panda/", {"file": SimpleUploadedFile("s.panda.json", document)},
        format="multipart").status_code == 403


def test_curator_reassigns_from_the_queue_page(client, members, project, make_items):
    from annotate.models import Claim

    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    client.force_login(members["curator"])
    page = client.get(reverse("annotate-queue", args=["alpha"])).content.decode()
    assert f'action="/projects/alpha/annotate/claims/{claim.pk}/reassign"' in page
    client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "admin"})
    assert Claim.objects.get(item=claim.item, annotator=members["admin"]).state == "active"
    response = client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "trainer"},
                           follow=True)
    assert "Choose an annotator of this project." in response.content.decode()
    client.force_login(members["annotator"])
    assert client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), {"username": "admin"}).status_code == 403


def test_workspace_offers_skip(client, members, session):
    client.force_login(members["annotator"])
    page = client.get(reverse("annotate-workspace", args=[session.pk])).content.decode()
    assert f'data-url-skip="/api/v1/projects/alpha/annotate/claims/{session.claim_id}/skip/"' in page


def test_oversized_panda_upload_is_refused_by_name(client, members, project, monkeypatch):
    from annotate.panda_json import parser

    monkeypatch.setattr(parser, "MAX_FILE_BYTES", 10)
    client.force_login(members["curator"])
    page = client.post(reverse("annotate-import-panda", args=["alpha"]),
                       {"file": SimpleUploadedFile("big.panda.json", b"{" + b" " * 20 + b"}")},
                       follow=True).content.decode()
    assert "big.panda.json: 22 bytes is more than the 10 allowed." in page
