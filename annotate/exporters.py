"""Record kinds of onPanda sessions: SFT rows, preference pairs, token-level supervision, `.panda.json`.

Only finished sessions are exported (accepted or rejected before the export's data
version was read): an open session is still changing. The data version bounds
sessions, events and reviews by their highest id, so a rerun of an export reads the
same rows even while annotators keep working.

Rows are read a page at a time (keyset pagination): SFT rows straight from one
query per page; the tree-shaped kinds load one page of sessions (or items) with
their nodes, never the whole project. Texts are decoded from the node's token ids
with the project's backend: the ids are the truth, text is derived from them.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from django.db.models import Exists, Max, OuterRef, Prefetch, Q, QuerySet, Subquery
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.exports.registry import ExportFilters, ExportKind, ExportQuery, register
from dataplatform.exports.sources import keyset_values
from dataplatform.inference import Backend

from . import services
from .models import Event, EventKind, Item, Node, NodeStatus, Review, ReviewDecision, Session, SessionStatus
from .panda_json import session_to_panda_json
from .supervision import NothingToSupervise, fork_token_idx, pick_fork_pairs, response_ids, strip_stop_token
from .supervision import token_supervision as compute_token_supervision

MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
CHUNKS = pa.list_(pa.struct([("token_ids", pa.list_(pa.int64())), ("text", pa.string()), ("ignore_loss", pa.bool_())]))
TIMESTAMP = pa.timestamp("us", tz="UTC")
# Tree-shaped kinds load a page of sessions or items with all their nodes; keep pages small.
TREE_PAGE = 200
UNREVIEWED = "unreviewed"
FINISHED = (SessionStatus.ACCEPTED, SessionStatus.REJECTED)
# Node fields the tree-shaped kinds read; `top` (k pairs per token) and `logprobs` are left in the database.
NODE_FIELDS = ("id", "session_id", "parent_id", "key", "token_ids", "origins", "finish_reason", "locked_until",
               "model_id", "status")


def _tree_page(query: ExportQuery) -> int:
    return max(1, min(TREE_PAGE, query.batch_size))


# --- data version and filters -------------------------------------------------------------------------

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
        top(Session.objects.filter(item__project=project)),
        top(Event.objects.filter(session__item__project=project)),
        top(Review.objects.filter(session__item__project=project)),
    ))


class SessionFilters(ExportFilters):
    """Filters on the sessions an export reads; `created_*` bound when the session was opened."""

    annotator = serializers.ListField(child=serializers.CharField(), required=False,
                                      help_text="usernames; only their sessions")


class StatusFilters(SessionFilters):
    status = serializers.MultipleChoiceField(choices=[(s, s) for s in FINISHED], required=False)


class SftFilters(SessionFilters):
    review = serializers.MultipleChoiceField(
        choices=[*ReviewDecision.choices, (UNREVIEWED, "Not reviewed yet")], required=False,
        help_text="the session's latest review")


class PairFilters(SessionFilters):
    pair_type = serializers.MultipleChoiceField(choices=[("fork", "fork"), ("outcome", "outcome")], required=False)


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


def _message(role: str, content: str) -> dict:
    return {"role": role, "content": content}


# --- onpanda.sft ----------------------------------------------------------------------------------------

SFT_SCHEMA = pa.schema([
    ("id", pa.int64()),  # the session
    ("item_id", pa.int64()),
    ("external_id", pa.string()),
    ("messages", MESSAGES),  # the prompt plus the accepted response
    ("response_token_ids", pa.list_(pa.int64())),  # exactly as generated, with the model's stop token if it stopped
    ("origins", pa.list_(pa.string())),  # per token: model / candidate / typed
    ("candidate_ranks", pa.list_(pa.int64())),  # per token: rank in the top-k when picked, else null
    ("finish_reason", pa.string()),
    ("model_id", pa.string()),
    ("annotator", pa.string()),
    ("accepted_at", TIMESTAMP),
    ("review", pa.string()),  # the latest review's decision, null if not reviewed
])


def _sft_sessions(query: ExportQuery) -> QuerySet[Session]:
    bound = Bound.parse(query.data_version)
    latest_review = Review.objects.filter(session=OuterRef("pk"), id__lte=bound.reviews).order_by("-id")
    accepted_at = Event.objects.filter(session=OuterRef("pk"), kind=EventKind.ACCEPT).order_by("id")
    sessions = finished_sessions(query, statuses=[SessionStatus.ACCEPTED]).annotate(
        review=Subquery(latest_review.values("decision")[:1]),
        accepted_at=Subquery(accepted_at.values("created_at")[:1]),
    )
    wanted = set(query.filters.get("review") or [])
    if wanted:
        condition = Q(review__in=wanted - {UNREVIEWED})
        if UNREVIEWED in wanted:
            condition |= Q(review__isnull=True)
        sessions = sessions.filter(condition)
    return sessions


def sft_rows(query: ExportQuery) -> Iterator[list[dict]]:
    backend = services.backend_for(query.project)

    def row(values: dict) -> dict:
        ids = values["current_node__token_ids"]
        text = backend.detokenize(strip_stop_token(
            ids, origins=values["current_node__origins"], finish_reason=values["current_node__finish_reason"],
            locked_until=values["current_node__locked_until"]))
        return {
            "id": values["id"], "item_id": values["item_id"], "external_id": values["item__external_id"],
            "messages": [*values["item__messages"], _message("assistant", text)],
            "response_token_ids": ids, "origins": values["current_node__origins"],
            "candidate_ranks": values["current_node__candidate_ranks"],
            "finish_reason": values["current_node__finish_reason"], "model_id": values["current_node__model_id"],
            "annotator": values["annotator__username"], "accepted_at": values["accepted_at"],
            "review": values["review"],
        }

    fields = ["id", "item_id", "item__external_id", "item__messages", "current_node__token_ids",
              "current_node__origins", "current_node__candidate_ranks", "current_node__finish_reason",
              "current_node__locked_until", "current_node__model_id", "annotator__username", "accepted_at", "review"]
    yield from keyset_values(_sft_sessions(query), fields, batch_size=query.batch_size, transform=row)


register(ExportKind(
    name="onpanda.sft",
    version=1,
    schema=SFT_SCHEMA,
    label="onPanda SFT",
    description="One row per accepted session: the prompt and the accepted response as chat messages, with the "
                "response's token ids, per-token origins (model / candidate / typed) and candidate ranks.",
    rows=sft_rows,
    data_version=data_version,
    count=lambda query: _sft_sessions(query).count(),
    filters=SftFilters,
    dedup_ignore=("id", "item_id", "annotator", "accepted_at", "review"),
))


# --- pairs, shared by onpanda.pairs and onpanda.token_supervision ---------------------------------------------

@dataclass(frozen=True)
class Side:
    session_id: int
    annotator: str
    node: Node
    ids: list[int]  # the response ids, without the model's stop token


@dataclass(frozen=True)
class Pair:
    pair_type: str  # "fork" (same session) or "outcome" (a rejected session's node vs an accepted answer)
    item: dict  # {"id", "messages", "prompt_ids"}
    rejected: Side
    chosen: Side

    @property
    def id(self) -> str:
        return (f"{self.rejected.session_id}.{self.rejected.node.key}-"
                f"{self.chosen.session_id}.{self.chosen.node.key}")


def pairs(query: ExportQuery, *, fork: bool = True, outcome: bool = True) -> Iterator[list[Pair]]:
    """Pairs a page of items at a time, as onPanda's PandaTree makes them.

    - fork: in an accepted session, every other node with the accepted node (the good
      dialog with the longest common prefix; a session has one).
    - outcome: every node of a rejected session with the accepted node of each accepted
      session of the same item (a tree without a good dialog pairs with the good
      dialogs of the same prompt).
    Streaming nodes (still being written) and identical responses are left out.
    """
    sessions = finished_sessions(query)
    items = Item.objects.filter(project=query.project).filter(Exists(sessions.filter(item=OuterRef("pk"))))
    for page in keyset_values(items, ["id", "messages", "prompt_ids"], batch_size=_tree_page(query)):
        by_item = {item["id"]: item for item in page}
        page_sessions = list(sessions.filter(item_id__in=list(by_item)).order_by("id")
                             .values("id", "item_id", "status", "current_node_id", "annotator__username"))
        nodes_of: dict[int, list[Node]] = {s["id"]: [] for s in page_sessions}
        for node in (Node.objects.filter(session_id__in=list(nodes_of)).exclude(status=NodeStatus.STREAMING)
                     .only(*NODE_FIELDS).order_by("session_id", "key")):
            nodes_of[node.session_id].append(node)

        result: list[Pair] = []
        accepted: dict[int, list[Side]] = {item_id: [] for item_id in by_item}
        for session in page_sessions:
            if session["status"] != SessionStatus.ACCEPTED:
                continue
            sides = {node.pk: Side(session["id"], session["annotator__username"], node, response_ids(node))
                     for node in nodes_of[session["id"]]}
            answer = sides.get(session["current_node_id"])
            if answer is None:
                continue
            accepted[session["item_id"]].append(answer)
            if fork:
                chosen_keys = pick_fork_pairs({pk: side.ids for pk, side in sides.items()}, {answer.node.pk})
                result += [Pair("fork", by_item[session["item_id"]], sides[rejected], sides[chosen])
                           for rejected, chosen in chosen_keys]
        if outcome:
            for session in page_sessions:
                if session["status"] != SessionStatus.REJECTED:
                    continue
                for node in nodes_of[session["id"]]:
                    side = Side(session["id"], session["annotator__username"], node, response_ids(node))
                    result += [Pair("outcome", by_item[session["item_id"]], side, answer)
                               for answer in accepted[session["item_id"]] if answer.ids != side.ids]
        if result:
            yield result


def _pair_kinds(query: ExportQuery) -> dict:
    wanted = set(query.filters.get("pair_type") or ["fork", "outcome"])
    return {"fork": "fork" in wanted, "outcome": "outcome" in wanted}


# --- onpanda.pairs -----------------------------------------------------------------------------------------

PAIRS_SCHEMA = pa.schema([
    ("id", pa.string()),  # "<rejected session>.<node key>-<chosen session>.<node key>"
    ("pair_type", pa.string()),  # fork / outcome
    ("item_id", pa.int64()),
    ("prompt", MESSAGES),  # TRL's conversational preference format: prompt, chosen, rejected
    ("chosen", MESSAGES),
    ("rejected", MESSAGES),
    ("fork_token_idx", pa.int64()),  # fork pairs: the first differing response token; null for outcome pairs
    ("chosen_session_id", pa.int64()),
    ("chosen_node_key", pa.int64()),
    ("chosen_annotator", pa.string()),
    ("rejected_session_id", pa.int64()),
    ("rejected_node_key", pa.int64()),
    ("rejected_annotator", pa.string()),
])


def pair_rows(query: ExportQuery) -> Iterator[list[dict]]:
    backend = services.backend_for(query.project)
    for page in pairs(query, **_pair_kinds(query)):
        yield [{
            "id": pair.id, "pair_type": pair.pair_type, "item_id": pair.item["id"], "prompt": pair.item["messages"],
            "chosen": [_message("assistant", backend.detokenize(pair.chosen.ids))],
            "rejected": [_message("assistant", backend.detokenize(pair.rejected.ids))],
            "fork_token_idx": fork_token_idx(pair.rejected.ids, pair.chosen.ids) if pair.pair_type == "fork" else None,
            "chosen_session_id": pair.chosen.session_id, "chosen_node_key": pair.chosen.node.key,
            "chosen_annotator": pair.chosen.annotator,
            "rejected_session_id": pair.rejected.session_id, "rejected_node_key": pair.rejected.node.key,
            "rejected_annotator": pair.rejected.annotator,
        } for pair in page]


register(ExportKind(
    name="onpanda.pairs",
    version=1,
    schema=PAIRS_SCHEMA,
    label="onPanda preference pairs",
    description="Preference pairs as onPanda makes them: fork pairs (each other node of an accepted session vs its "
                "accepted answer) and outcome pairs (nodes of rejected sessions vs accepted answers to the same "
                "prompt). TRL format: prompt, chosen, rejected.",
    rows=pair_rows,
    data_version=data_version,
    filters=PairFilters,
    dedup_ignore=("id", "item_id", "chosen_session_id", "chosen_node_key", "chosen_annotator", "rejected_session_id",
                  "rejected_node_key", "rejected_annotator"),
))


# --- onpanda.token_supervision -------------------------------------------------------------------------------

TOKEN_SUPERVISION_SCHEMA = pa.schema([
    ("id", pa.string()),  # as in onpanda.pairs
    ("item_id", pa.int64()),
    ("session_id", pa.int64()),
    ("chosen_node_key", pa.int64()),
    ("rejected_node_key", pa.int64()),
    ("annotator", pa.string()),
    ("model_id", pa.string()),
    ("prompt", MESSAGES),
    ("prompt_token_ids", pa.list_(pa.int64())),  # the chat template applied to the prompt, generation prompt added
    ("fork_token_idx", pa.int64()),
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


def token_supervision_rows(query: ExportQuery) -> Iterator[list[dict]]:
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
            rows.append({
                "id": pair.id, "item_id": pair.item["id"], "session_id": pair.chosen.session_id,
                "chosen_node_key": pair.chosen.node.key, "rejected_node_key": pair.rejected.node.key,
                "annotator": pair.chosen.annotator, "model_id": pair.chosen.node.model_id,
                "prompt": pair.item["messages"], "prompt_token_ids": pair.item["prompt_ids"], **supervision,
            })
        if rows:
            yield rows


register(ExportKind(
    name="onpanda.token_supervision",
    version=1,
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


# --- onpanda.panda_json -----------------------------------------------------------------------------------

PANDA_JSON_SCHEMA = pa.schema([
    ("id", pa.int64()),  # the session
    ("item_id", pa.int64()),
    ("external_id", pa.string()),
    ("status", pa.string()),
    ("annotator", pa.string()),
    ("panda_json", pa.string()),  # the session as a .panda.json v2 document, readable by onpanda.parser.PandaTree
])


def panda_json_rows(query: ExportQuery) -> Iterator[list[dict]]:
    backend = services.backend_for(query.project)
    bound = Bound.parse(query.data_version)
    sessions = finished_sessions(query)
    for page in keyset_values(sessions, ["id"], batch_size=_tree_page(query)):
        loaded = (Session.objects.filter(id__in=[s["id"] for s in page]).order_by("id")
                  .select_related("item", "annotator")
                  .prefetch_related(Prefetch("nodes", Node.objects.defer("top")),
                                    Prefetch("events", Event.objects.filter(id__lte=bound.events))))
        yield [{
            "id": session.pk, "item_id": session.item_id, "external_id": session.item.external_id,
            "status": session.status, "annotator": session.annotator.get_username(),
            "panda_json": json.dumps(session_to_panda_json(session, backend=backend), ensure_ascii=False),
        } for session in loaded]


register(ExportKind(
    name="onpanda.panda_json",
    version=1,
    schema=PANDA_JSON_SCHEMA,
    label="onPanda .panda.json",
    description="One row per finished session: the whole correction tree as a .panda.json v2 document (a string), "
                "for the onPanda tool and the onpanda package.",
    rows=panda_json_rows,
    data_version=data_version,
    count=lambda query: finished_sessions(query).count(),
    filters=StatusFilters,
))
