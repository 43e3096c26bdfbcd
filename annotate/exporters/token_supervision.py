"""onpanda.token_supervision: one row per fork pair, with the chunks that get loss (supervision.py).

Beside the chunks, the chosen side in the forms TRL's SFT trainer reads as they are: pre-tokenized
(`input_ids` = the prompt's ids, then the chosen response's, with `completion_mask` and `labels` putting the
loss on the chosen patch only: the on-policy tokens before and after it are context), and conversational
(`prompt`, `completion`). A chosen response that ends at the fork is the model's stop there: its ids end with
the end-of-turn token, and that token is the patch. The rejected patch's negative loss has no SFT form; it
stays in `rejected_chunks` and `rejected_loss`."""

from collections.abc import Iterator

import pyarrow as pa

from dataplatform.conversations.token_masks import (
    IDENTITY_COLUMNS,
    TOKEN_COLUMNS,
    identity_columns,
    note_identity,
    token_columns,
)
from dataplatform.conversations.training import MESSAGES, TOOLS, record_batch
from dataplatform.exports.registry import ExportKind, ExportQuery, register
from dataplatform.inference import Backend

from .. import services
from ..supervision import NothingToSupervise
from ..supervision import token_supervision as compute_token_supervision
from .pairs import pairs
from .sessions import SessionFilters, answer, data_version

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
    ("completion", MESSAGES),  # the chosen response, conversational (TRL's prompt/completion with `prompt`)
    *TOKEN_COLUMNS,  # prompt_token_ids + the chosen response's ids; loss on the chosen patch only
    *IDENTITY_COLUMNS,  # the tokenizer and chat template the ids belong to
])


def token_supervision_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    backend: Backend = services.backend_for(query.project)
    identity = note_identity(query.notes, backend)
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
                "completion": answer(pair.chosen.node.message, backend.detokenize(pair.chosen.ids)),
                **token_columns(*chosen_tokens(pair.chosen.node.prompt_ids, supervision, backend)),
                **identity_columns(identity),
            })
        if rows:
            yield record_batch(rows, TOKEN_SUPERVISION_SCHEMA)


def chosen_tokens(prompt_ids: list[int], supervision: dict, backend: Backend) -> tuple[list[int], list[int]]:
    """(input_ids, completion_mask) of the chosen side: the prompt and the chunks, 1 on the patch."""
    ids, mask = list(prompt_ids), [0] * len(prompt_ids)
    for chunk in supervision["chosen_chunks"]:
        ids += chunk["token_ids"]
        mask += [0 if chunk["ignore_loss"] else 1] * len(chunk["token_ids"])
    if supervision["chosen_ends_at_fork"]:  # the chosen token is the stop
        ids.append(end_of_turn(backend))
        mask.append(1)
    return ids, mask


def end_of_turn(backend: Backend) -> int:
    """The token a response of the backend's model ends with: its tokenizer's end-of-sequence token (which chat
    models set to their end-of-turn), else the lowest of its stop ids."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        return tokenizer.eos_token_id
    return min(backend.eos_token_ids)


def fork_channel(pair, fork: int) -> str | None:
    for node in (pair.chosen.node, pair.rejected.node):
        if fork < len(node.channels):
            return node.channels[fork]
    return None


register(ExportKind(
    name="onpanda.token_supervision",
    trl_format="tokenized",
    # 2: the prompt carries reasoning_content, tool_calls and tool results; the tools column. 3: the fork's
    # channel; forks inside reasoning and tool-call arguments; the prompt is the turn's whole conversation. 4: the
    # chosen side pre-tokenized (input_ids, completion_mask, labels) and as a completion; the tokenizer identity.
    version=4,
    schema=TOKEN_SUPERVISION_SCHEMA,
    label="onPanda token-level supervision",
    description="One row per fork pair: the first differing token, and chosen/rejected chunks [pre, patch, post] "
                "where only the patch (the smallest span around the fork that survives decode->encode) gets loss; "
                "the rejected patch gets loss only when it is one token. Computed on the stored token ids. The chosen side is "
                "also pre-tokenized (input_ids, completion_mask, labels: loss on the patch only) and conversational "
                "(prompt, completion), for TRL's SFT trainer as is.",
    rows=token_supervision_rows,
    data_version=data_version,
    filters=SessionFilters,
    dedup_ignore=("id", "item_id", "session_id", "chosen_node_key", "rejected_node_key", "annotator"),
))
