"""The onPanda figures kept as tallies (dataplatform/tallies): what the queue and the metrics pages show, kept up to
date by the services that change them instead of recounted per request.

Each tally is defined once here with its recount (the figures from scratch). The services call the functions at the
bottom inside their transactions, after the change is written: `session_accepted` (annotate.services.finish),
`chosen_made` (annotate.corrections: a pick from the top-k), `imported` (a `.panda.json` file's item, claim and
session), `items_added` and `item_answered` (prompt imports, rollouts, the demo); claims by state through
dataplatform.claims, which reports every change of a claim's state (`claims_counter`). A change's delta is computed
by the same code as the recount, restricted to the changed rows, so the two cannot drift apart
(tests/annotate/test_figures.py compares them).

An accepted session never changes again (no service moves a session out of accepted, and nodes and events of a
finished session are not written), so its figures are added once, when it is accepted.

Tallies, and their keys:
- ACCEPTED: "sessions", "direct" (no correction on the accepted lineage), "first_token" (first correction at 0),
  "fork|<bin>" (corrections on the lineage by where they fall), "corrections|<n>" (sessions with n corrections),
  "origin|<origin>" (count: non-empty responses, total: sum of the origin's share), "over_7h", "annotator|<user id>"
  (accepted), "timed|<user id>" (count and total microseconds of the sessions timed), "minute|<minute>" (timed
  sessions by whole minutes of active time); the agreement: "items", "pairs" (count, total: distance), "matches",
  "pairs|<user id>", "matches|<user id>". One tally, so that a first read counts them in one pass;
- ACTIVE_TIMES "<microseconds, 11 digits>": the timed sessions' exact active times, for the median (read only
  within the minute that holds it: one key per distinct time, too many to read whole);
- CORRECTIONS: "channel|<channel>", "round|<n>"; CANDIDATES: "rank|<rank>", "p|<bin>";
- QUEUE: "items", "answered", "claims|<state>".
"""

import functools
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import combinations, groupby
from typing import Any

from django.db.models import Count, F, FloatField, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Exp, Floor, Least

from dataplatform.claims import ACTIVE
from dataplatform.tallies import registry
from dataplatform.tallies import services as tallies
from dataplatform.tallies.models import TallyStart
from dataplatform.tallies.registry import Figure

from .models import Claim, Event, EventKind, Item, Node, Origin, Session, SessionStatus
from .reviews import TREE_FIELDS, lineage_forks, tree_of

MAX_ACTIVE_SECONDS = 7 * 3600  # longer sessions were left open (lunch, overnight), not worked on
MAX_ACTIVE_MICROSECONDS = MAX_ACTIVE_SECONDS * 1_000_000
MINUTE_MICROSECONDS = 60 * 1_000_000
FORK_BINS = 5
PROBABILITY_BINS = 10
ORIGINS = (Origin.MODEL.value, Origin.CANDIDATE.value, Origin.TYPED.value)
CORRECTION_KINDS = (EventKind.CONTINUE_WITH_CHOSEN, EventKind.CONTINUE_WITH_INPUT, EventKind.FORCE_STOP,
                    EventKind.EDIT_SELECTION)


def time_key(microseconds: int) -> str:
    """An exact active time as a key whose text order is its number order (fixed width, digits only)."""
    return f"{microseconds:011d}"


def minute_key(microseconds: int) -> str:
    return f"{microseconds // MINUTE_MICROSECONDS:03d}"


# --- accepted sessions, as the figures read them ---------------------------------------------------

@dataclass(frozen=True)
class AcceptedSession:
    id: int
    item_id: int
    annotator_id: int
    origins: list[str]  # per token of the accepted response
    forks: list[int]  # fork positions of the corrections on the accepted lineage, root first
    created_at: datetime
    accepted_at: datetime | None  # time of the (first) accept event (None only for hand-made data)

    @property
    def length(self) -> int:
        return len(self.origins)

    @property
    def agreement_position(self) -> int:
        """First error position, with a direct accept counted as the response length."""
        return self.forks[0] if self.forks else self.length

    @property
    def active_microseconds(self) -> int | None:
        if self.accepted_at is None:
            return None
        return (self.accepted_at - self.created_at) // timedelta(microseconds=1)


def accepted_sessions(sessions: Q) -> Iterator[AcceptedSession]:
    """Stream the accepted sessions matching `sessions` (a condition on Session) with their lineage forks, in id
    order: two streamed queries (the sessions, and the tree rows of their nodes) merged on session id."""
    accepted_at = (Event.objects.filter(session=OuterRef("pk"), kind=EventKind.ACCEPT)
                   .order_by("id").values("created_at")[:1])
    rows = (Session.objects.filter(sessions, status=SessionStatus.ACCEPTED)
            .annotate(accepted_at=Subquery(accepted_at))
            .values("id", "item_id", "annotator_id", "created_at", "accepted_at", "current_node_id",
                    "current_node__origins")
            .order_by("id"))
    nodes = (Node.objects.filter(session__in=Session.objects.filter(sessions, status=SessionStatus.ACCEPTED))
             .values_list("session_id", *TREE_FIELDS).order_by("session_id", "id"))
    node_groups = groupby(nodes.iterator(chunk_size=2000), key=lambda row: row[0])
    group: tuple[int, Any] | None = None
    for row in rows.iterator(chunk_size=500):
        while group is None or group[0] < row["id"]:  # both streams are in session id order
            group = next(node_groups, None)
            if group is None:
                return
        if group[0] != row["id"] or row["current_node_id"] is None:
            continue  # cannot happen through the services
        tree = tree_of(node_row[1:] for node_row in group[1])
        yield AcceptedSession(id=row["id"], item_id=row["item_id"], annotator_id=row["annotator_id"],
                              origins=list(row["current_node__origins"] or []),
                              forks=lineage_forks(tree, row["current_node_id"]),
                              created_at=row["created_at"], accepted_at=row["accepted_at"])


# --- figures of a set of rows (the recount and the deltas share them) ----------------------------------------

class Changes:
    """Figures by tally and key, summed; `sign` -1 subtracts."""

    def __init__(self):
        self.by_name: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))

    def add(self, name: str, key: str, count: int = 1, total: float = 0.0) -> None:
        figure = self.by_name[name][key]
        figure[0] += count
        figure[1] += total

    def of(self, name: str) -> dict[str, Figure]:
        return {key: Figure(count, total) for key, (count, total) in self.by_name[name].items() if count}

    def write(self, project_id: int) -> None:
        for name, figures in self.by_name.items():
            tallies.add(project_id, name, {key: Figure(count, total) for key, (count, total) in figures.items()})


def _session(changes: Changes, s: AcceptedSession) -> None:
    changes.add(ACCEPTED, "sessions")
    changes.add(ACCEPTED, "direct", int(not s.forks))
    changes.add(ACCEPTED, "first_token", int(bool(s.forks) and s.forks[0] == 0))
    changes.add(ACCEPTED, f"corrections|{len(s.forks)}")
    for fork in s.forks:  # integer arithmetic, so 3/5 lands in bin 3 exactly; fork <= length always holds
        changes.add(ACCEPTED, f"fork|{min(fork * FORK_BINS // s.length, FORK_BINS - 1) if s.length else 0}")
    if s.length:
        for origin in ORIGINS:
            changes.add(ACCEPTED, f"origin|{origin}", 1, s.origins.count(origin) / s.length)
    changes.add(ACCEPTED, f"annotator|{s.annotator_id}")
    microseconds = s.active_microseconds
    if microseconds is not None and microseconds >= 0:
        if microseconds > MAX_ACTIVE_MICROSECONDS:
            changes.add(ACCEPTED, "over_7h")
        else:
            changes.add(ACCEPTED, f"timed|{s.annotator_id}", 1, float(microseconds))
            changes.add(ACCEPTED, f"minute|{minute_key(microseconds)}")
            changes.add(ACTIVE_TIMES, time_key(microseconds))


def _pair(changes: Changes, a: tuple[int, int], b: tuple[int, int]) -> None:
    """Two accepted sessions of one item, each as (annotator id, agreement position)."""
    (a_id, a_position), (b_id, b_position) = a, b
    distance = abs(a_position - b_position)
    changes.add(ACCEPTED, "pairs", 1, distance)
    changes.add(ACCEPTED, "matches", int(distance == 0))
    for annotator_id in {a_id, b_id}:
        changes.add(ACCEPTED, f"pairs|{annotator_id}", 1, distance)
        changes.add(ACCEPTED, f"matches|{annotator_id}", int(distance == 0))


def _corrections(changes: Changes, events) -> None:
    rows = (events.filter(kind__in=CORRECTION_KINDS)
            .values(channel=KT("payload__channel"), round=F("node__round")).annotate(n=Count("id")))
    for row in rows:
        changes.add(CORRECTIONS, f"channel|{row['channel'] or 'unknown'}", row["n"])
        changes.add(CORRECTIONS, f"round|{row['round'] or 1}", row["n"])


def _candidates(changes: Changes, events) -> None:
    # Every pick from the top-k list, including picks later undone and picks in sessions not (yet) accepted: this
    # measures how annotators use the list, not what the answers contain.
    chosen = events.filter(kind=EventKind.CONTINUE_WITH_CHOSEN)
    ranks = (chosen.annotate(rank=Cast(KT("payload__rank"), IntegerField())).filter(rank__gte=1)
             .values("rank").annotate(n=Count("id")))
    for row in ranks:
        changes.add(CANDIDATES, f"rank|{row['rank']}", row["n"])
    # bin = floor(p * 10), with p = 1.0 put in the last bin.
    probability_bin = Least(Floor(Exp(F("logprob")) * Value(float(PROBABILITY_BINS))),
                            Value(float(PROBABILITY_BINS - 1)))
    bins = (chosen.annotate(logprob=Cast(KT("payload__logprob"), FloatField())).filter(logprob__isnull=False)
            .annotate(bin=probability_bin).values("bin").annotate(n=Count("id")))
    for row in bins:
        changes.add(CANDIDATES, f"p|{max(0, int(row['bin']))}", row["n"])


# --- the recounts ----------------------------------------------------------------------------------

def _in_project(project_id: int) -> Q:
    return Q(item__project_id=project_id)


def _recount_sessions(name: str):
    def recount(project_id: int) -> dict[str, Figure]:
        changes = Changes()
        by_item: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for s in accepted_sessions(_in_project(project_id)):
            _session(changes, s)
            if name == ACCEPTED:  # what the pairs need (memory: two numbers a session)
                by_item[s.item_id].append((s.annotator_id, s.agreement_position))
        for sessions in by_item.values():
            if len(sessions) >= 2:
                changes.add(ACCEPTED, "items")
                for a, b in combinations(sessions, 2):
                    _pair(changes, a, b)
        return changes.of(name)
    return recount


def _recount_corrections(project_id: int) -> dict[str, Figure]:
    changes = Changes()
    _corrections(changes, Event.objects.filter(session__item__project_id=project_id,
                                               session__status=SessionStatus.ACCEPTED))
    return changes.of(CORRECTIONS)


def _recount_candidates(project_id: int) -> dict[str, Figure]:
    changes = Changes()
    _candidates(changes, Event.objects.filter(session__item__project_id=project_id))
    return changes.of(CANDIDATES)


def _recount_queue(project_id: int) -> dict[str, Figure]:
    items = Item.objects.filter(project_id=project_id)
    figures = {"items": Figure(items.count()), "answered": Figure(items.filter(rollout__isnull=False).count())}
    for state, n in Claim.objects.filter(project_id=project_id).values_list("state").annotate(n=Count("id")):
        figures[f"claims|{state}"] = Figure(n)
    return figures


ACCEPTED = "annotate.accepted"
ACTIVE_TIMES = "annotate.active_times"
SESSION_TABLES = (Session, Node, Event)
registry.define(ACCEPTED, tables=SESSION_TABLES, recount=_recount_sessions(ACCEPTED))
registry.define(ACTIVE_TIMES, tables=SESSION_TABLES, recount=_recount_sessions(ACTIVE_TIMES))
CORRECTIONS = registry.define("annotate.corrections", tables=SESSION_TABLES, recount=_recount_corrections)
CANDIDATES = registry.define("annotate.candidates", tables=(Event,), recount=_recount_candidates)
QUEUE = registry.define("annotate.queue", tables=(Item, Claim), recount=_recount_queue)
SESSION_FIGURES = (ACCEPTED, ACTIVE_TIMES, CORRECTIONS)


# --- what the services call, in their transactions, after the change is written ---------------------------

def _kept(project_id: int, names: tuple[str, ...]) -> set[str]:
    """Which of these tallies the project keeps (a tally not yet counted ignores changes: its first read counts)."""
    return set(TallyStart.objects.filter(project_id=project_id, name__in=names).values_list("name", flat=True))


def session_accepted(*, project_id: int, session_id: int, item_id: int) -> None:
    """A session was accepted: its figures, and its pairs with the item's other accepted sessions. Called with the
    item's row locked (end_claim's lock), so two sessions of one item accepted at once each see the other."""
    kept = _kept(project_id, SESSION_FIGURES)
    if not kept:
        return
    changes = Changes()
    if kept & {ACCEPTED, ACTIVE_TIMES}:
        item_sessions = list(accepted_sessions(Q(item_id=item_id)))
        this = [s for s in item_sessions if s.id == session_id]
        others = [s for s in item_sessions if s.id != session_id]
        for s in this:
            _session(changes, s)
            if others:
                changes.add(ACCEPTED, "items", int(len(others) == 1))  # the item has two accepted sessions now
            for other in others:
                _pair(changes, (s.annotator_id, s.agreement_position), (other.annotator_id, other.agreement_position))
    if CORRECTIONS in kept:
        _corrections(changes, Event.objects.filter(session_id=session_id))
    changes.write(project_id)


def chosen_made(*, project_id: int, event_id: int) -> None:
    """A candidate was picked from the top-k (its continue_with_chosen event is written)."""
    if _kept(project_id, (CANDIDATES,)):
        changes = Changes()
        _candidates(changes, Event.objects.filter(pk=event_id))
        changes.write(project_id)


def claims_counter(project_id: int):
    """What dataplatform.claims calls with each change to the project's claims by state."""
    return functools.partial(tallies.add, project_id, QUEUE)


def items_added(*, project_id: int, items: int, answered: int = 0) -> None:
    tallies.add(project_id, QUEUE, {"items": items, "answered": answered})


def item_answered(*, project_id: int) -> None:
    """An item that had no rollout has one now."""
    tallies.add(project_id, QUEUE, {"answered": 1})


def imported(*, session: Session) -> None:
    """A `.panda.json` file became an item with a rollout, a claim and a session (open, accepted or rejected)."""
    project_id = session.item.project_id
    items_added(project_id=project_id, items=1, answered=1)
    tallies.add(project_id, QUEUE, {f"claims|{state}": 1 for state in
                                     Claim.objects.filter(pk=session.claim_id).values_list("state", flat=True)})
    if _kept(project_id, (CANDIDATES,)):
        changes = Changes()
        _candidates(changes, Event.objects.filter(session_id=session.pk))
        changes.write(project_id)
    if Session.objects.filter(pk=session.pk, status=SessionStatus.ACCEPTED).exists():
        session_accepted(project_id=project_id, session_id=session.pk, item_id=session.item_id)


def active_claims(project_id: int) -> QuerySet[Claim]:
    """The project's active claims (one per annotator at most: the partial unique index finds them)."""
    return Claim.objects.filter(project_id=project_id, state=ACTIVE)
