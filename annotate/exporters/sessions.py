"""What every onPanda record kind shares: the data version, the session filters, the finished sessions, and the
conversation cells of a row (`dataplatform.conversations.training`: the shape TRL and chat templates read)."""

from dataclasses import dataclass

from django.db.models import Exists, Max, OuterRef, QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.conversations.training import messages_cell, tools_cell
from dataplatform.exports.registry import ExportFilters, ExportQuery

from ..models import Event, EventKind, Review, Session, SessionStatus
from ..nodes import response_message_of
from ..prompts import stored_prompt

# Tree-shaped kinds load a page of sessions or items with all their nodes; keep pages small.
TREE_PAGE = 200
FINISHED = (SessionStatus.ACCEPTED, SessionStatus.REJECTED)


# What the session columns of the kinds mean (their dataset card's Fields table).
SESSION_MEANINGS = {
    "id": "The session's id: one annotator's work on one item.",
    "item_id": "The item's id: the prompt the session answers.",
    "external_id": "The item's id in the file it was imported from; empty when it had none.",
    "annotator": "Username of the annotator whose session it is.",
}
MODEL_MEANING = "The model that generated the response, as its node records it."


def tree_page(query: ExportQuery) -> int:
    return max(1, min(TREE_PAGE, query.batch_size))


@dataclass(frozen=True)
class Bound:
    """The highest session, event and review ids an export reads."""

    sessions: int
    events: int
    reviews: int

    @classmethod
    def parse(cls, data_version: str) -> "Bound":
        parts = [int(part) for part in (data_version or "0:0:0").split(":")]
        return cls(*(parts + [0, 0, 0])[:3])


def data_version(project: Project) -> str:
    def top(queryset: QuerySet) -> int:
        return queryset.aggregate(top=Max("id"))["top"] or 0

    return ":".join(str(n) for n in (
        top(Session.objects.filter(project=project)),
        top(Event.objects.filter(session__item__project=project)),
        top(Review.objects.filter(session__item__project=project)),
    ))


class SessionFilters(ExportFilters):
    """Filters on the sessions an export reads; `created_*` bound when the session was opened."""

    annotator = serializers.ListField(child=serializers.CharField(), required=False,
                                      help_text=_("usernames; only their sessions"))


def finished_sessions(query: ExportQuery, statuses=FINISHED) -> QuerySet[Session]:
    """The project's sessions finished (with `statuses`) within the export's data version, filtered."""
    bound = Bound.parse(query.data_version)
    verdict = Event.objects.filter(session=OuterRef("pk"), kind__in=[EventKind.ACCEPT, EventKind.REJECT],
                                   id__lte=bound.events)
    sessions = Session.objects.filter(item__project=query.project, id__lte=bound.sessions,
                                      status__in=list(statuses)).filter(Exists(verdict))
    filters = query.filters
    if filters.get("status"):
        sessions = sessions.filter(status__in=list(filters["status"]))
    if filters.get("annotator"):
        sessions = sessions.filter(annotator__username__in=list(filters["annotator"]))
    if filters.get("created_after"):
        sessions = sessions.filter(created_at__gte=filters["created_after"])
    if filters.get("created_before"):
        sessions = sessions.filter(created_at__lt=filters["created_before"])
    return sessions


def prompt_cells(messages: list[dict], tools: list[dict]) -> tuple[list[dict], list[str] | None]:
    """An item's stored prompt as row cells: its messages in the training shape (reasoning, tool calls and tool
    results of earlier turns included), and its tools."""
    prompt = stored_prompt(messages, tools)
    return messages_cell(prompt.for_training()), tools_cell(prompt.tools)


def answer(message: dict, text: str) -> list[dict]:
    """The assistant turn a node holds, as a cell: its parsed message (reasoning, content, tool calls) in the
    training shape; a node from before messages were parsed gives its text as the content."""
    if not message:
        return [{"role": "assistant", "content": text}]
    return messages_cell([response_message_of(message).for_training()])
