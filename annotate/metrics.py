"""Project metrics for the onPanda workflow: agreement, provenance, where errors are, effort, throughput.

These are selectors (reads only). `project_metrics(project)` takes a project the caller has already authorised
(e.g. `project_for(user, slug, CAN_CURATE)`). It reads the kept figures of annotate/figures.py (a few rows per
tally, kept by the services that accept sessions and pick candidates), so it costs the same at any project size;
the first read of a project counts them. The result is plain JSON: lists, dicts, ints, floats and None (a rate
with no denominator is None, not 0).

Definitions used throughout:
- The *accepted node* is an accepted session's current node (an accepted session is frozen).
- A *correction on the lineage* is a fork on the accepted node's ancestor chain: corrections
  that were undone live on side branches and do not count.
- The *first error position* is the first such fork (see `annotate.reviews.first_error_position`).
  For agreement, a direct accept (no correction) counts as position = length of the accepted
  response: "the model made no error before the end", so a direct accept and a correction of the
  last token are 1 token apart.
"""

from django.contrib.auth import get_user_model
from django.db.models import F, Sum, Window

from dataplatform.accounts.models import Project
from dataplatform.tallies import selectors as tallies
from dataplatform.tallies.models import Tally
from dataplatform.tallies.registry import Figure

from .figures import (
    ACCEPTED,
    ACTIVE_TIMES,
    CANDIDATES,
    CORRECTIONS,
    FORK_BINS,
    MINUTE_MICROSECONDS,
    ORIGINS,
    PROBABILITY_BINS,
    time_key,
)
from .models import AnnotationConfig, Session, SessionStatus

# The per-session origin shares the API lists: the latest this many accepted sessions (all of them in a smaller
# project). Every session's row would make the answer grow with the project; the means cover them all.
ORIGIN_SESSIONS_LISTED = 200


def _rate(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _edges(bins: int) -> list[float]:
    return [round(i / bins, 10) for i in range(bins + 1)]


def _by_prefix(figures: dict[str, Figure], prefix: str) -> dict[str, Figure]:
    return {key[len(prefix):]: figure for key, figure in figures.items() if key.startswith(prefix)}


def _histogram(counts: dict[int, int]) -> dict:
    top = max(counts, default=-1)
    return {"labels": list(range(top + 1)), "counts": [counts.get(n, 0) for n in range(top + 1)]}


def _names(user_ids: set[str]) -> dict[str, str]:
    users = get_user_model().objects.filter(pk__in=[int(user_id) for user_id in user_ids])
    return {str(pk): name for pk, name in users.values_list("pk", "username")}


# --- the median active time, from the kept minutes and the exact times within one minute ----------------------

def _nth_time(project_id: int, minutes: list[tuple[int, int]], rank: int) -> int:
    """The `rank`-th (0-based) smallest active time, in microseconds: the minute that holds it from the kept
    minutes, then the exact time within that minute, from the kept exact times of that minute only."""
    before = 0
    for minute, count in minutes:  # noqa: B007 (the loop finds `minute`)
        if rank < before + count:
            break
        before += count
    times = (Tally.objects.filter(project_id=project_id, name=ACTIVE_TIMES,
                                  key__gte=time_key(minute * MINUTE_MICROSECONDS),
                                  key__lt=time_key((minute + 1) * MINUTE_MICROSECONDS))
             .annotate(upto=Window(Sum("count"), order_by=F("key").asc())))
    return int(times.filter(upto__gt=rank - before).order_by("key").values_list("key", flat=True)[0])


def _median_seconds(project_id: int, accepted: dict[str, Figure]) -> tuple[float | None, int]:
    minutes = sorted((int(key), figure.count) for key, figure in _by_prefix(accepted, "minute|").items())
    timed = sum(count for _minute, count in minutes)
    if not timed:
        return None, 0
    tallies.ensure_counted(project_id, ACTIVE_TIMES)  # its keys are read by range below, not through figures()
    low, high = (timed - 1) // 2, timed // 2
    first = _nth_time(project_id, minutes, low) / 1_000_000
    if low == high:
        return first, timed
    return (first + _nth_time(project_id, minutes, high) / 1_000_000) / 2, timed


# --- everything --------------------------------------------------------------------------------------

def latest_origin_sessions(project: Project):
    """The project's latest accepted sessions with a response, newest first (the (project, status, -id) index)."""
    return (Session.objects.filter(project=project, status=SessionStatus.ACCEPTED).exclude(current_node=None)
            .order_by("-id").values("id", "item_id", "annotator__username",
                                    "current_node__origins")[:ORIGIN_SESSIONS_LISTED])


def _origin_sessions(project: Project) -> list[dict]:
    rows = list(latest_origin_sessions(project))
    listed = []
    for row in reversed(rows):
        origins = row["current_node__origins"] or []
        if origins:
            listed.append({"session": row["id"], "item": row["item_id"], "annotator": row["annotator__username"],
                           **{origin: origins.count(origin) / len(origins) for origin in ORIGINS}})
    return listed


def project_metrics(project: Project, *, origin_sessions: bool = True) -> dict:
    """All onPanda metrics of one project, as plain JSON.

    Keys:
    - accepted_sessions: how many sessions were accepted.
    - agreement: over items with >= 2 accepted sessions, every pair of their sessions:
      exact_match_rate and mean_abs_distance (tokens) of the first error positions, overall
      and per annotator (the pairs that involve them). Direct accept = response length.
    - origin_ratios: per accepted, non-empty response the share of model/candidate/typed
      tokens ("sessions": the latest ORIGIN_SESSIONS_LISTED accepted sessions, in id order; left out with
      `origin_sessions=False`), and the mean of those per-session ratios over every accepted response ("mean").
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
    accepted = tallies.figures(project.pk, ACCEPTED)
    agreement = accepted  # the pairs are kept in the same tally
    corrections = tallies.figures(project.pk, CORRECTIONS)
    candidates = tallies.figures(project.pk, CANDIDATES)
    zero = Figure(0)
    total = accepted.get("sessions", zero).count
    forks = [accepted.get(f"fork|{b}", zero).count for b in range(FORK_BINS)]
    origins = {origin: accepted.get(f"origin|{origin}", zero) for origin in ORIGINS}
    median, timed = _median_seconds(project.pk, accepted)

    per_annotator = _by_prefix(accepted, "annotator|")
    timed_by = _by_prefix(accepted, "timed|")
    pairs_by, matches_by = _by_prefix(agreement, "pairs|"), _by_prefix(agreement, "matches|")
    names = _names(set(per_annotator) | set(pairs_by))
    pairs = agreement.get("pairs", zero)

    top_k = (AnnotationConfig.objects.filter(project=project).values_list("top_k", flat=True).first()
             or AnnotationConfig._meta.get_field("top_k").default)
    ranks = {int(rank): figure.count for rank, figure in _by_prefix(candidates, "rank|").items()}
    k = max([top_k, *ranks])  # the project's top_k may have been lowered after some picks
    probabilities = [candidates.get(f"p|{b}", zero).count for b in range(PROBABILITY_BINS)]
    rounds = {int(n): figure.count for n, figure in _by_prefix(corrections, "round|").items()}

    def throughput(user_id: str) -> dict:
        timed_figure = timed_by.get(user_id, zero)
        hours = timed_figure.total / 1_000_000 / 3600
        return {"annotator": names.get(user_id, user_id), "accepted": per_annotator[user_id].count,
                "active_hours": hours, "accepted_per_hour": _rate(timed_figure.count, hours)}

    def agreement_of(user_id: str) -> dict:
        n, distance = pairs_by[user_id]
        return {"annotator": names.get(user_id, user_id), "pairs": n,
                "exact_match_rate": _rate(matches_by.get(user_id, zero).count, n),
                "mean_abs_distance": _rate(distance, n)}

    by_name = lambda rows: sorted(rows, key=lambda row: row["annotator"])  # noqa: E731
    return {
        "accepted_sessions": total,
        "agreement": {
            "items": agreement.get("items", zero).count,
            "pairs": pairs.count,
            "exact_match_rate": _rate(agreement.get("matches", zero).count, pairs.count),
            "mean_abs_distance": _rate(pairs.total, pairs.count),
            "per_annotator": by_name(agreement_of(user_id) for user_id in pairs_by),
            "note": "A direct accept counts as first error position = length of the accepted response.",
        },
        "origin_ratios": {
            **({"sessions": _origin_sessions(project)} if origin_sessions else {}),
            "mean": {origin: _rate(figure.total, figure.count) for origin, figure in origins.items()},
        },
        "fork_positions": {
            "edges": _edges(FORK_BINS),
            "counts": forks,
            "corrections": sum(forks),
            "first_token_modification_rate": _rate(accepted.get("first_token", zero).count, total),
        },
        "direct_accept_rate": _rate(accepted.get("direct", zero).count, total),
        "candidate_rank": {"labels": list(range(1, k + 1)), "counts": [ranks.get(rank, 0) for rank in range(1, k + 1)]},
        "candidate_probability": {"edges": _edges(PROBABILITY_BINS), "counts": probabilities},
        "corrections_per_item": _histogram({int(n): figure.count for n, figure
                                            in _by_prefix(accepted, "corrections|").items()}),
        "corrections_by_channel": {channel: figure.count for channel, figure
                                   in sorted(_by_prefix(corrections, "channel|").items())},
        "corrections_by_round": {str(n): rounds[n] for n in sorted(rounds)},
        "active_time": {
            "median_seconds": median,
            "sessions": timed,
            "excluded_over_7h": accepted.get("over_7h", zero).count,
        },
        "throughput": by_name(throughput(user_id) for user_id in per_annotator),
    }
