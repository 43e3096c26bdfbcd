"""onpanda.sft: the accepted sessions as chat messages, and its filters."""

import pytest

from annotate.models import Review, ReviewDecision

from ..test_supervision import EOS
from ..trees import PROMPT

pytestmark = pytest.mark.django_db


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
