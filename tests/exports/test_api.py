import json

import pytest
from rest_framework.test import APIClient

from dataplatform.exports.models import Export
from dataplatform.jobs.models import JobState
from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db

ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
BASE = "/api/v1/projects/alpha/exports/"


@pytest.fixture
def export(run_export):
    return run_export(filters={"n": 300}, shard_rows=120, validation_ratio=0.1)


@pytest.fixture
def shard(export):
    return export.manifest["shards"][0]


def client_as(members, who):
    return APIClient() if who == "anonymous" else api_client_for(members[who])


MATRIX = [
    ("get", BASE, {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}),
    ("post", BASE, {"admin": 202, "curator": 202, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}),
    ("get", BASE + "{id}/",
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}),
    ("get", BASE + "{id}/manifest",
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}),
    ("get", BASE + "{id}/shards/{shard}",
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}),
    ("head", BASE + "{id}/shards/{shard}",
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}),
    ("delete", BASE + "{id}/",
     {"admin": 204, "curator": 403, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}),
    ("get", "/api/v1/export-kinds/",
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 200, "outsider": 200, "anonymous": 401}),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, expected", MATRIX, ids=[f"{m} {u}" for m, u, _ in MATRIX])
def test_export_endpoint_status_for_role(members, export, shard, who, method, url, expected,
                                         django_capture_on_commit_callbacks):
    body = {"kind": "test.synthetic", "filters": {"n": 5}} if method == "post" else None
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(client_as(members, who), method)(url.format(id=export.pk, shard=shard["name"]), body,
                                                            format="json")
    assert response.status_code == expected[who], getattr(response, "content", b"")[:300]


def test_another_projects_export_is_404_even_for_its_url_under_my_project(members, export, other_project):
    foreign = Export.objects.get(pk=export.pk)
    foreign.project = other_project
    foreign.save()
    client = api_client_for(members["admin"])
    assert client.get(f"{BASE}{export.pk}/").status_code == 404
    assert client.get(f"/api/v1/projects/beta/exports/{export.pk}/").status_code == 404


def test_token_scoped_to_another_project_cannot_see_this_one(members, export, other_project):
    from tests.factories import MembershipFactory

    MembershipFactory(project=other_project, user=members["trainer"], role="trainer")
    client = api_client_for(members["trainer"], projects=[other_project])
    assert client.get(BASE).status_code == 404
    assert client.get(f"{BASE}{export.pk}/manifest").status_code == 404


def test_trainer_cannot_create_or_delete(members, export):
    client = api_client_for(members["trainer"])
    assert client.post(BASE, {"kind": "test.synthetic"}, format="json").status_code == 403
    assert client.delete(f"{BASE}{export.pk}/").status_code == 403
    assert Export.objects.filter(pk=export.pk).exists()


def test_create_returns_202_and_bad_options_400(members, django_capture_on_commit_callbacks):
    client = api_client_for(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        created = client.post(BASE, {"kind": "test.synthetic", "filters": {"n": 3}, "format": "jsonl.gz",
                                     "validation_ratio": 0.1}, format="json")
    assert created.status_code == 202
    assert created.json()["state"] == "queued" and created.json()["format"] == "jsonl.gz"
    bad = client.post(BASE, {"kind": "test.synthetic", "validation_ratio": 0.9, "shard_rows": 0}, format="json")
    assert bad.status_code == 400 and {"validation_ratio", "shard_rows"} <= set(bad.json())


def test_detail_lists_shard_urls_and_progress(members, export):
    body = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/").json()
    assert body["state"] == "succeeded" and body["percent"] == 100 and body["rows_total"] == 300
    assert body["manifest_url"].endswith(f"/exports/{export.pk}/manifest")
    assert [s["name"] for s in body["shards"]] == [s["name"] for s in export.manifest["shards"]]
    assert all(s["url"].startswith("http://testserver/") for s in body["shards"])


def test_list_filters_by_kind_and_state_with_cursor_pages(members, run_export):
    for n in (1, 2, 3):
        run_export(filters={"n": n})
    run_export(filters={"n": 1, "fail_at": 1})
    client = api_client_for(members["trainer"])
    page = client.get(BASE + "?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]
    assert len(client.get(page["next"]).json()["results"]) == 2
    assert len(client.get(BASE + "?state=failed").json()["results"]) == 1
    assert len(client.get(BASE + "?state=failed&state=succeeded").json()["results"]) == 4
    assert len(client.get(BASE + "?kind=platform.jobs").json()["results"]) == 0
    assert client.get(BASE + "?state=lost").status_code == 400  # not every export, as an ignored filter would give
    assert len(client.get(BASE + "?data_version=synthetic-v1").json()["results"]) == 4
    assert len(client.get(BASE + "?data_version=synthetic-v2").json()["results"]) == 0


def test_manifest_of_a_running_export_is_409(members, export):
    export.job.state = JobState.RUNNING
    export.job.save()
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/manifest")
    assert response.status_code == 409


def test_delete_of_a_running_export_is_409(members, export):
    export.job.state = JobState.RUNNING
    export.job.save()
    assert api_client_for(members["admin"]).delete(f"{BASE}{export.pk}/").status_code == 409


@pytest.mark.parametrize("name", ["../../../etc/passwd", "..%2F..%2Fsecret", "train-99999.parquet", ".train.partial"])
def test_only_files_in_the_manifest_can_be_downloaded(members, export, name):
    assert api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{name}").status_code == 404


def full_bytes(client, url):
    return b"".join(client.get(url).streaming_content)


def test_full_download_has_etag_and_length(members, export, shard, export_storage_in_tmp):
    client = api_client_for(members["trainer"])
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    response = client.get(url)
    body = b"".join(response.streaming_content)
    assert response.status_code == 200
    assert response["ETag"] == f'"{shard["sha256"]}"' and response["Accept-Ranges"] == "bytes"
    assert int(response["Content-Length"]) == shard["bytes"] == len(body)
    assert body == (export_storage_in_tmp / export.location / shard["name"]).read_bytes()


def test_head_answers_the_headers_a_download_has_without_the_file(members, export, shard):
    client = api_client_for(members["trainer"])
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    head, get = client.head(url), client.get(url)
    assert head.status_code == 200 and head.content == b""
    for header in ("ETag", "Content-Length", "Content-Type", "Content-Disposition", "Accept-Ranges"):
        assert head[header] == get[header], header


@pytest.mark.parametrize("header, expected_slice", [
    ("bytes=0-99", slice(0, 100)),
    ("bytes=100-199", slice(100, 200)),
    ("bytes=-50", slice(-50, None)),
    ("bytes=1000-", slice(1000, None)),
    ("bytes=10-99999999", slice(10, None)),
])
def test_range_requests(members, export, shard, header, expected_slice):
    client = api_client_for(members["trainer"])
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    whole = full_bytes(client, url)
    response = client.get(url, HTTP_RANGE=header)
    part = b"".join(response.streaming_content)
    assert response.status_code == 206
    assert part == whole[expected_slice]
    start = len(whole) + expected_slice.start if expected_slice.start < 0 else expected_slice.start
    assert response["Content-Range"] == f"bytes {start}-{start + len(part) - 1}/{len(whole)}"
    assert int(response["Content-Length"]) == len(part)


@pytest.mark.parametrize("header", ["bytes=999999-", "bytes=5-2", "bytes=-0", "bytes=abc", "items=0-5", "bytes=-"])
def test_invalid_or_unsatisfiable_range_is_416(members, export, shard, header):
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{shard['name']}",
                                                      HTTP_RANGE=header)
    assert response.status_code == 416
    assert response["Content-Range"] == f"bytes */{shard['bytes']}"


def test_if_none_match_gives_304(members, export, shard):
    client = api_client_for(members["trainer"])
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    assert client.get(url, HTTP_IF_NONE_MATCH=f'"{shard["sha256"]}"').status_code == 304
    assert client.get(url, HTTP_IF_NONE_MATCH='"something-else"').status_code == 200


def test_if_range_with_a_stale_etag_sends_the_whole_file(members, export, shard):
    client = api_client_for(members["trainer"])
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    assert client.get(url, HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE=f'"{shard["sha256"]}"').status_code == 206
    stale = client.get(url, HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"old"')
    assert stale.status_code == 200 and int(stale["Content-Length"]) == shard["bytes"]


def test_dataset_card_and_manifest_download(members, export):
    client = api_client_for(members["trainer"])
    card = full_bytes(client, f"{BASE}{export.pk}/shards/README.md").decode()
    assert "test.synthetic" in card and "300 rows" in card
    manifest = client.get(f"{BASE}{export.pk}/manifest").json()
    assert manifest == export.manifest


def test_export_kinds_lists_schema_and_filters(members):
    kinds = {k["name"]: k for k in api_client_for(members["trainer"]).get("/api/v1/export-kinds/").json()}
    assert "platform.jobs" in kinds and "status" in kinds["platform.jobs"]["filters"]
    assert [f["name"] for f in kinds["test.synthetic"]["schema"]][:2] == ["id", "created_at"]
    # How each kind trains in TRL as it is, and what its fields mean.
    assert (kinds["onpanda.sft"]["trl_format"], kinds["onpanda.sft"]["trl_trainer"]) == ("prompt_completion",
                                                                                         "SFTTrainer")
    assert (kinds["atd.dpo"]["trl_format"], kinds["atd.dpo"]["trl_trainer"]) == ("preference", "DPOTrainer")
    assert kinds["platform.jobs"]["trl_format"] is None and kinds["platform.jobs"]["trl_trainer"] is None
    recovery = {field["name"]: field for field in kinds["aed.recovery"]["schema"]}
    assert kinds["aed.recovery"]["trl_format"] == "tokenized" and "completion_mask" in recovery


def test_list_query_count_does_not_grow_with_exports(members, run_export, django_assert_max_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_client_for(members["trainer"])
    run_export(filters={"n": 2})
    with CaptureQueriesContext(connection) as few:
        client.get(BASE)
    for n in range(6):
        run_export(filters={"n": n})
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(client.get(BASE).json()["results"]) == 7


def test_export_kinds_describe_each_filter_and_a_bad_choice_names_the_valid_ones(members):
    kinds = {k["name"]: k for k in api_client_for(members["trainer"]).get("/api/v1/export-kinds/").json()}
    balanced = {f["name"]: f for f in kinds["swe.balanced"]["filter_fields"]}
    assert balanced["allocation"] == {"name": "allocation", "type": "choice", "required": False, "default": "equal",
                                      "choices": ["equal", "fill"], "help": balanced["allocation"]["help"]}
    assert balanced["review_status"]["type"] == "list" and balanced["review_status"]["item_type"] == "choice"
    assert balanced["review_status"]["choices"] == ["reviewed", "auto", "error", "unlabeled"]
    assert (balanced["seed"]["type"], balanced["seed"]["default"], balanced["seed"]["min_value"]) == ("integer", 0, 0)
    assert balanced["include_unassigned"]["type"] == "boolean" and balanced["created_after"]["type"] == "datetime"
    # Several values of a set of choices (MultipleChoiceField, a ChoiceField to DRF): a list of choices, as the API
    # wants them; one choice would be refused.
    for kind, name, choices in [("onpanda.sft", "review", ["approved", "rejected", "unreviewed"]),
                                ("onpanda.pairs", "pair_type", ["fork", "outcome"]),
                                ("platform.jobs", "status", ["queued", "running", "succeeded", "failed", "cancelled"])]:
        described = {f["name"]: f for f in kinds[kind]["filter_fields"]}[name]
        assert (described["type"], described["item_type"], sorted(described["choices"])) == ("list", "choice",
                                                                                            sorted(choices))
    # Which kinds can be pinned to an earlier data version, and why the others cannot.
    assert (kinds["atd.scored"]["append_only"], kinds["atd.scored"]["not_append_only"]) == (True, None)
    assert kinds["swe.pooled"]["append_only"] is False and "current taxonomy" in kinds["swe.pooled"]["not_append_only"]
    curator = api_client_for(members["curator"])
    response = curator.post("/api/v1/projects/alpha/exports/", {"kind": "swe.balanced",
                                                                 "filters": {"allocation": "random"}}, format="json")
    assert response.status_code == 400
    assert 'choose one of: equal, fill' in json.dumps(response.json())
