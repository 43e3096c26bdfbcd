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
