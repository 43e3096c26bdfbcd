"""The SWE Labeler's metrics page: agreement tables and SVG charts."""

import pytest
from django.urls import reverse

from labeler import services

pytestmark = pytest.mark.django_db


def test_metrics_page_tables_and_svg_charts(client, members, project, claimed):
    task, label = claimed
    services.edit_label(label=label, version=label.version, changes={"scope": "multi-file"},
                        actor=members["annotator"])
    label.refresh_from_db()
    services.submit_label(label=label, version=label.version, actor=members["annotator"])
    client.force_login(members["curator"])
    response = client.get(reverse("labeler-metrics", args=["alpha"]))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count("<svg") == 1 + len(label.taxonomy.definition.fields())  # categories + one per field
    assert "<td>Scope</td><td>0%</td><td>1</td>" in html and "<td>Domain: family</td><td>100%</td><td>1</td>" in html
    assert '<td>Domain: tags</td><td translate="no">rest-api</td><td>1.00</td><td>1.00</td><td>1</td>' in html
    assert '<td translate="no">annotator</td>' in html and "Reviewer category of the final labels" in html
