"""The onPanda record kinds through the export engine, on hand-made trees (a one-token-per-character backend)."""

import json

import pytest

from annotate import exporters, services
from annotate.models import Item, Review, ReviewDecision
from dataplatform.exports.registry import ExportQuery

from ..exporting import export_rows
from .conftest import fake_rollout
from .test_supervision import EOS, CharBackend

pytestmark = pytest.mark.django_db

PROMPT = [{"role": "user", "content": "Where did the cat sit?"}]


@pytest.fixture(autouse=True)
def _exports_in_tmp(export_storage_in_tmp):
    """Every export test writes under its own temporary DATA_DIR."""


@pytest.fixture
def chars(monkeypatch):
    """The one-token-per-character backend everywhere: generation continues with " sat." then stops."""
    backend = CharBackend(script=" sat.")
    monkeypatch.setattr(services, "backend_for", lambda project: backend)
    return backend


@pytest.fixture
def run_export(project, members, export_storage_in_tmp):
    def run(kind: str, **options):
        return export_rows(project, members["curator"], export_storage_in_tmp, kind, **options)

    return run


def make_item(project, backend, text="The cat sat.", number=0):
    """An item whose rollout is `text`, ending with the model's stop token as a real backend's does."""
    return Item.objects.create(project=project, messages=PROMPT, source_sha256=f"{number:064d}",
                               prompt_ids=backend.chat_prompt_ids(PROMPT),
                               rollout=fake_rollout(backend.tokenize(text) + [EOS]))


def build_trees(project, members, backend) -> dict:
    """Item 1 answered by two annotators, plus an open session on item 2 (services must use `backend`).

    annotator (accepted): 1 "The cat sat." (the rollout), 2 candidate at 4 then " sat." (undone),
        3 typed "dog" at 4 then " sat.", accepted: "The dog sat.".
    curator (rejected): 1 the rollout, 2 a forced stop after "The".
    """
    config = services.config_for(project)
    config.overlap = 2
    config.save()
    make_item(project, backend, number=1)
    make_item(project, backend, number=2)
    annotator, curator = members["annotator"], members["curator"]

    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    root = session.current_node
    picked = services.correct(session=session, version=0, node_id=root.pk, position=4, token_id=ord("c") + 1000,
                              actor=annotator)
    list(services.continue_node(node=picked))
    services.undo(session=session, version=1, actor=annotator)
    typed = services.correct(session=session, version=2, node_id=root.pk, position=4, text="dog", actor=annotator)
    list(services.continue_node(node=typed))
    accepted = services.finish(session=session, version=3, actor=annotator, accept=True)

    other = services.open_session(claim=services.claim_next(project=project, annotator=curator))
    services.correct(session=other, version=0, node_id=other.current_node.pk, position=3, stop=True, actor=curator)
    rejected = services.finish(session=other, version=1, actor=curator, accept=False)

    still_open = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    assert still_open.item_id != accepted.item_id
    return {"accepted": accepted, "rejected": rejected, "open": still_open}


@pytest.fixture
def trees(project, members, chars):
    return build_trees(project, members, chars)


def test_sft_rows(run_export, trees, chars):
    export, rows = run_export("onpanda.sft")
    session = trees["accepted"]
    node = session.current_node
    assert len(rows) == 1 == export.rows_total
    row = rows[0]
    assert row["id"] == session.pk and row["item_id"] == session.item_id
    assert row["messages"] == PROMPT + [{"role": "assistant", "content": "The dog sat."}]
    # The ids are as generated, the stop token included; the text is made without it.
    assert row["response_token_ids"] == node.token_ids == chars.tokenize("The dog sat.") + [EOS]
    assert row["origins"] == ["model"] * 4 + ["typed"] * 3 + ["model"] * 6
    assert row["candidate_ranks"] == [None] * 13
    assert row["annotator"] == "annotator" and row["model_id"] == "test-model" and row["finish_reason"] == "stop"
    assert row["accepted_at"] is not None and row["review"] is None


def test_sft_filters_by_review_and_annotator(run_export, trees, members):
    session = trees["accepted"]
    Review.objects.create(session=session, reviewer=members["curator"], decision=ReviewDecision.REJECTED,
                          comment="typo")
    Review.objects.create(session=session, reviewer=members["curator"], decision=ReviewDecision.APPROVED)
    _, rows = run_export("onpanda.sft", filters={"review": ["approved"]})
    assert [row["review"] for row in rows] == ["approved"]  # the latest review is the current one
    assert run_export("onpanda.sft", filters={"review": ["unreviewed", "rejected"]})[1] == []
    assert run_export("onpanda.sft", filters={"annotator": ["curator"]})[1] == []
    assert len(run_export("onpanda.sft", filters={"annotator": ["annotator"]})[1]) == 1
    assert run_export("onpanda.sft", filters={"created_after": "2999-01-01T00:00:00Z"})[1] == []
    assert len(run_export("onpanda.sft", filters={"created_before": "2999-01-01T00:00:00Z"})[1]) == 1


def test_pairs_of_a_hand_made_tree(run_export, trees):
    export, rows = run_export("onpanda.pairs")
    accepted, rejected = trees["accepted"], trees["rejected"]
    by_id = {row["id"]: row for row in rows}
    a, r = accepted.pk, rejected.pk
    assert sorted(by_id) == sorted([f"{a}.1-{a}.3", f"{a}.2-{a}.3", f"{r}.1-{a}.3", f"{r}.2-{a}.3"])
    fork = by_id[f"{a}.1-{a}.3"]
    assert fork["pair_type"] == "fork" and fork["fork_token_idx"] == 4
    assert fork["prompt"] == PROMPT
    assert fork["chosen"] == [{"role": "assistant", "content": "The dog sat."}]
    assert fork["rejected"] == [{"role": "assistant", "content": "The cat sat."}]
    assert by_id[f"{a}.2-{a}.3"]["rejected"][0]["content"] == f"The {chr(ord('c') + 1000)} sat."  # the candidate
    outcome = by_id[f"{r}.2-{a}.3"]
    assert outcome["pair_type"] == "outcome" and outcome["fork_token_idx"] is None
    assert outcome["rejected"][0]["content"] == "The" and outcome["rejected_annotator"] == "curator"
    assert outcome["chosen_annotator"] == "annotator"


def test_pairs_filters(run_export, trees):
    assert {row["pair_type"] for row in run_export("onpanda.pairs", filters={"pair_type": ["fork"]})[1]} == {"fork"}
    assert len(run_export("onpanda.pairs", filters={"pair_type": ["outcome"]})[1]) == 2
    # Only the annotator's sessions: the rejected session is left out, and its outcome pairs with it.
    assert len(run_export("onpanda.pairs", filters={"annotator": ["annotator"]})[1]) == 2


def test_token_supervision_rows(run_export, trees, chars):
    export, rows = run_export("onpanda.token_supervision")
    session = trees["accepted"]
    assert sorted(row["rejected_node_key"] for row in rows) == [1, 2] and export.rows_total == 2
    row = next(row for row in rows if row["rejected_node_key"] == 1)
    assert row["session_id"] == session.pk and row["chosen_node_key"] == 3 and row["annotator"] == "annotator"
    assert row["prompt"] == PROMPT and row["prompt_token_ids"] == chars.chat_prompt_ids(PROMPT)
    assert row["fork_token_idx"] == 4
    assert row["chosen_token_id"] == ord("d") and row["rejected_token_id"] == ord("c")
    assert not row["chosen_ends_at_fork"] and not row["rejected_ends_at_fork"]
    assert [c["text"] for c in row["chosen_chunks"]] == ["The ", "d", "og sat."]
    assert [c["ignore_loss"] for c in row["chosen_chunks"]] == [True, False, True]
    assert [c["text"] for c in row["rejected_chunks"]] == ["The ", "c", "at sat."]
    assert row["rejected_loss"] is True and row["chosen_text"] == "d" and row["rejected_text"] == "c"
    # The chunks' ids make up the response without the model's stop token.
    chosen_ids = [i for chunk in row["chosen_chunks"] for i in chunk["token_ids"]]
    assert chosen_ids == session.current_node.token_ids[:-1]


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


def test_pages_of_one_give_the_same_rows(run_export, trees, settings):
    kinds = ["onpanda.sft", "onpanda.pairs", "onpanda.token_supervision", "onpanda.panda_json"]
    whole = {kind: sorted(json.dumps(row, sort_keys=True, default=str) for row in run_export(kind)[1])
             for kind in kinds}
    settings.EXPORT_BATCH_ROWS = 1
    for kind in kinds:
        rows = run_export(kind)[1]
        assert sorted(json.dumps(row, sort_keys=True, default=str) for row in rows) == whole[kind]


def test_data_version_bounds_what_is_read(project, members, chars):
    make_item(project, chars)
    first = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    services.finish(session=first, version=0, actor=members["annotator"], accept=True)
    config = services.config_for(project)
    config.overlap = 2
    config.save()
    later = services.open_session(claim=services.claim_next(project=project, annotator=members["curator"]))
    version = exporters.data_version(project)
    # Finished after the export read its data version: a rerun of that export must not see it.
    services.finish(session=later, version=0, actor=members["curator"], accept=True)
    query = ExportQuery(project=project, filters={}, data_version=version)
    assert list(exporters.finished_sessions(query).values_list("id", flat=True)) == [first.pk]
    fresh = ExportQuery(project=project, filters={}, data_version=exporters.data_version(project))
    assert exporters.finished_sessions(fresh).count() == 2


def test_queries_do_not_grow_with_the_sessions(project, members, trees, chars):
    """Each page costs the same few queries however many sessions it holds (no query per session or node)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(rows) -> int:
        query = ExportQuery(project=project, filters={}, data_version=exporters.data_version(project))
        with CaptureQueriesContext(connection) as captured:
            list(rows(query))
        return len(captured)

    kinds = (exporters.sft_rows, exporters.pair_rows, exporters.token_supervision_rows, exporters.panda_json_rows)
    before = [queries(rows) for rows in kinds]
    for number in range(3, 6):
        make_item(project, chars, number=number)
    while claim := services.claim_next(project=project, annotator=members["admin"]):
        services.finish(session=services.open_session(claim=claim), version=0, actor=members["admin"], accept=True)
    assert exporters.finished_sessions(
        ExportQuery(project=project, filters={}, data_version=exporters.data_version(project))).count() == 6
    assert [queries(rows) for rows in kinds] == before
