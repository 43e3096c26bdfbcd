"""onpanda.panda_json: each finished session as a document onPanda's parser reads."""

import json

import pytest

pytestmark = pytest.mark.django_db


def test_panda_json_rows(run_export, trees):
    from onpanda.parser import PandaTree

    _, rows = run_export("onpanda.panda_json")
    by_status = {row["status"]: row for row in rows}
    assert sorted(by_status) == ["accepted", "rejected"]  # the open session is not exported
    document = json.loads(by_status["accepted"]["panda_json"])
    tree = PandaTree(document)
    assert tree.dense_keys == [3] and tree.fork_pairs == [(1, 3), (2, 3)]
    assert by_status["accepted"]["id"] == trees["accepted"].pk
    assert [row["status"] for row in run_export("onpanda.panda_json", filters={"status": ["rejected"]})[1]] == [
        "rejected"]
