"""onpanda.token_supervision: one row per fork pair, with the chunks that get loss (supervision.py)."""

from collections.abc import Iterator

import pyarrow as pa

from dataplatform.conversations.training import MESSAGES, TOOLS, record_batch
from dataplatform.exports.registry import ExportKind, ExportQuery, register
from dataplatform.inference import Backend

from .. import services
from ..supervision import NothingToSupervise
from ..supervision import token_supervision as compute_token_supervision
from .pairs import pairs
from .sessions import SessionFilters, data_version

CHUNKS = pa.list_(pa.struct([("token_ids", pa.list_(pa.int64())), ("text", pa.string()), ("ignore_loss", pa.bool_())]))

TOKEN_SUPERVISION_SCHEMA = pa.schema([
    ("id", pa.string()),  # as in onpanda.pairs
    ("item_id", pa.int64()),
    ("session_id", pa.int64()),
    ("chosen_node_key", pa.int64()),
    ("rejected_node_key", pa.int64()),
    ("annotator", pa.string()),
    ("model_id", pa.string()),
    ("prompt", MESSAGES),
    ("tools", TOOLS),
    # The model's chat template applied to the prompt and its tools, generation prompt added.
    ("prompt_token_ids", pa.list_(pa.int64())),
    ("fork_token_idx", pa.int64()),
    # The response template's channel at the fork (reasoning, content, tool_name, tool_arguments, marker), in
    # the chosen response (or the rejected one's, when the chosen ends there).
    ("fork_channel", pa.string()),
    ("chosen_token_id", pa.int64()),  # null: the chosen response ends at the fork (its stop is chosen)
    ("rejected_token_id", pa.int64()),  # null: the rejected response ended at the fork
    ("chosen_ends_at_fork", pa.bool_()),
    ("rejected_ends_at_fork", pa.bool_()),
    ("chosen_text", pa.string()),  # the chosen patch's text
    ("rejected_text", pa.string()),
    # [pre, patch, post] (just [pre, patch] when that side ends at the fork); their token ids concatenate to the
    # response ids without the model's stop token.
    ("chosen_chunks", CHUNKS),
    ("rejected_chunks", CHUNKS),
    ("rejected_loss", pa.bool_()),  # the rejected patch is one token (or the stop), so it gets negative loss
])


def token_supervision_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    backend: Backend = services.backend_for(query.project)
    for page in pairs(query, fork=True, outcome=False):
        rows = []
        for pair in page:
            try:
                supervision = compute_token_supervision(pair.rejected.ids, pair.chosen.ids, backend)
            except NothingToSupervise:  # cannot happen for pairs(), which drops identical responses; be safe
                continue
            supervision.pop("chosen_patch")
            supervision.pop("rejected_patch")
            prompt, tools = pair.prompt_cells()
            rows.append({
                "id": pair.id, "item_id": pair.item_id, "session_id": pair.chosen.session_id,
                "chosen_node_key": pair.chosen.node.key, "rejected_node_key": pair.rejected.node.key,
                "annotator": pair.chosen.annotator, "model_id": pair.chosen.node.model_id,
                "prompt": prompt, "tools": tools, "prompt_token_ids": pair.chosen.node.prompt_ids,
                "fork_channel": fork_channel(pair, supervision["fork_token_idx"]), **supervision,
            })
        if rows:
            yield record_batch(rows, TOKEN_SUPERVISION_SCHEMA)


def fork_channel(pair, fork: int) -> str | None:
    for node in (pair.chosen.node, pair.rejected.node):
        if fork < len(node.channels):
            return node.channels[fork]
    return None


register(ExportKind(
    name="onpanda.token_supervision",
    # 2: the prompt carries reasoning_content, tool_calls and tool results; the tools column. 3: the fork's
    # channel; forks inside reasoning and tool-call arguments; the prompt is the turn's whole conversation.
    version=3,
    schema=TOKEN_SUPERVISION_SCHEMA,
    label="onPanda token-level supervision",
    description="One row per fork pair: the first differing token, and chosen/rejected chunks [pre, patch, post] "
                "where only the patch (the smallest span around the fork that survives decode->encode) gets loss; "
                "the rejected patch gets loss only when it is one token. Computed on the stored token ids.",
    rows=token_supervision_rows,
    data_version=data_version,
    filters=SessionFilters,
    dedup_ignore=("id", "item_id", "session_id", "chosen_node_key", "rejected_node_key", "annotator"),
))
