"""onpanda.sft: the accepted sessions as chat messages, and its filters."""

import pytest

from annotate.models import Review, ReviewDecision

from ...doubles import EOS
from .. import agentic
from ..trees import PROMPT
from .rows import TOOL_TEMPLATE, load_shards, tools_of, trained

pytestmark = pytest.mark.django_db


def test_sft_rows(run_export, trees, chars):
    export, rows = run_export("onpanda.sft")
    session = trees["accepted"]
    node = session.current_node
    assert len(rows) == 1 == export.rows_total
    row = rows[0]
    assert row["id"] == session.pk and row["item_id"] == session.item_id
    assert trained(row["messages"]) == PROMPT + [{"role": "assistant", "content": "The dog sat."}]
    # TRL's prompt-completion form of the same conversation: loss falls on the completion only.
    assert trained(row["prompt"]) == PROMPT and trained(row["completion"]) == [{"role": "assistant",
                                                                              "content": "The dog sat."}]
    assert row["tools"] is None
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


ANSWER = {"role": "assistant", "content": "Yes, it rains."}


def test_an_agentic_prompt_is_written_in_the_training_shape_with_its_tools(run_export, agentic_session):
    export, rows = run_export("onpanda.sft")
    assert export.manifest["kind_version"] == 4 and [row["id"] for row in rows] == [agentic_session.pk]
    # The tool-call turn keeps its tool calls (its content is empty), and the tool result names its call.
    assert trained(rows[0]["messages"]) == agentic.TRAINING_MESSAGES + [ANSWER]
    assert trained(rows[0]["prompt"]) == agentic.TRAINING_MESSAGES and trained(rows[0]["completion"]) == [ANSWER]
    assert tools_of(rows[0]["tools"]) == agentic.STORED_TOOLS


@pytest.mark.model
def test_an_exported_row_goes_into_the_embedded_tokenizers_chat_template(run_export, agentic_session, local_backend,
                                                                         export_storage_in_tmp):
    export, _ = run_export("onpanda.sft")
    row = load_shards(export_storage_in_tmp, export)[0]  # as a trainer loads it: no conversion code
    tokenizer = local_backend.tokenizer
    # The one-character backend has no tokenizer to name: the identity is null, and the manifest says why.
    assert (row["template_model"], row["tokenizer_sha256"], row["template_sha256"]) == (None, None, None)
    named = export.manifest["tokenizer"]
    assert (named["model_id"], named["note"]) == ("char-model", "no tokenizer here: the token columns are null")
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    # The embedded model's template renders the tools, the reasoning and the call, as its response template does.
    assert text.endswith("<|im_start|>assistant\nYes, it rains.<|im_end|>\n") and "Is it raining in Paris?" in text
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert ('<|im_start|>assistant\n<think>\nI should look the weather up.\n</think>\n\n<tool_call>\n{"name": '
            '"get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n') in text
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], chat_template=TOOL_TEMPLATE,
                                         tokenize=False)
    offered = text.partition("[system]")[0]  # the tools, before the first message (JSONB may reorder their keys)
    assert offered.startswith("[tool get_weather {") and '"required": ["city"]' in offered
    assert '[assistant][think]I should look the weather up.[/think][call get_weather {"city": "Paris"}]' in text
    assert '[tool]{"rain": true, "celsius": 12}[result of call_7][assistant]Yes, it rains.' in text
