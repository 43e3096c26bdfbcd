"""onpanda.pairs: fork and outcome pairs of a hand-made tree, and its filters."""

import pytest

from ..trees import PROMPT

pytestmark = pytest.mark.django_db


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
