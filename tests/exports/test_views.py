import re

import pytest
from django.urls import reverse

from dataplatform.exports.models import Export

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("who, status, sees_form", [
    ("admin", 200, True), ("curator", 200, True), ("trainer", 200, False), ("annotator", 403, False),
    ("outsider", 404, False),
])
def test_exports_page_by_role(client, members, project, who, status, sees_form):
    client.force_login(members[who])
    response = client.get(reverse("export-list", args=["alpha"]))
    assert response.status_code == status
    assert ('action="/projects/alpha/exports/new"' in response.content.decode()) == sees_form


def test_create_from_the_form_with_filters(client, members, project, django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("export-create", args=["alpha"]), {
            "kind": "platform.jobs", "format": "jsonl", "shard_mb": "1.5", "validation_ratio": "0.1",
            "filters": "status=failed\nstatus=cancelled", "created_after": "2026-01-01T00:00Z", "dedup": "1",
        })
    assert response.status_code == 302 and len(callbacks) == 1
    export = Export.objects.get()
    assert export.format == "jsonl" and export.shard_bytes == 1_572_864 and export.dedup
    assert sorted(export.filters["status"]) == ["cancelled", "failed"]
    assert export.filters["created_after"].startswith("2026-01-01T00:00:00")


def test_form_errors_come_back_as_messages(client, members, project):
    client.force_login(members["curator"])
    response = client.post(reverse("export-create", args=["alpha"]),
                           {"kind": "platform.jobs", "filters": "colour=red"}, follow=True)
    assert "colour: &quot;colour&quot; is not a filter of this kind; its filters:" in response.content.decode()
    assert not Export.objects.exists()


def test_trainer_cannot_post_the_form(client, members, project):
    client.force_login(members["trainer"])
    assert client.post(reverse("export-create", args=["alpha"]), {"kind": "platform.jobs"}).status_code == 403


def test_running_export_row_polls_and_finished_row_links_files(client, members, run_export):
    client.force_login(members["trainer"])
    export = run_export(filters={"n": 12}, shard_rows=5)
    html = client.get(reverse("export-row", args=["alpha", export.pk])).content.decode()
    assert "hx-trigger" not in html and "3 shards" in html and "manifest" in html
    export.job.state = "running"
    export.job.save()
    html = client.get(reverse("export-row", args=["alpha", export.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in html and html.count("hx-get") == 1  # only the row polls


def test_detail_page_shows_files_and_load_snippets(client, members, run_export):
    client.force_login(members["trainer"])
    export = run_export(filters={"n": 12}, validation_ratio=0.3)
    html = client.get(reverse("export-detail", args=["alpha", export.pk])).content.decode()
    assert f"load_dataset(&#x27;./export-{export.pk}&#x27;)" in html and "pd.read_parquet" in html
    assert "pq.read_table" in html
    assert f"dataplatform_pull.py http://testserver/api/v1/projects/alpha/exports/{export.pk}/" in html
    assert "export DATAPLATFORM_TOKEN=" in html and "--token" not in html  # never on the command line
    assert "curl -fsSL -o dataplatform_pull.py http://testserver/api/v1/exports/pull-script" in html
    assert "storage_options={&#x27;headers&#x27;: headers}" in html  # load_dataset over HTTP, token in a header
    for shard in export.manifest["shards"]:
        assert f"/api/v1/projects/alpha/exports/{export.pk}/shards/{shard['name']}" in html
    assert f"12 rows in {len(export.manifest['shards'])} shards; read" in html and "row by row by the kind" in html


@pytest.mark.parametrize("kind, filters, why", [
    ("test.synthetic", {"n": 0}, "none of the project's records of its kind matched its filters at data version"),
    ("test.job_values", {}, "the project had no records of its kind at data version")])
def test_the_page_of_an_export_of_no_rows_says_why_it_is_empty(client, members, run_export, kind, filters, why):
    client.force_login(members["trainer"])
    export = run_export(kind=kind, filters=filters)
    assert export.manifest["totals"]["rows"] == 0 and bool(export.filters) == bool(filters)
    html = " ".join(client.get(reverse("export-detail", args=["alpha", export.pk])).content.decode().split())
    assert f"This export has no rows: {why} <code>{export.data_version}</code>." in html
    assert "load_dataset(&#x27;./export-" in html and "streaming=True" in html
    assert "train-00000.parquet" in html  # its one empty shard


def test_the_card_names_only_splits_that_have_files(client, members, run_export, export_storage_in_tmp):
    export = run_export(filters={"n": 12}, validation_ratio=0)
    card = (export_storage_in_tmp / export.location / "README.md").read_text()
    assert "path: train-*.parquet" in card and "validation-*" not in card  # a glob matching nothing fails


def test_the_form_lists_each_kinds_filters_with_choices_and_defaults(client, members, project):
    client.force_login(members["curator"])
    page = client.get(reverse("export-list", args=[project.slug])).content.decode()
    row = " ".join(page[page.index("<code>allocation</code>"):].split("</tr>")[0].split())
    assert 'id="filter-help"' in page
    assert row.startswith("<code>allocation</code></td><td>choice</td> <td><code>equal</code>, <code>fill</code></td>"
                          "<td><code>equal</code></td>")


def test_the_list_filters_by_kind_data_version_and_state_as_the_api_does(client, members, run_export):
    done, failed = run_export(filters={"n": 2}), run_export(filters={"n": 1, "fail_at": 1})
    client.force_login(members["trainer"])

    def listed(query: str) -> tuple[list[int], str]:
        html = client.get(reverse("export-list", args=["alpha"]) + query).content.decode()
        return sorted(int(pk) for pk in re.findall(r'<tr id="export-(\d+)"', html)), html

    assert listed("?kind=&data_version=&state=")[0] == sorted([done.pk, failed.pk])  # the form's "any": no filter
    assert listed("?state=failed")[0] == [failed.pk]
    assert listed("?kind=test.synthetic&data_version=synthetic-v1&state=succeeded")[0] == [done.pk]
    rows, html = listed("?data_version=synthetic-v0")
    assert rows == [] and "No exports match these filters." in html
    rows, html = listed("?state=lost")  # refused, not ignored
    assert rows == [] and "state: Select a valid choice. lost is not one of the available choices." in html
    assert '<option value="failed" selected>' in listed("?state=failed")[1]
