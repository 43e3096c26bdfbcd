"""The onPanda metrics as annotate/metrics.py computed them before they were kept (issue 46): every accepted session
and all its nodes read per request. Kept here as the oracle the kept figures are compared with on random data
(tests/annotate/test_figures.py); not used by the platform.

Project metrics for the onPanda workflow: agreement, provenance, where errors are, effort, throughput.

These are selectors (reads only). `project_metrics(project)` takes a project the
caller has already authorised (e.g. `project_for(user, slug, CAN_CURATE)`) and
scopes every queryset to it. The result is plain JSON: lists, dicts, ints,
floats and None (a rate with no denominator is None, not 0).

Bounded queries: event histograms are aggregated in SQL; everything derived from
session trees comes from two streamed, values-only queries (accepted sessions,
and the (id, parent, fork) rows of their nodes), merged by session id, so memory
holds one session's tree at a time plus a few numbers per accepted session.

Definitions used throughout:
- The *accepted node* is an accepted session's current node (an accepted session is frozen).
- A *correction on the lineage* is a fork on the accepted node's ancestor chain: corrections
  that were undone live on side branches and do not count.
- The *first error position* is the first such fork (see `annotate.reviews.first_error_position`).
  For agreement, a direct accept (no correction) counts as position = length of the accepted
  response: "the model made no error before the end", so a direct accept and a correction of the
  last token are 1 token apart.
"""

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations, groupby
from typing import Any

from django.db.models import Count, F, FloatField, IntegerField, OuterRef, Subquery, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Exp, Floor, Least

from annotate.models import AnnotationConfig, Event, EventKind, Node, Origin, Session, SessionStatus
from annotate.reviews import TREE_FIELDS, lineage_forks, tree_of
from dataplatform.accounts.models import Project

MAX_ACTIVE_SECONDS = 7 * 3600  # longer sessions were left open (lunch, overnight), not worked on
FORK_BINS = 5
PROBABILITY_BINS = 10
ORIGINS = (Origin.MODEL.value, Origin.CANDIDATE.value, Origin.TYPED.value)


@dataclass(frozen=True)
class AcceptedSession:
    """What the metrics need to know about one accepted session."""

    id: int
    item_id: int
    annotator: str
    length: int  # tokens in the accepted response
    origins: list[str]  # per token of the accepted response
    forks: list[int]  # fork positions of the corrections on the accepted lineage, root first
    created_at: datetime
    accepted_at: datetime | None  # time of the accept event (None only for hand-made data)

    @property
    def first_error(self) -> int | None:
        return self.forks[0] if self.forks else None

    @property
    def agreement_position(self) -> int:
        """First error position, with a direct accept counted as the response length."""
        return self.forks[0] if self.forks else self.length

    @property
    def active_seconds(self) -> float | None:
        if self.accepted_at is None:
            return None
        return (self.accepted_at - self.created_at).total_seconds()


def accepted_sessions(project: Project) -> Iterator[AcceptedSession]:
    """Stream the project's accepted sessions with their lineage forks, in id order.

    Two streamed queries, merged on session id. The session query runs first; a
    session accepted after it started appears only among the nodes and is skipped,
    and nodes of an accepted session never change, so the two agree.
    """
    accepted_at = (Event.objects.filter(session=OuterRef("pk"), kind=EventKind.ACCEPT)
                   .order_by("id").values("created_at")[:1])
    sessions = (Session.objects.filter(item__project=project, status=SessionStatus.ACCEPTED)
                .annotate(accepted_at=Subquery(accepted_at))
                .values("id", "item_id", "annotator__username", "created_at", "accepted_at",
                        "current_node_id", "current_node__origins")
                .order_by("id"))
    nodes = (Node.objects.filter(session__item__project=project, session__status=SessionStatus.ACCEPTED)
             .values_list("session_id", *TREE_FIELDS)
             .order_by("session_id", "id"))
    node_groups = groupby(nodes.iterator(chunk_size=2000), key=lambda row: row[0])
    group: tuple[int, Any] | None = None
    for row in sessions.iterator(chunk_size=500):
        # Advance the node stream to this session (both streams are ordered by session id).
        while group is None or group[0] < row["id"]:
            group = next(node_groups, None)
            if group is None:
                return  # no nodes left: no later session can be measured
        if group[0] != row["id"] or row["current_node_id"] is None:
            continue  # cannot happen through the services; skip rather than guess
        tree = tree_of(node_row[1:] for node_row in group[1])
        origins = list(row["current_node__origins"] or [])
        yield AcceptedSession(
            id=row["id"], item_id=row["item_id"], annotator=row["annotator__username"], length=len(origins),
            origins=origins, forks=lineage_forks(tree, row["current_node_id"]),
            created_at=row["created_at"], accepted_at=row["accepted_at"],
        )


CORRECTIONS = (EventKind.CONTINUE_WITH_CHOSEN, EventKind.CONTINUE_WITH_INPUT, EventKind.FORCE_STOP,
               EventKind.EDIT_SELECTION)


def _corrections_by_channel_and_round(project: Project) -> dict:
    rows = (Event.objects.filter(session__item__project=project, session__status=SessionStatus.ACCEPTED,
                                 kind__in=CORRECTIONS)
            .values(channel=KT("payload__channel"), round=F("node__round")).annotate(n=Count("id")))
    by_channel: Counter[str] = Counter()
    by_round: Counter[int] = Counter()
    for row in rows:
        by_channel[row["channel"] or "unknown"] += row["n"]
        by_round[row["round"] or 1] += row["n"]
    return {"corrections_by_channel": dict(sorted(by_channel.items())),
            "corrections_by_round": {str(number): by_round[number] for number in sorted(by_round)}}


def _rate(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _edges(bins: int) -> list[float]:
    return [round(i / bins, 10) for i in range(bins + 1)]


# --- agreement --------------------------------------------------------------------------------

def _agreement(positions_by_item: dict[int, list[tuple[str, int]]]) -> dict:
    """Pairwise agreement on first error positions, over items with at least two accepted sessions."""
    matches = distance = pairs = 0
    per_annotator: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # pairs, matches, total distance
    items = 0
    for positions in positions_by_item.values():
        if len(positions) < 2:
            continue
        items += 1
        for (a, pa), (b, pb) in combinations(positions, 2):
            d = abs(pa - pb)
            pairs += 1
            matches += d == 0
            distance += d
            for name in {a, b}:
                stats = per_annotator[name]
                stats[0] += 1
                stats[1] += d == 0
                stats[2] += d
    return {
        "items": items,
        "pairs": pairs,
        "exact_match_rate": _rate(matches, pairs),
        "mean_abs_distance": _rate(distance, pairs),
        "per_annotator": [
            {"annotator": name, "pairs": n, "exact_match_rate": _rate(m, n), "mean_abs_distance": _rate(d, n)}
            for name, (n, m, d) in sorted(per_annotator.items())
        ],
        "note": "A direct accept counts as first error position = length of the accepted response.",
    }


# --- event histograms (aggregated in SQL) ----------------------------------------------------------

def _chosen_events(project: Project):
    # Every pick from the top-k list, including picks later undone and picks in sessions not
    # (yet) accepted: this measures how annotators use the list, not what the answers contain.
    return Event.objects.filter(session__item__project=project, kind=EventKind.CONTINUE_WITH_CHOSEN)


def _candidate_ranks(project: Project) -> dict:
    top_k = (AnnotationConfig.objects.filter(project=project).values_list("top_k", flat=True).first()
             or AnnotationConfig._meta.get_field("top_k").default)
    rows = (_chosen_events(project).annotate(rank=Cast(KT("payload__rank"), IntegerField()))
            .filter(rank__gte=1).values("rank").annotate(n=Count("id")).order_by("rank"))
    counts = {row["rank"]: row["n"] for row in rows}
    k = max([top_k, *counts])  # the project's top_k may have been lowered after some picks
    return {"labels": list(range(1, k + 1)), "counts": [counts.get(rank, 0) for rank in range(1, k + 1)]}


def _candidate_probabilities(project: Project) -> dict:
    # bin = floor(p * 10), with p = 1.0 put in the last bin.
    probability_bin = Least(Floor(Exp(F("logprob")) * Value(float(PROBABILITY_BINS))),
                            Value(float(PROBABILITY_BINS - 1)))
    rows = (_chosen_events(project).annotate(logprob=Cast(KT("payload__logprob"), FloatField()))
            .filter(logprob__isnull=False).annotate(bin=probability_bin)
            .values("bin").annotate(n=Count("id")).order_by("bin"))
    counts = [0] * PROBABILITY_BINS
    for row in rows:
        counts[max(0, int(row["bin"]))] += row["n"]
    return {"edges": _edges(PROBABILITY_BINS), "counts": counts}


def _histogram_from_counter(counter: Counter) -> dict:
    top = max(counter, default=-1)
    return {"labels": list(range(top + 1)), "counts": [counter.get(n, 0) for n in range(top + 1)]}


# --- everything --------------------------------------------------------------------------------------

def project_metrics(project: Project) -> dict:
    """All onPanda metrics of one project, as plain JSON.

    Keys:
    - accepted_sessions: how many sessions were accepted.
    - agreement: over items with >= 2 accepted sessions, every pair of their sessions:
      exact_match_rate and mean_abs_distance (tokens) of the first error positions, overall
      and per annotator (the pairs that involve them). Direct accept = response length.
    - origin_ratios: per accepted, non-empty response the share of model/candidate/typed
      tokens ("sessions"), and the mean of those per-session ratios ("mean").
    - fork_positions: each correction on an accepted lineage, as fork position / length of the
      accepted response, in 5 bins over [0, 1] (an empty response counts as 0: its first token
      was wrong); first_token_modification_rate = share of accepted sessions whose first
      correction is at position 0.
    - direct_accept_rate: share of accepted sessions with no correction on the accepted lineage.
    - candidate_rank / candidate_probability: histograms over continue_with_chosen events of the
      chosen rank (1..k) and of exp(logprob) (10 bins over [0, 1]).
    - corrections_per_item: histogram of the number of corrections on the accepted lineage,
      per accepted session (an item as one annotator finished it).
    - corrections_by_channel / corrections_by_round: every correction made in accepted sessions
      (undone ones too: each was a decision), by the channel of the corrected token (reasoning,
      content, tool_name, tool_arguments, marker; "unknown" for corrections made before channels were
      recorded) and by the round (user turn) of the response.
    - active_time: median seconds from session start to the accept event, leaving out
      sessions over 7 h (left open, not worked on).
    - throughput: per annotator, accepted sessions, active hours (sessions within 7 h) and
      those sessions per active hour.
    """
    total = direct = first_token = 0
    positions_by_item: dict[int, list[tuple[str, int]]] = defaultdict(list)
    origin_rows: list[dict] = []
    fork_counts = [0] * FORK_BINS
    corrections: Counter[int] = Counter()
    active: list[float] = []
    over_limit = 0
    per_annotator: dict[str, dict[str, float]] = defaultdict(lambda: {"accepted": 0, "timed": 0, "seconds": 0.0})

    for s in accepted_sessions(project):
        total += 1
        positions_by_item[s.item_id].append((s.annotator, s.agreement_position))
        direct += not s.forks
        first_token += s.first_error == 0
        corrections[len(s.forks)] += 1
        for fork in s.forks:
            # Integer arithmetic, so 3/5 lands in bin 3 exactly; fork <= length always holds.
            fork_counts[min(fork * FORK_BINS // s.length, FORK_BINS - 1) if s.length else 0] += 1
        if s.length:
            shares = Counter(s.origins)
            origin_rows.append({"session": s.id, "item": s.item_id, "annotator": s.annotator,
                                **{origin: shares[origin] / s.length for origin in ORIGINS}})
        stats = per_annotator[s.annotator]
        stats["accepted"] += 1
        seconds = s.active_seconds
        if seconds is not None and seconds >= 0:
            if seconds > MAX_ACTIVE_SECONDS:
                over_limit += 1
            else:
                active.append(seconds)
                stats["timed"] += 1
                stats["seconds"] += seconds

    return {
        "accepted_sessions": total,
        "agreement": _agreement(positions_by_item),
        "origin_ratios": {
            "sessions": origin_rows,
            "mean": {origin: _mean([row[origin] for row in origin_rows]) for origin in ORIGINS},
        },
        "fork_positions": {
            "edges": _edges(FORK_BINS),
            "counts": fork_counts,
            "corrections": sum(fork_counts),
            "first_token_modification_rate": _rate(first_token, total),
        },
        "direct_accept_rate": _rate(direct, total),
        "candidate_rank": _candidate_ranks(project),
        "candidate_probability": _candidate_probabilities(project),
        "corrections_per_item": _histogram_from_counter(corrections),
        **_corrections_by_channel_and_round(project),
        "active_time": {
            "median_seconds": statistics.median(active) if active else None,
            "sessions": len(active),
            "excluded_over_7h": over_limit,
        },
        "throughput": [
            {
                "annotator": name,
                "accepted": int(stats["accepted"]),
                "active_hours": stats["seconds"] / 3600,
                "accepted_per_hour": _rate(stats["timed"], stats["seconds"] / 3600),
            }
            for name, stats in sorted(per_annotator.items())
        ],
    }

