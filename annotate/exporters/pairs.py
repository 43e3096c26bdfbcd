"""onpanda.pairs: preference pairs as onPanda's PandaTree makes them; `pairs()` also feeds
onpanda.token_supervision.

A session may hold several turns (tool rounds, user rounds) and several trees. Two responses only make a
pair when they answer the same conversation (the same context and tools), so nodes are grouped by what
they answer; in each group the good node is the one on the accepted trajectory: the accepted answer, and
for each earlier turn the response whose turn led on to it."""

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from django.db.models import Exists, OuterRef, Subquery
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.conversations.training import MESSAGES, TOOLS, TOOLS_MEANINGS
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.exports.sources import keyset_values
from dataplatform.inference import backend_for

from .. import services
from ..models import Event, EventKind, Item, Node, NodeStatus, Session, SessionStatus
from ..supervision import fork_token_idx, pick_fork_pairs, response_ids
from .sessions import (
    FINISHED,
    SESSION_MEANINGS,
    TREE_PAGE,
    SessionFilters,
    answer,
    data_version,
    finished_sessions,
    prompt_cells,
    tree_page,
)

# Node fields a pair reads; `top` (k pairs per token) and `logprobs` are left in the database.
NODE_FIELDS = ("id", "session_id", "parent_id", "key", "fork_index", "token_ids", "origins", "finish_reason",
               "locked_until", "model_id", "status", "context", "tools", "prompt_ids", "channels", "message")


class PairFilters(SessionFilters):
    pair_type = serializers.MultipleChoiceField(choices=[("fork", "fork"), ("outcome", "outcome")], required=False)


@dataclass(frozen=True)
class Side:
    session_id: int
    annotator: str
    node: Node
    ids: list[int]  # the response ids, without the model's stop token


@dataclass(frozen=True)
class Pair:
    pair_type: str  # "fork" (same session) or "outcome" (a rejected session's node vs an accepted answer)
    item_id: int
    rejected: Side
    chosen: Side

    @property
    def id(self) -> str:
        return (f"{self.rejected.session_id}.{self.rejected.node.key}-"
                f"{self.chosen.session_id}.{self.chosen.node.key}")

    def prompt_cells(self) -> tuple[list[dict], list[str] | None]:
        """The `prompt` and `tools` cells: the conversation both responses answer."""
        return prompt_cells(self.chosen.node.context, self.chosen.node.tools)


def answers_to(node: Node) -> str:
    """What a node answers, as a key: nodes with equal keys are alternatives to each other."""
    return json.dumps([node.context, node.tools], sort_keys=True)


def trajectory(answer: Node, by_pk: dict[int, Node]) -> set[int]:
    """The accepted answer and, for each earlier turn, the response its next turn continued: up the
    corrections of a turn (children with a fork index) to its first response, whose parent (a
    run_tool_calls or start_new_round child's) is the previous turn's good response."""
    good, node = {answer.pk}, answer
    while node is not None:
        while node.fork_index is not None and node.parent_id in by_pk:
            node = by_pk[node.parent_id]
        node = by_pk.get(node.parent_id)
        if node is not None:
            good.add(node.pk)
    return good


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
    for page in keyset_values(items, ["id"], batch_size=tree_page(query)):
        result = pairs_of(sessions.filter(item_id__in=[item["id"] for item in page]), fork=fork, outcome=outcome)
        if result:
            yield result


def pairs_of(sessions, *, fork: bool = True, outcome: bool = True) -> list[Pair]:
    """The pairs of `sessions` (finished; every session of an item for its outcome pairs), in two queries."""
    page_sessions = list(sessions.order_by("id").values("id", "item_id", "status", "current_node_id",
                                                        "annotator__username"))
    nodes_of: dict[int, list[Node]] = {s["id"]: [] for s in page_sessions}
    for node in (Node.objects.filter(session_id__in=list(nodes_of)).exclude(status=NodeStatus.STREAMING)
                 .only(*NODE_FIELDS).order_by("session_id", "key")):
        nodes_of[node.session_id].append(node)

    result: list[Pair] = []
    # item -> what is answered -> the good responses of accepted sessions to it
    accepted: dict[int, dict[str, list[Side]]] = defaultdict(lambda: defaultdict(list))
    for session in page_sessions:
        if session["status"] != SessionStatus.ACCEPTED:
            continue
        sides = {node.pk: Side(session["id"], session["annotator__username"], node, response_ids(node))
                 for node in nodes_of[session["id"]]}
        if session["current_node_id"] not in sides:
            continue
        good = trajectory(sides[session["current_node_id"]].node, {pk: side.node for pk, side in sides.items()})
        groups: dict[str, dict[int, Side]] = defaultdict(dict)
        for pk, side in sides.items():
            groups[answers_to(side.node)][pk] = side
        for key, group in groups.items():
            chosen = good & set(group)
            accepted[session["item_id"]][key] += [group[pk] for pk in chosen]
            if fork and chosen:
                result += [Pair("fork", session["item_id"], group[rejected], group[picked]) for rejected, picked
                           in pick_fork_pairs({pk: side.ids for pk, side in group.items()}, chosen)]
    if outcome:
        for session in page_sessions:
            if session["status"] != SessionStatus.REJECTED:
                continue
            for node in nodes_of[session["id"]]:
                side = Side(session["id"], session["annotator__username"], node, response_ids(node))
                result += [Pair("outcome", session["item_id"], side, answer)
                           for answer in accepted[session["item_id"]][answers_to(node)] if answer.ids != side.ids]
    return result


def _pair_kinds(query: ExportQuery) -> dict:
    wanted = set(query.filters.get("pair_type") or ["fork", "outcome"])
    return {"fork": "fork" in wanted, "outcome": "outcome" in wanted}


PAIRS_SCHEMA = pa.schema([
    ("id", pa.string()),  # "<rejected session>.<node key>-<chosen session>.<node key>"
    ("pair_type", pa.string()),  # fork / outcome
    ("item_id", pa.int64()),
    ("prompt", MESSAGES),  # TRL's conversational preference format: prompt, chosen, rejected, and tools
    ("chosen", MESSAGES),
    ("rejected", MESSAGES),
    ("tools", TOOLS),
    ("fork_token_idx", pa.int64()),  # fork pairs: the first differing response token; null for outcome pairs
    ("chosen_session_id", pa.int64()),
    ("chosen_node_key", pa.int64()),
    ("chosen_annotator", pa.string()),
    ("rejected_session_id", pa.int64()),
    ("rejected_node_key", pa.int64()),
    ("rejected_annotator", pa.string()),
])
# The columns onpanda.token_supervision shares with this kind (its rows are fork pairs too).
PAIR_MEANINGS = {
    "id": 'The pair: "<rejected session>.<node key>-<chosen session>.<node key>".',
    "item_id": SESSION_MEANINGS["item_id"],
    "prompt": "The conversation both responses answer (the same context and tools): earlier rounds, reasoning, "
              "tool calls and tool results included.",
    **TOOLS_MEANINGS,
    "chosen_node_key": "The chosen response's node (dialog) key in its session, 1, 2, ...",
    "rejected_node_key": "The rejected response's node (dialog) key in its session, 1, 2, ...",
}
PAIRS_MEANINGS = {
    **PAIR_MEANINGS,
    "pair_type": "fork (another response in an accepted session against the response on its accepted path) or "
                 "outcome (a rejected session's response against an accepted session's answer to the same "
                 "conversation).",
    "chosen": "The response on an accepted session's path to its accepted answer, as one assistant message "
              "(reasoning and tool calls included).",
    "rejected": "The other response to the same conversation, as one assistant message.",
    "fork_token_idx": "Fork pairs: the 0-based index of the first response token where rejected and chosen differ "
                      "(stop token excluded); null for outcome pairs.",
    "chosen_session_id": "The accepted session the chosen response belongs to.",
    "chosen_annotator": "Username of the chosen session's annotator.",
    "rejected_session_id": "The session the rejected response belongs to: the same as chosen_session_id for a fork "
                           "pair, a rejected session for an outcome pair.",
    "rejected_annotator": "Username of the rejected session's annotator.",
}


def derive(project, session_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """The pairs each finished session makes with the sessions of its item finished before it: its fork pairs,
    and its outcome pairs with those (a pair belongs to the later of its two sessions, so its rows are known when
    it finishes and never change). The union over sessions is what `pairs()` makes of them all."""
    backend = backend_for(project, model=services.config_for(project).model_name)
    verdict = Event.objects.filter(session=OuterRef("pk"), kind__in=[EventKind.ACCEPT, EventKind.REJECT])
    with_verdict = Session.objects.filter(status__in=FINISHED).annotate(
        verdict=Subquery(verdict.order_by("id").values("id")[:1])).filter(verdict__isnull=False)
    page = dict(with_verdict.filter(id__in=session_ids).values_list("id", "verdict"))
    if not page:
        return
    siblings = with_verdict.filter(item_id__in=Session.objects.filter(id__in=list(page)).values("item_id"),
                                   verdict__lte=max(page.values()))
    verdict_of = dict(siblings.values_list("id", "verdict"))
    cells = PageCells(backend)
    for pair in pairs_of(siblings):
        owner = max(pair.rejected.session_id, pair.chosen.session_id, key=verdict_of.__getitem__)
        if owner in page:
            yield owner, _pair_row(pair, cells)


def keep(query: ExportQuery) -> dict:
    """A pair is exported when both its sessions are selected, and its type is asked for."""
    selected = finished_sessions(query).values_list("id", flat=True)
    return {"pair_type": sorted(name for name, wanted in _pair_kinds(query).items() if wanted),
            "chosen_session_id": selected, "rejected_session_id": selected}


class PageCells:
    """The cells of a page's nodes, each made once: an accepted answer is the chosen side of every pair it wins
    (its fork pairs, and the outcome pairs of every rejected session of its item), with the same prompt."""

    def __init__(self, backend):
        self.backend = backend
        self.answers: dict[int, list[dict]] = {}
        self.prompts: dict[int, tuple[list[dict], list[str] | None]] = {}

    def answer(self, side: Side) -> list[dict]:
        if side.node.pk not in self.answers:
            self.answers[side.node.pk] = answer(side.node.message, self.backend.detokenize(side.ids))
        return self.answers[side.node.pk]

    def prompt(self, pair: Pair) -> tuple[list[dict], list[str] | None]:
        if pair.chosen.node.pk not in self.prompts:
            self.prompts[pair.chosen.node.pk] = pair.prompt_cells()
        return self.prompts[pair.chosen.node.pk]


def _pair_row(pair: Pair, cells: PageCells) -> dict:
    prompt, tools = cells.prompt(pair)
    return {
        "id": pair.id, "pair_type": pair.pair_type, "item_id": pair.item_id, "prompt": prompt,
        "chosen": cells.answer(pair.chosen), "rejected": cells.answer(pair.rejected), "tools": tools,
        "fork_token_idx": fork_token_idx(pair.rejected.ids, pair.chosen.ids) if pair.pair_type == "fork" else None,
        "chosen_session_id": pair.chosen.session_id, "chosen_node_key": pair.chosen.node.key,
        "chosen_annotator": pair.chosen.annotator,
        "rejected_session_id": pair.rejected.session_id, "rejected_node_key": pair.rejected.node.key,
        "rejected_annotator": pair.rejected.annotator,
    }


register(ExportKind(
    name="onpanda.pairs",
    trl_format="preference",
    # 2: the prompt carries reasoning_content, tool_calls and tool results; the tools column. 3: chosen and
    # rejected carry their reasoning and tool calls; pairs only between answers to the same conversation.
    version=3,
    schema=PAIRS_SCHEMA,
    group="prompt",  # every session, pair and patch of one item stay in one split
    group_by=("item_id",),
    label=_("onPanda preference pairs"),
    description="Preference pairs as onPanda makes them: fork pairs (each other node of an accepted session vs its "
                "accepted answer) and outcome pairs (nodes of rejected sessions vs accepted answers to the same "
                "prompt). TRL format: prompt, chosen, rejected.",
    # A pair is derived once, when the later of its two sessions finishes (derive); filters reach both sides (keep).
    stored=StoredRows(model=Session, sources=finished_sessions, derive=derive, keep=keep, page=TREE_PAGE),
    data_version=data_version,
    append_only=True,  # sessions end once (accepted or rejected); events and reviews are only added
    filters=PairFilters,
    dedup_ignore=("id", "item_id", "chosen_session_id", "chosen_node_key", "chosen_annotator", "rejected_session_id",
                  "rejected_node_key", "rejected_annotator"),
    field_meanings=PAIRS_MEANINGS,
))
