import pytest
from django.urls import reverse

from dataplatform.system.selectors import ServiceStatus

pytestmark = pytest.mark.django_db


def test_system_page_shows_each_service_escaped(client, members, monkeypatch):
    monkeypatch.setattr("dataplatform.system.views.platform_status", lambda: [
        ServiceStatus("Database", True, "sqlite, 1 ms"),
        ServiceStatus("Model backend", False, "<b>vllm</b> refused", {"backend": "vllm"}),
    ])
    client.force_login(members["annotator"])
    html = client.get(reverse("system")).content.decode()
    assert "attention needed" in html and "&lt;b&gt;vllm&lt;/b&gt; refused" in html
    assert 'hx-trigger="every 5s"' in html


def test_htmx_refresh_returns_only_the_partial(client, members, monkeypatch):
    monkeypatch.setattr("dataplatform.system.views.platform_status", lambda: [ServiceStatus("Database", True, "ok")])
    client.force_login(members["annotator"])
    html = client.get(reverse("system"), HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="system-status"') and "all green" in html


def test_the_page_offers_the_check_before_any_has_run(client, members, reports):
    client.force_login(members["annotator"])
    html = client.get(reverse("system")).content.decode()
    assert "No check has run yet." in html and f'hx-post="{reverse("system-capabilities")}"' in html
    assert reports == []  # showing the page runs no model call


def test_checking_swaps_the_report_in_with_each_fix_escaped(client, members, reports):
    client.force_login(members["annotator"])
    html = client.post(reverse("system-capabilities"), HTTP_HX_REQUEST="true").content.decode()
    assert len(reports) == 1 and html.lstrip().startswith('<section id="capabilities"')
    assert "Some capabilities fail" in html and "&lt;b&gt;max allowed: 2&lt;/b&gt;" in html
    assert '<span translate="no">--max-logprobs 5</span>' in html
    assert html.count('class="ok">PASS') == 1 and html.count('class="bad">FAIL') == 1
    # The page shows the last report from then on, without running the check again.
    page = client.get(reverse("system")).content.decode()
    assert "Some capabilities fail" in page and len(reports) == 1


def test_a_plain_form_post_comes_back_to_the_page(client, members, reports):
    client.force_login(members["annotator"])
    response = client.post(reverse("system-capabilities"))
    assert response.status_code == 302 and response["Location"] == reverse("system") and len(reports) == 1


def test_only_a_post_runs_the_check_and_only_for_a_logged_in_user(client, members, reports):
    assert client.post(reverse("system-capabilities")).status_code == 302  # to the log-in page
    client.force_login(members["trainer"])
    assert client.get(reverse("system-capabilities")).status_code == 405
    assert reports == []
