"""onpanda.sft: one row per accepted session, the prompt and the accepted response as chat messages, in TRL's
conversational prompt-completion format (`prompt`, `completion`, and the prompt's `tools`), which its SFT
trainer trains with loss on the completion only; `messages` (the two joined, the language-modeling format)
beside them for trainers that read that."""

from collections.abc import Iterator

import pyarrow as pa
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.conversations.token_masks import (
    IDENTITY_COLUMNS,
    IDENTITY_MEANINGS,
    identity_columns,
    note_identity,
    template_identity,
)
from dataplatform.conversations.training import MESSAGES, TOOLS, TOOLS_MEANINGS
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.inference import backend_for

from .. import services
from ..models import Event, EventKind, Review, ReviewDecision, Session, SessionStatus
from ..supervision import strip_stop_token
from .sessions import (
    MODEL_MEANING,
    SESSION_MEANINGS,
    Bound,
    SessionFilters,
    answer,
    data_version,
    finished_sessions,
    prompt_cells,
)

TIMESTAMP = pa.timestamp("us", tz="UTC")
UNREVIEWED = "unreviewed"


class SftFilters(SessionFilters):
    review = serializers.MultipleChoiceField(
        choices=[*ReviewDecision.choices, (UNREVIEWED, _("Not reviewed yet"))], required=False,
        help_text=_("the session's latest review"))


SFT_SCHEMA = pa.schema([
    ("id", pa.int64()),  # the session
    ("item_id", pa.int64()),
    ("external_id", pa.string()),
    # The conversation the accepted response answers (earlier rounds, reasoning, tool calls and results too)
    # plus the response, reasoning and tool calls included.
    ("messages", MESSAGES),
    ("prompt", MESSAGES),  # the conversation the response answers: `messages` without the response
    ("completion", MESSAGES),  # the accepted response: one assistant message (reasoning and tool calls included)
    ("tools", TOOLS),
    ("response_token_ids", pa.list_(pa.int64())),  # exactly as generated, with the model's stop token if it stopped
    ("origins", pa.list_(pa.string())),  # per token: model / candidate / typed
    ("candidate_ranks", pa.list_(pa.int64())),  # per token: rank in the top-k when picked, else null
    ("finish_reason", pa.string()),
    ("model_id", pa.string()),
    ("annotator", pa.string()),
    ("accepted_at", TIMESTAMP),
    ("review", pa.string()),  # the latest review's decision, null if not reviewed
    *IDENTITY_COLUMNS,  # the tokenizer and chat template of response_token_ids
])
SFT_MEANINGS = {
    **SESSION_MEANINGS,
    "messages": "The prompt followed by the accepted response: the whole conversation, with earlier rounds, "
                "reasoning, tool calls and tool results.",
    "prompt": "The conversation the accepted response answers: messages without the response.",
    "completion": "The accepted response: one assistant message, its reasoning and tool calls included.",
    **TOOLS_MEANINGS,
    "response_token_ids": "The accepted response's token ids exactly as generated, ending with the model's stop "
                          "token if the model stopped.",
    "origins": "Per token of response_token_ids: model (generated), candidate (picked from the model's top-k), "
               "typed (by the annotator) or template (written by the response template).",
    "candidate_ranks": "Per token of response_token_ids: its 1-based rank in the model's top-k when an annotator "
                       "picked it as a candidate, else null.",
    "finish_reason": "How the response ended: stop (the model's stop token, or a stop the annotator chose) or "
                     "length (it reached its token budget).",
    "model_id": MODEL_MEANING,
    "accepted_at": "When the annotator accepted the session (UTC).",
    "review": "The latest review's decision, approved or rejected; null when the session is not reviewed.",
    **IDENTITY_MEANINGS,
}


def _latest_review(query: ExportQuery, session) -> Subquery:
    """The session's latest review within the export's data version: read at export time (a review comes later)."""
    bound = Bound.parse(query.data_version)
    latest = Review.objects.filter(session=session, id__lte=bound.reviews).order_by("-id")
    return Subquery(latest.values("decision")[:1])


def _sft_sessions(query: ExportQuery) -> QuerySet[Session]:
    sessions = finished_sessions(query, statuses=[SessionStatus.ACCEPTED])
    wanted = set(query.filters.get("review") or [])
    if wanted:
        condition = Q(review__in=wanted - {UNREVIEWED})
        if UNREVIEWED in wanted:
            condition |= Q(review__isnull=True)
        sessions = sessions.annotate(review=_latest_review(query, OuterRef("pk"))).filter(condition)
    return sessions


FIELDS = ("id", "item_id", "item__external_id", "current_node__context", "current_node__tools", "current_node__message",
          "current_node__token_ids", "current_node__origins", "current_node__candidate_ranks",
          "current_node__finish_reason", "current_node__locked_until", "current_node__model_id", "annotator__username",
          "accepted_at")


def derive(project, session_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """The row of each accepted session but its review (stored.py keeps it; the review is read at export time)."""
    backend = backend_for(project, model=services.config_for(project).model_name)
    identity = template_identity(backend)
    accepted_at = Event.objects.filter(session=OuterRef("pk"), kind=EventKind.ACCEPT).order_by("id")
    sessions = (Session.objects.filter(id__in=session_ids).order_by("id")
                .annotate(accepted_at=Subquery(accepted_at.values("created_at")[:1])))
    for values in sessions.values(*FIELDS):
        ids = values["current_node__token_ids"]
        text = backend.detokenize(strip_stop_token(
            ids, origins=values["current_node__origins"], finish_reason=values["current_node__finish_reason"],
            locked_until=values["current_node__locked_until"]))
        prompt, tools = prompt_cells(values["current_node__context"], values["current_node__tools"])
        completion = answer(values["current_node__message"], text)
        yield values["id"], {
            "id": values["id"], "item_id": values["item_id"], "external_id": values["item__external_id"],
            "messages": prompt + completion, "prompt": prompt, "completion": completion, "tools": tools,
            "response_token_ids": ids, "origins": values["current_node__origins"],
            "candidate_ranks": values["current_node__candidate_ranks"],
            "finish_reason": values["current_node__finish_reason"], "model_id": values["current_node__model_id"],
            "annotator": values["annotator__username"], "accepted_at": values["accepted_at"],
            # Another model's response ids belong to another tokenizer: they name none.
            **identity_columns(identity if values["current_node__model_id"] == backend.model_id else None),
        }


def note_tokenizer(query: ExportQuery) -> None:
    """The manifest names the tokenizer of the rows' ids (the one the derivation named them with)."""
    note_identity(query.notes, backend_for(query.project, model=services.config_for(query.project).model_name))


register(ExportKind(
    name="onpanda.sft",
    trl_format="prompt_completion",
    # 2: messages carry reasoning_content, tool_calls and tool results; the tools column. 3: the response's own
    # reasoning and tool calls, and the earlier rounds of a multi-turn session. 4: prompt and completion (TRL's
    # prompt-completion format, loss on the completion only); the tokenizer identity.
    version=4,
    schema=SFT_SCHEMA,
    group="prompt",  # every session, pair and patch of one item stay in one split
    group_by=("item_id",),
    label=_("onPanda SFT"),
    description="One row per accepted session: the prompt (with its tools) and the accepted response as chat "
                "messages (prompt and completion, and joined as messages), with the response's token ids, per-token origins (model / candidate / typed) and "
                "candidate ranks.",
    # Derived once per accepted session (which never changes), when it is accepted; the review is read live.
    stored=StoredRows(model=Session, sources=_sft_sessions, derive=derive, live_columns=("review",),
                      live=lambda query, session: {"review": _latest_review(query, session)}, notes=note_tokenizer),
    data_version=data_version,
    append_only=True,  # sessions end once (accepted or rejected); events and reviews are only added
    count=lambda query: _sft_sessions(query).count(),
    filters=SftFilters,
    dedup_ignore=("id", "item_id", "annotator", "accepted_at", "review"),
    field_meanings=SFT_MEANINGS,
))
