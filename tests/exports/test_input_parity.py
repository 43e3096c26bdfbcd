"""One input layer: creating an export from the API, from the export page's form and from the CLI reads one
serializer (`ExportOptions`), so the same bad input gets the same refusal from the API and the page, on the same
field with the same message, and good input makes the same export through both. A form sends the filters as
`key=value` lines (as the CLI's --filter), created_after and created_before in boxes of their own, and the shard
size in MiB (`shard_mb`, which the API takes too)."""

import pytest
from django.urls import reverse

from dataplatform.exports.models import Export
from tests.conftest import api_client_for

from ..input_parity import assert_refused_alike

pytestmark = pytest.mark.django_db
JOBS = "platform.jobs"


def send_both(client, members, form: dict, *, encoding: str = "multipart"):
    api = api_client_for(members["curator"]).post("/api/v1/projects/alpha/exports/", form, format=encoding)
    client.force_login(members["curator"])
    return api, client.post(reverse("export-create", args=["alpha"]), form)


REFUSALS = [  # (form, field, message, also as JSON)
    ({}, "kind", "This field is required.", True),
    ({"kind": "nope"}, "kind", None, True),  # the registry's: names the known kinds
    ({"kind": JOBS, "format": "csv"}, "format", '"csv" is not a valid choice.', True),
    ({"kind": JOBS, "validation_ratio": "0.9"}, "validation_ratio", "Ensure this value is less than or equal to 0.5.",
     True),
    ({"kind": JOBS, "shard_rows": "0"}, "shard_rows", "Ensure this value is greater than or equal to 1.", True),
    ({"kind": JOBS, "shard_mb": "big"}, "shard_mb", "shard_mb must be a number.", True),
    ({"kind": JOBS, "shard_mb": "0"}, "shard_mb", "shard_mb must be between 0.01 and 1000000.", True),
    ({"kind": JOBS, "shard_mb": "1", "shard_bytes": "4096"}, "shard_mb", "Give shard_bytes or shard_mb, not both.",
     True),
    ({"kind": JOBS, "dedup": "maybe"}, "dedup", "Must be a valid boolean.", True),
    # Not a filter, not an option: refused by name with the valid ones, never dropped (a typo would export everything).
    ({"kind": JOBS, "filters": "colour=red"}, "filters.colour",
     '"colour" is not a filter of this kind; its filters: created_after, created_before, status, job_kind.', False),
    ({"kind": JOBS, "filters": "data_version=3"}, "filters.data_version",
     '"data_version" is an option of the export, not a filter: give it beside "filters".', False),
    ({"kind": JOBS, "filtres": "status=failed"}, "filtres", '"filtres" is not an export option; the options: kind, '
     'filters, format, shard_rows, shard_bytes, shard_mb, validation_ratio, dedup, data_version.', True),
    ({"kind": JOBS, "status": "failed"}, "status",
     '"status" is a filter of platform.jobs, not an option: give it inside "filters".', True),
    # Pinned to an earlier data version: only a kind whose data are append-only, at a version it has had.
    ({"kind": JOBS, "data_version": "1"}, "data_version", "platform.jobs cannot be exported at an earlier data "
     "version: a job's row changes until the job ends (one queued or running when an export started finishes "
     "later), and deleting an export deletes its job.", True),
    ({"kind": "atd.scored", "data_version": "1:2"}, "data_version",
     "1:2 is not a data version of atd.scored; they look like its current one, 0.", True),
    ({"kind": "atd.scored", "data_version": "7"}, "data_version",
     "7 is past the current data version of atd.scored, 0.", True),
    ({"kind": JOBS, "filters": "status"}, "filters", "Filter 1 ('status') must look like key=value.", False),
    ({"kind": JOBS, "filters": "status=lost"}, "filters.status", None, False),
    ({"kind": JOBS, "created_after": "yesterday"}, "filters.created_after", None, False),
]


# A form's filter lines are an object in JSON, so those refusals are sent as a form only (and as JSON below).
ENCODED_REFUSALS = [pytest.param(form, field, message, encoding, id=f"{field}-{n}-{encoding}")
                    for n, (form, field, message, as_json) in enumerate(REFUSALS)
                    for encoding in (["multipart", "json"] if as_json else ["multipart"])]


@pytest.mark.parametrize("form, field, message, encoding", ENCODED_REFUSALS)
def test_the_api_and_the_page_refuse_alike(client, members, project, form, field, message, encoding):
    api, page = send_both(client, members, form, encoding=encoding)
    assert_refused_alike(api, page, field, message)
    assert not Export.objects.exists()


def test_an_unknown_filter_in_json_is_refused_as_in_a_form(members, project):
    api = api_client_for(members["curator"])
    response = api.post("/api/v1/projects/alpha/exports/", {"kind": "onpanda.sft", "filters": {"reveiw": [
        "approved"], "data_version": "1:1:1"}}, format="json")
    assert response.status_code == 400 and response.json() == {"filters": {
        "reveiw": ['"reveiw" is not a filter of this kind; its filters: created_after, created_before, annotator, '
                   'review.'],
        "data_version": ['"data_version" is an option of the export, not a filter: give it beside "filters".']}}
    assert not Export.objects.exists()


def test_good_input_makes_the_same_export_through_both(client, members, project,
                                                         django_capture_on_commit_callbacks):
    form = {"kind": JOBS, "format": "jsonl", "shard_mb": "1.5", "validation_ratio": "0.1", "dedup": "1",
            "filters": "status=failed\nstatus=cancelled", "created_after": "2026-01-01T00:00Z"}
    with django_capture_on_commit_callbacks(execute=False):
        api, page = send_both(client, members, form)
        json_api = api_client_for(members["curator"]).post("/api/v1/projects/alpha/exports/", {
            "kind": JOBS, "format": "jsonl", "shard_mb": 1.5, "validation_ratio": 0.1, "dedup": True,
            "filters": {"status": ["failed", "cancelled"], "created_after": "2026-01-01T00:00Z"}}, format="json")
    assert api.status_code == json_api.status_code == 202 and page.status_code == 302
    made = [(e.format, e.shard_bytes, e.shard_rows, e.validation_ratio, e.dedup, sorted(e.filters["status"]),
             e.filters["created_after"]) for e in Export.objects.order_by("id")]
    assert made == [("jsonl", 1_572_864, None, 0.1, True, ["cancelled", "failed"], made[0][-1])] * 3
    assert made[0][-1].startswith("2026-01-01T00:00:00")
