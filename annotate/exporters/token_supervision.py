"""onpanda.token_supervision: one row per fork pair, with the chunks that get loss (supervision.py).

Beside the chunks, the chosen side in the forms TRL's SFT trainer reads as they are: pre-tokenized
(`input_ids` = the prompt's ids, then the chosen response's, with `completion_mask` and `labels` putting the
loss on the chosen patch only: the on-policy tokens before and after it are context), and conversational
(`prompt`, `completion`). A chosen response that ends at the fork is the model's stop there: its ids end with
the end-of-turn token, and that token is the patch. The rejected patch's negative loss has no SFT form; it
stays in `rejected_chunks` and `rejected_loss`."""

from collections.abc import Iterator

import pyarrow as pa
from django.utils.translation import gettext_lazy as _

from dataplatform.conversations.token_masks import (
    IDENTITY_COLUMNS,
    IDENTITY_MEANINGS,
    TOKEN_COLUMNS,
    TOKEN_MEANINGS,
    identity_columns,
    note_identity,
    renders,
    template_identity,
    token_columns,
)
from dataplatform.conversations.training import MESSAGES, TOOLS
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.inference import Backend, backend_for

from .. import services
from ..models import Session, SessionStatus
from ..prompts import stored_prompt
from ..supervision import NothingToSupervise
from ..supervision import token_supervision as compute_token_supervision
from .pairs import PAIR_MEANINGS, pairs_of
from .sessions import (
    MODEL_MEANING,
    SESSION_MEANINGS,
    TREE_PAGE,
    SessionFilters,
    answer,
    data_version,
    finished_sessions,
)

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
TOKEN_SUPERVISION_MEANINGS = {
    **PAIR_MEANINGS,
    "session_id": "The accepted session both responses of the fork pair belong to.",
    "annotator": SESSION_MEANINGS["annotator"],
    "model_id": MODEL_MEANING,
    "prompt_token_ids": "The model's chat template applied to prompt and tools, generation prompt added: the ids "
                        "both responses continue.",
    "fork_token_idx": "The 0-based index in the response ids (stop token excluded) of the first token where chosen "
                      "and rejected differ.",
    "fork_channel": "What the response template was writing at the fork: reasoning, content, tool_name, "
                    "tool_arguments or marker (the chosen response's, else the rejected one's); null when neither "
                    "records one there.",
    "chosen_token_id": "The chosen response's token at the fork; null when the chosen response ends there (its stop "
                       "is what was chosen).",
    "rejected_token_id": "The rejected response's token at the fork; null when the rejected response ended there.",
    "chosen_ends_at_fork": "The chosen response ends at the fork: stopping there is the correction.",
    "rejected_ends_at_fork": "The rejected response ended at the fork, where the chosen one goes on.",
    "chosen_text": "Text of the chosen patch: the smallest span of tokens around the fork that survives "
                   "decode -> encode; empty when the chosen side is the stop.",
    "rejected_text": "Text of the rejected patch (as chosen_text); empty when the rejected side is the stop.",
    "chosen_chunks": "The chosen response as chunks [pre, patch, post] ([pre, patch] when it ends at the fork), each "
                     "token_ids, text and ignore_loss (false on the patch only); their ids concatenate to the "
                     "response ids without the stop token.",
    "rejected_chunks": "The rejected response as chunks, in the form of chosen_chunks; its patch has ignore_loss "
                       "false only when rejected_loss is true.",
    "rejected_loss": "The rejected patch is one token (or the stop), so it gets negative loss; false: it gets none.",
    "completion": "The chosen response as one assistant message: with prompt, TRL's prompt-completion form.",
    **TOKEN_MEANINGS,
    "input_ids": "prompt_token_ids, then the chosen response's ids (ending with the end-of-turn token when the "
                 "chosen response ends at the fork).",
    "completion_mask": "Per token of input_ids: 1 on the chosen patch only, 0 on the prompt and on the response's "
                       "tokens before and after the patch.",
    **IDENTITY_MEANINGS,
}


def derive(project, session_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """The rows of each accepted session: its fork pairs (stored.py keeps them; a finished session never changes)."""
    backend: Backend = backend_for(project, model=services.config_for(project).model_name)
    named = NamedTemplate(template_identity(backend), backend)
    sessions = Session.objects.filter(id__in=session_ids, status=SessionStatus.ACCEPTED)
    for pair in pairs_of(sessions, fork=True, outcome=False):
        try:
            supervision = compute_token_supervision(pair.rejected.ids, pair.chosen.ids, backend)
        except NothingToSupervise:  # cannot happen for pairs_of(), which drops identical responses; be safe
            continue
        supervision.pop("chosen_patch")
        supervision.pop("rejected_patch")
        prompt, tools = pair.prompt_cells()
        yield pair.chosen.session_id, {
            "id": pair.id, "item_id": pair.item_id, "session_id": pair.chosen.session_id,
            "chosen_node_key": pair.chosen.node.key, "rejected_node_key": pair.rejected.node.key,
            "annotator": pair.chosen.annotator, "model_id": pair.chosen.node.model_id,
            "prompt": prompt, "tools": tools, "prompt_token_ids": pair.chosen.node.prompt_ids,
            "fork_channel": fork_channel(pair, supervision["fork_token_idx"]), **supervision,
            "completion": answer(pair.chosen.node.message, backend.detokenize(pair.chosen.ids)),
            **token_columns(*chosen_tokens(pair.chosen.node.prompt_ids, supervision, backend)),
            **named.columns(pair.chosen.node),
        }


def accepted_sessions(query: ExportQuery):
    return finished_sessions(query, statuses=[SessionStatus.ACCEPTED])


def note_tokenizer(query: ExportQuery) -> None:
    """The manifest names the tokenizer of the rows' ids (the one the derivation named them with)."""
    note_identity(query.notes, backend_for(query.project, model=services.config_for(query.project).model_name))


class NamedTemplate:
    """The identity columns of a row, naming the chat template only when it renders the row's prompt ids: they
    were rendered by the response template the project used when the node was made (an older version of it, or
    another family, may have rendered others), and a model other than the backend's has another tokenizer."""

    def __init__(self, identity: dict | None, backend: Backend):
        self.identity, self.backend = identity, backend
        self.rendered: dict[int, bool] = {}  # node pk -> its prompt ids are what the chat template renders
        self.unnamed = 0

    def columns(self, node) -> dict:
        if self.identity is None:
            return identity_columns(None)
        if node.model_id != self.identity["model_id"]:
            self.unnamed += 1
            return identity_columns(None)
        if node.pk not in self.rendered:
            prompt = stored_prompt(node.context, node.tools)
            self.rendered[node.pk] = renders(self.backend.tokenizer, prompt.for_training(), list(prompt.tools),
                                             node.prompt_ids)
        self.unnamed += not self.rendered[node.pk]
        return identity_columns(self.identity, rendered=self.rendered[node.pk])


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
    # 5: the token-id lists stored as binary (same columns and values).
    version=5,
    schema=TOKEN_SUPERVISION_SCHEMA,
    group="prompt",  # every session, pair and patch of one item stay in one split
    group_by=("item_id",),
    label=_("onPanda token-level supervision"),
    description="One row per fork pair: the first differing token, and chosen/rejected chunks [pre, patch, post] "
                "where only the patch (the smallest span around the fork that survives decode->encode) gets loss; "
                "the rejected patch gets loss only when it is one token. Computed on the stored token ids. The chosen side is "
                "also pre-tokenized (input_ids, completion_mask, labels: loss on the patch only) and conversational "
                "(prompt, completion), for TRL's SFT trainer as is.",
    # Fork pairs are made within one accepted session, which never changes: derived once, when it is accepted.
    stored=StoredRows(model=Session, sources=accepted_sessions, derive=derive, notes=note_tokenizer, page=TREE_PAGE,
                      binary_lists=("prompt_token_ids", "input_ids", "completion_mask", "labels")),
    data_version=data_version,
    append_only=True,  # sessions end once (accepted or rejected); events and reviews are only added
    filters=SessionFilters,
    dedup_ignore=("id", "item_id", "session_id", "chosen_node_key", "rejected_node_key", "annotator"),
    field_meanings=TOKEN_SUPERVISION_MEANINGS,
))
