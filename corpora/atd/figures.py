"""The ATD workflow's kept figures: what the ATD page and the run APIs show, kept by the services that import
prompts, record scores and record teacher answers, so a page reads a few rows instead of counting every prompt and
score of a run (0.9-1.1 s at a million prompts).

- POOL, a project tally (dataplatform/tallies, "atd.pool"): the project's prompts by `candidates_origin` (imported,
  sampled, missing).
- A scoring run's figures, on its own row (`ScoringRun.figures`), not in a project tally: a project's tally would
  hold every run's cells, and a run is read alone (a project replicated to a million prompts has tens of thousands
  of runs; their cells in one tally were millions of rows to count on the first read):
  - "cells", "<d>|<b>": the run's scores in one cell of distance |q - 0.5| (bucket d of DISTANCE_BUCKETS a unit)
    by position bias (bucket b of BIAS_BUCKETS a unit, "n" with one order). The near-tie counts at any epsilon and
    bias threshold add up the whole cells inside both, and count only the cells they cut through from the scores
    (a q range and a bias range of one bucket each, on indexes): selectors.kept_count.
  - "bins", "<value>|<bin>": the histogram of each of HISTOGRAMMED over [0, 1] in HISTOGRAM_BINS bins.
- A teacher run's answers by status, on its row (`TeacherRun.answer_counts`): {"ok": n, "tie": n, "invalid": n}.

Both are kept by the service that writes the scores or answers, in its transaction, with the run's row locked; null
until the first read counts them (`run_figures`, `answer_counts`, under the same lock), so old runs need no
migration and `recount_*` repairs (and proves, in the tests) them.

A bucket is computed by the same floating-point expression in Python (when a service adds) and in SQL (the recount,
the selectors' edge queries): floor(abs(q - 0.5) * DISTANCE_BUCKETS), floor(bias * BIAS_BUCKETS), IEEE doubles both.
"""

import math
from collections import Counter

from django.db import transaction
from django.db.models import Count, F, FloatField, Value
from django.db.models.functions import Abs, Floor

from dataplatform.tallies import registry
from dataplatform.tallies.registry import Figure

from .models import AtdPrompt, Score, ScoringRun, TeacherAnswer, TeacherRun

DISTANCE_BUCKETS = 200  # per unit of |q - 0.5|: 101 buckets over [0, 0.5]
BIAS_BUCKETS = 20  # per unit of position bias: 21 over [0, 1]
HISTOGRAM_BINS = 20
HISTOGRAMMED = ("q", "q_ab", "q_ba", "position_bias")
NO_BIAS = "n"
# A NaN q or bias (the scorer never writes one; PostgreSQL would keep it, above every number): a cell of its own,
# inside no epsilon or threshold, as the near-tie rule keeps none; no histogram bin.
NOT_A_NUMBER = "x"


# --- buckets, in Python and in SQL alike ----------------------------------------------------------------------------

def distance_bucket(q: float) -> int | str:
    return NOT_A_NUMBER if math.isnan(q) else math.floor(abs(q - 0.5) * float(DISTANCE_BUCKETS))


def bias_bucket(position_bias: float | None) -> int | str:
    if position_bias is None:
        return NO_BIAS
    return NOT_A_NUMBER if math.isnan(position_bias) else math.floor(position_bias * float(BIAS_BUCKETS))


def histogram_bin(value: float) -> int | None:
    return None if math.isnan(value) else min(math.floor(value * float(HISTOGRAM_BINS)), HISTOGRAM_BINS - 1)


def _bucket(floored: float | None) -> int | str | None:
    """A bucket as the database floored it (a float, NaN for NaN, None for NULL), as the Python functions give it."""
    return None if floored is None else NOT_A_NUMBER if math.isnan(floored) else int(floored)


def distance_bucket_sql():
    return Floor(Abs(F("q") - Value(0.5, output_field=FloatField())) * Value(float(DISTANCE_BUCKETS)))


def bias_bucket_sql():
    return Floor(F("position_bias") * Value(float(BIAS_BUCKETS)))


def histogram_floor_sql(value: str):
    """floor(value * HISTOGRAM_BINS), as a float (NaN stays NaN; histogram_bin clips it to the last bin)."""
    return Floor(F(value) * Value(float(HISTOGRAM_BINS)))


def whole_buckets(limit: float, per_unit: int) -> int:
    """The most buckets (0 .. n-1) that lie wholly within [0, limit]: n with n / per_unit <= limit. A value in bucket
    < n is below n / per_unit (up to one rounding), so within the limit and its tolerance."""
    n = max(0, math.floor(limit * per_unit))
    while n and n / per_unit > limit:
        n -= 1
    return n


# --- a run's figures ---------------------------------------------------------------------------------------------------

def score_changes(scores: list[dict]) -> dict[str, dict[str, int]]:
    """The figures `scores` (each with q, q_ab, q_ba, position_bias) add to their run's."""
    cells: Counter = Counter()
    bins: Counter = Counter()
    for score in scores:
        cells[f"{distance_bucket(score['q'])}|{bias_bucket(score.get('position_bias'))}"] += 1
        for value in HISTOGRAMMED:
            if score.get(value) is not None and (bin_ := histogram_bin(score[value])) is not None:
                bins[f"{value}|{bin_}"] += 1
    return {"cells": dict(cells), "bins": dict(bins)}


def added(figures: dict, changes: dict[str, dict[str, int]]) -> dict:
    """`figures` with `changes` added (keys at zero dropped)."""
    merged = {}
    for part in ("cells", "bins"):
        counts = Counter(figures.get(part, {}))
        counts.update(changes.get(part, {}))
        merged[part] = {key: n for key, n in sorted(counts.items()) if n}
    return merged


def recount_run(run_id: int) -> dict:
    """A scoring run's figures from its scores."""
    scores = Score.objects.filter(run_id=run_id).order_by()
    cells = (scores.annotate(d=distance_bucket_sql(), b=bias_bucket_sql())
             .values_list("d", "b").annotate(n=Count("pk")).values_list("d", "b", "n"))
    figures: dict[str, dict[str, int]] = {"cells": {}, "bins": {}}
    for distance, bias, n in cells:
        key = f"{_bucket(distance)}|{NO_BIAS if bias is None else _bucket(bias)}"
        figures["cells"][key] = figures["cells"].get(key, 0) + n
    for value in HISTOGRAMMED:
        floors = (scores.filter(**{f"{value}__isnull": False}).annotate(floor=histogram_floor_sql(value))
                  .values_list("floor").annotate(n=Count("pk")).values_list("floor", "n"))
        for floor, n in floors:
            if not math.isnan(floor):
                key = f"{value}|{min(int(floor), HISTOGRAM_BINS - 1)}"
                figures["bins"][key] = figures["bins"].get(key, 0) + n
    return added(figures, {})


def add_scores(run_id: int, scores: list[dict]) -> None:
    """Add newly written scores to their run's figures: inside the transaction that wrote them, with the run's row
    locked by the caller (services.score_prompts), so no other writer or first count comes between."""
    kept = ScoringRun.objects.filter(pk=run_id).values_list("figures", flat=True).first()
    if kept is not None:  # still null: the first read counts them, these scores with them
        ScoringRun.objects.filter(pk=run_id).update(figures=added(kept, score_changes(scores)))


def run_figures(run: ScoringRun) -> dict:
    """The run's kept figures; the first read counts them, under a lock on the run's row (as its writers take)."""
    if run.figures is None:
        with transaction.atomic():
            kept = ScoringRun.objects.select_for_update().filter(pk=run.pk).values_list("figures", flat=True).first()
            if kept is None:
                kept = recount_run(run.pk)
                ScoringRun.objects.filter(pk=run.pk).update(figures=kept)
        run.figures = kept
    return run.figures


# --- a teacher run's answers -------------------------------------------------------------------------------------------

ANSWER_STATUSES = ("ok", "tie", "invalid")


def recount_answers(teacher_run_ids: list[int]) -> dict[int, dict[str, int]]:
    """{teacher run id: its answers by status}, counted from the answers."""
    counts: dict[int, dict[str, int]] = {run_id: dict.fromkeys(ANSWER_STATUSES, 0) for run_id in teacher_run_ids}
    for run_id, status, n in (TeacherAnswer.objects.filter(run_id__in=teacher_run_ids).order_by()
                              .values_list("run_id", "status").annotate(n=Count("pk"))
                              .values_list("run_id", "status", "n")):
        counts[run_id][status] = n
    return counts


def add_answers(teacher_run_id: int, statuses: list[str]) -> None:
    """Add newly written answers to their run's counts (inside their transaction, the run's row locked)."""
    kept = TeacherRun.objects.filter(pk=teacher_run_id).values_list("answer_counts", flat=True).first()
    if kept is not None:
        changes = Counter(statuses)
        TeacherRun.objects.filter(pk=teacher_run_id).update(
            answer_counts={status: kept.get(status, 0) + changes[status] for status in ANSWER_STATUSES})


def answer_counts(runs: list[TeacherRun]) -> dict[int, dict[str, int]]:
    """{teacher run id: its answers by status}, kept; the first read counts those not counted yet, together (three
    queries for a page of runs), under a lock on their rows."""
    uncounted = sorted(run.pk for run in runs if run.answer_counts is None)
    if uncounted:
        with transaction.atomic():
            locked = dict(TeacherRun.objects.select_for_update().filter(pk__in=uncounted).order_by("pk")
                          .values_list("pk", "answer_counts"))
            recounted = recount_answers([pk for pk, kept in locked.items() if kept is None])
            TeacherRun.objects.bulk_update([TeacherRun(pk=pk, answer_counts=kept) for pk, kept in recounted.items()],
                                           ["answer_counts"])
            locked.update(recounted)
        for run in runs:
            if run.answer_counts is None:
                run.answer_counts = locked.get(run.pk)
    return {run.pk: run.answer_counts for run in runs}


# --- the pool ---------------------------------------------------------------------------------------------------------

def _recount_pool(project_id: int) -> dict[str, Figure]:
    rows = (AtdPrompt.objects.filter(project_id=project_id).order_by().values_list("candidates_origin")
            .annotate(n=Count("pk")).values_list("candidates_origin", "n"))
    return {origin: Figure(n) for origin, n in rows}


POOL = registry.define("atd.pool", tables=(AtdPrompt,), recount=_recount_pool)
