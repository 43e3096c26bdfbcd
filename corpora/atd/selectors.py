"""Reads of the ATD workflow: the prompt pool, scoring runs and their scores, selections, teacher runs.

Curation is curators' and admins' work: the selectors take the user (and the API token) and scope to
the projects where they curate, so anyone else gets nothing from the lists and a 404 from the `_for`
lookups. The scoping is a subquery of the same statement, so it costs no query of its own.

The near-tie rule is defined here, once: a score is a near tie at epsilon when |q - 0.5| <= epsilon,
up to NEAR_TIE_TOLERANCE, and, scored in both orders, its position bias |q_ab - (1 - q_ba)| is at most the
bias threshold (a judge that always prefers one position gives q = 0.5 without meaning a tie). The tie
counts, their sample and the frozen selections all read `near_ties`, and the scored export's `distance`
column is `tie_distance`.
"""

from django.db.models import F, Prefetch, Q, QuerySet
from django.db.models.functions import Abs
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext_lazy

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_CURATE, visible_projects
from dataplatform.tallies import selectors as tallies

from . import figures
from .models import AtdPrompt, Score, ScoringRun, Selection, TeacherRun

# Absorbs float rounding at the edge: q = 0.52 is a near tie at epsilon = 0.02, although 0.52 - 0.5 is
# 0.020000000000000018; q = 0.5200001 is not.
NEAR_TIE_TOLERANCE = 1e-12
HISTOGRAM_BINS = figures.HISTOGRAM_BINS
DEFAULT_BIAS_THRESHOLD = 0.2
HISTOGRAM_VALUES = {"q": gettext_lazy("q (both orders, debiased)"), "q_ab": gettext_lazy("q_ab (A shown first)"),
                    "q_ba": gettext_lazy("q_ba (B shown first)"),
                    "position_bias": gettext_lazy("position bias |q_ab − (1 − q_ba)|")}


def _curated_by(user, token: ApiToken | None) -> QuerySet[Project]:
    return visible_projects(user, roles=CAN_CURATE, token=token)


def prompts_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[AtdPrompt]:
    return AtdPrompt.objects.filter(project=project, project__in=_curated_by(user, token))


def pool_counts(user, project: Project) -> dict[str, int]:
    """How many prompts the pool holds, and how many of them still have no candidates (kept figures), where `user`
    curates the project (else none)."""
    if not _curated_by(user, None).filter(pk=project.pk).exists():
        return {"prompts": 0, "missing": 0}
    by_origin = tallies.counts(project.pk, figures.POOL)
    return {"prompts": sum(by_origin.values()), "missing": by_origin.get("missing", 0)}


def runs_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[ScoringRun]:
    """The project's scoring runs, newest first, with their jobs."""
    return ScoringRun.objects.filter(project=project, project__in=_curated_by(user, token)).select_related("job")


def run_for(user, project: Project, run_id: int, *, token: ApiToken | None = None) -> ScoringRun:
    return get_object_or_404(runs_visible_to(user, project, token=token), pk=run_id)


def selections_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[Selection]:
    """The project's frozen selections, newest first."""
    return Selection.objects.filter(project=project, project__in=_curated_by(user, token))


def selections_with_teacher_runs(user, project: Project) -> QuerySet[Selection]:
    """The selections with their scoring runs and their teacher runs (newest first, with their jobs)."""
    teacher_runs = TeacherRun.objects.select_related("job").order_by("-id")
    return (selections_visible_to(user, project).select_related("run")
            .prefetch_related(Prefetch("teacher_runs", queryset=teacher_runs)))


def selection_for(user, project: Project, selection_id: int, *, token: ApiToken | None = None) -> Selection:
    return get_object_or_404(selections_visible_to(user, project, token=token), pk=selection_id)


def teacher_run_for(user, project: Project, teacher_run_id: int, *, token: ApiToken | None = None) -> TeacherRun:
    runs = TeacherRun.objects.filter(selection__project=project, selection__project__in=_curated_by(user, token))
    return get_object_or_404(runs.select_related("job"), pk=teacher_run_id)


# --- what a run has scored (the run comes from the selectors above) ------------------------------------

def _cells(run: ScoringRun) -> list[tuple[int, int | None, int]]:
    """[(distance bucket, bias bucket or None, count)] of the run's kept figures (counted on the first read)."""
    cells = []
    for key, count in figures.run_figures(run)["cells"].items():
        distance, bias = key.split("|")
        cells.append((_NEVER_INSIDE if distance == figures.NOT_A_NUMBER else int(distance),
                      None if bias == figures.NO_BIAS else _NEVER_INSIDE if bias == figures.NOT_A_NUMBER else int(bias),
                      count))
    return cells


def scored_count(run: ScoringRun) -> int:
    return sum(count for _, _, count in _cells(run))


def pool_size(run: ScoringRun) -> int:
    """The prompts of the run's project that have two candidates: what the run scores in the end."""
    by_origin = tallies.counts(run.project_id, figures.POOL)
    return sum(by_origin.values()) - by_origin.get("missing", 0)


# Index bounds a little wider than a bucket's edge, which the exact bucket filter then draws: the range condition only
# lets the index skip what no cut cell holds.
_INDEX_SLACK = 1e-9
_NEVER_INSIDE = 10**9  # a NaN cell's bucket: past every epsilon and threshold


def tie_distance() -> Abs:
    """|q - 0.5| of a score, computed by the database."""
    return Abs(F("q") - 0.5)


def _close_by_q(scores: QuerySet[Score], epsilon: float) -> QuerySet[Score]:
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    limit = epsilon + NEAR_TIE_TOLERANCE
    return scores.filter(q__gte=0.5 - limit, q__lte=0.5 + limit)


def _unbiased(bias_threshold: float) -> Q:
    """Scored in one order (no bias known), or both orders agreeing within the threshold."""
    return Q(position_bias__isnull=True) | Q(position_bias__lte=bias_threshold + NEAR_TIE_TOLERANCE)


def near_ties(scores: QuerySet[Score], epsilon: float, bias_threshold: float | None = DEFAULT_BIAS_THRESHOLD
              ) -> QuerySet[Score]:
    """The scores with |q - 0.5| <= epsilon (up to NEAR_TIE_TOLERANCE) whose position bias is at most
    `bias_threshold` (None: whatever their bias): the near-tie rule.

    Written as a range of q so that the (run, q) index finds them. ValueError for a negative epsilon."""
    close = _close_by_q(scores, epsilon)
    return close if bias_threshold is None else close.filter(_unbiased(bias_threshold))


def kept_count(run: ScoringRun, epsilon: float, bias_threshold: float | None = DEFAULT_BIAS_THRESHOLD) -> int:
    """How many scores of the run are near ties at epsilon (`near_ties`), whatever the run's size: the kept cells
    wholly inside epsilon and the threshold, plus the scores of the cells they cut through, counted on the
    (run, q) and (run, position_bias) indexes (one bucket's width each; none when epsilon and the threshold fall
    on bucket edges, as the defaults do)."""
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    distances = figures.whole_buckets(epsilon, figures.DISTANCE_BUCKETS)
    biases = None if bias_threshold is None else figures.whole_buckets(bias_threshold, figures.BIAS_BUCKETS)
    inside = sum(count for distance, bias, count in _cells(run)
                 if distance < distances and (biases is None or bias is None or bias < biases))
    scores = Score.objects.filter(run=run)
    # The cut distance cells: |q - 0.5| from the whole buckets' edge to epsilon, on either side of 0.5.
    edge = distances / figures.DISTANCE_BUCKETS - _INDEX_SLACK
    limit = epsilon + NEAR_TIE_TOLERANCE  # the near-tie rule's range of q (near_ties), cut to its two edges
    cut = scores.filter(Q(q__gte=0.5 - limit, q__lte=0.5 - edge) | Q(q__gte=0.5 + edge, q__lte=0.5 + limit))
    if bias_threshold is not None:
        cut = cut.filter(_unbiased(bias_threshold))
    cut_distance = cut.alias(distance=figures.distance_bucket_sql()).filter(distance__gte=distances).count()
    cut_bias = 0
    if biases is not None:  # the cut bias cells, within the whole distance buckets
        cut_bias = (scores.filter(position_bias__gte=biases / figures.BIAS_BUCKETS - _INDEX_SLACK,
                                  position_bias__lte=bias_threshold + NEAR_TIE_TOLERANCE)
                    .alias(bias=figures.bias_bucket_sql(), distance=figures.distance_bucket_sql())
                    .filter(bias__gte=biases, distance__lt=distances).count())
    return inside + cut_distance + cut_bias


def biased_count(run: ScoringRun, epsilon: float, bias_threshold: float) -> int:
    """How many scores are near ties by q alone but left out as position-biased."""
    return kept_count(run, epsilon, None) - kept_count(run, epsilon, bias_threshold)


def near_tie_sample(run: ScoringRun, epsilon: float, size: int,
                    bias_threshold: float | None = DEFAULT_BIAS_THRESHOLD) -> list[Score]:
    """The first `size` near ties of the run by q, with their prompts."""
    return list(near_ties(Score.objects.filter(run=run), epsilon, bias_threshold).select_related("prompt")
                .order_by("q", "id")[:size])


def q_histogram(run: ScoringRun, bins: int = HISTOGRAM_BINS, value: str = "q") -> list[dict]:
    """[{lo, hi, count}] of `value` (HISTOGRAM_VALUES: q, either order's raw q, or the position bias) over [0, 1]
    in `bins` bins (edges i / bins; the last also holds 1), from the kept figures; scores without the value are not
    counted."""
    if value not in HISTOGRAM_VALUES:
        raise ValueError(f"value must be one of {', '.join(HISTOGRAM_VALUES)}, got {value!r}")
    if bins != figures.HISTOGRAM_BINS:
        raise ValueError(f"the kept histograms have {figures.HISTOGRAM_BINS} bins, not {bins}")
    kept = figures.run_figures(run)["bins"]
    return [{"lo": i / bins, "hi": (i + 1) / bins, "count": kept.get(f"{value}|{i}", 0)}
            for i in range(bins)]


def teacher_counts(run: TeacherRun) -> dict[str, int]:
    """The teacher's answers so far by status (ok, tie, invalid), and in all."""
    return teacher_counts_of([run])[run.pk]


def teacher_counts_of(runs: list[TeacherRun]) -> dict[int, dict[str, int]]:
    """`teacher_counts` of several runs, by run id, kept on their rows (a page lists many)."""
    return {run_id: {**counts, "answered": sum(counts.values())}
            for run_id, counts in figures.answer_counts(runs).items()}
