import pytest

from tests.conftest import api_client_for

pytestmark = pytest.mark.django_db
URL = "/api/v1/system/capabilities/"


def test_the_last_report_is_empty_until_a_check_runs(members, reports):
    body = api_client_for(members["trainer"]).get(URL).json()
    assert body == {"ok": None, "checked_at": None, "backend": None, "model": None, "top_k": None,
                    "capabilities": []}
    assert reports == []


def test_a_check_answers_its_report_and_the_next_read_is_the_same(members, reports):
    client = api_client_for(members["annotator"])
    checked = client.post(URL)
    assert checked.status_code == 200 and len(reports) == 1
    body = checked.json()
    assert body["ok"] is False and (body["backend"], body["model"], body["top_k"]) == ("vllm", "served-model", 5)
    failing = body["capabilities"][1]
    assert failing["verdict"] == "FAIL" and failing["ok"] is False and failing["feature"] == "--max-logprobs"
    assert failing["seen"] == "top-5 refused: <b>max allowed: 2</b>" and "--max-logprobs 5" in failing["fix"]
    assert body["capabilities"][0]["fix"] is None
    assert client.get(URL).json() == body and len(reports) == 1


def test_a_read_only_token_reads_the_report_but_cannot_run_a_check(members, reports):
    client = api_client_for(members["admin"], read_only=True)
    assert client.get(URL).status_code == 200
    assert client.post(URL).status_code == 403 and reports == []


def test_anonymous_gets_401(client, reports):
    assert client.get(URL).status_code == 401 and client.post(URL).status_code == 401 and reports == []
