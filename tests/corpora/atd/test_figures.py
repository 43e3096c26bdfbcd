"""The ATD workflow's kept figures (corpora/atd/figures.py) equal their recount and give what the old whole-run
counts gave: the pool's prompts by origin, a run's near-tie counts at any epsilon and bias threshold and its four
histograms, a teacher run's answers by status, after every service that changes them and after random sequences
of those services (hypothesis), on random scores."""

import itertools
import json
import math
import random

import pytest
from django.db.models import Count, F, IntegerField, Q
from django.db.models.functions import Cast, Floor, Least
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpora.atd import figures, importers, selectors, services
from corpora.atd.models import AtdPrompt, Score, ScoringRun, TeacherAnswer, TeacherRun
from corpora.atd.selectors import NEAR_TIE_TOLERANCE
from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Role
from dataplatform.inference import TokenStep
from dataplatform.tallies import registry
from dataplatform.tallies import selectors as tallies

from ...doubles import JudgeDouble, RecordingProgress

pytestmark = pytest.mark.django_db

# Epsilons and thresholds on bucket edges (the defaults), inside buckets, and at the edges' float neighbours.
EPSILONS = [0, 0.001, 0.005, 0.0137, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2, 0.25, 0.3333, 0.5]
THRESHOLDS = [None, 0, 0.01, 0.05, 0.1, 0.13, 0.2, 0.35, 0.5, 1.0]


# --- the old computations, over every score of the run: the oracle ---------------------------------------------------

def counted_kept(run, epsilon, threshold):
    return selectors.near_ties(Score.objects.filter(run=run), epsilon, threshold).count()


def counted_biased(run, epsilon, threshold):
    close = selectors.near_ties(Score.objects.filter(run=run), epsilon, None)
    return close.exclude(Q(position_bias__isnull=True) | Q(position_bias__lte=threshold + NEAR_TIE_TOLERANCE)).count()


def counted_histogram(run, value, bins=20):
    bucket = Least(Cast(Floor(F(value) * float(bins)), IntegerField()), bins - 1)
    counts = dict(Score.objects.filter(run=run, **{f"{value}__isnull": False}).order_by().annotate(bucket=bucket)
                  .values_list("bucket").annotate(n=Count("pk")).values_list("bucket", "n"))
    return [{"lo": i / bins, "hi": (i + 1) / bins, "count": counts.get(i, 0)} for i in range(bins)]


def counted_pool(project):
    prompts = AtdPrompt.objects.filter(project=project)
    return {"prompts": prompts.count(), "missing": prompts.filter(candidates_origin="missing").count()}


def counted_answers(teacher_run):
    by_status = dict(TeacherAnswer.objects.filter(run=teacher_run).values_list("status").annotate(n=Count("pk"))
                     .values_list("status", "n"))
    return {"ok": by_status.get("ok", 0), "tie": by_status.get("tie", 0), "invalid": by_status.get("invalid", 0),
            "answered": sum(by_status.values())}


def assert_kept_equal_recount(project, curator, runs=(), teacher_runs=()):
    recounted = registry.definition(figures.POOL).recount(project.pk)
    assert tallies.counts(project.pk, figures.POOL) == {key: figure.count for key, figure in recounted.items()}
    assert selectors.pool_counts(curator, project) == counted_pool(project)
    for run in runs:
        run = ScoringRun.objects.get(pk=run.pk)
        assert figures.run_figures(run) == figures.recount_run(run.pk)
        assert selectors.scored_count(run) == Score.objects.filter(run=run).count()
    for teacher_run in teacher_runs:
        teacher_run = TeacherRun.objects.get(pk=teacher_run.pk)
        assert selectors.teacher_counts(teacher_run) == counted_answers(teacher_run)
        assert teacher_run.answer_counts == figures.recount_answers([teacher_run.pk])[teacher_run.pk]


def assert_same_as_counted(run, epsilons=EPSILONS, thresholds=THRESHOLDS):
    run = ScoringRun.objects.get(pk=run.pk)
    for epsilon in epsilons:
        for threshold in thresholds:
            assert selectors.kept_count(run, epsilon, threshold) == counted_kept(run, epsilon, threshold), (
                epsilon, threshold)
            if threshold is not None:
                assert selectors.biased_count(run, epsilon, threshold) == counted_biased(run, epsilon, threshold)
    for value in selectors.HISTOGRAM_VALUES:
        assert selectors.q_histogram(run, value=value) == counted_histogram(run, value)


# --- data -------------------------------------------------------------------------------------------------------------

def prompts(project, n, start=0):
    return AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"f{start + i}", messages=[{"role": "user", "content": "?"}],
                  candidate_a="a", candidate_b="b", source_sha256="0" * 64) for i in range(n)])


def edgy(rng: random.Random) -> float:
    """A q or bias in [0, 1], often on a bucket's edge or its float neighbours (where buckets and the rule split)."""
    roll = rng.random()
    if roll < 0.3:
        edge = rng.randrange(0, 201) / 200
        return min(1.0, max(0.0, rng.choice([edge, math.nextafter(edge, 0), math.nextafter(edge, 1), 0.5 + edge / 2,
                                            0.5 - edge / 2])))
    if roll < 0.5:
        return 0.5 + rng.choice([-1, 1]) * rng.choice(EPSILONS)
    return rng.random()


def score_row(rng: random.Random, both_orders: bool) -> dict:
    q_ab = edgy(rng)
    if not both_orders:
        return {"q": q_ab, "q_ab": q_ab, "q_ba": None, "position_bias": None, "logprobs": {}}
    return {"q": edgy(rng), "q_ab": q_ab, "q_ba": edgy(rng), "position_bias": edgy(rng), "logprobs": {}}


def record(run, batch, rng):
    services.record_scores(run, batch, [score_row(rng, run.debias) for _ in batch])


# --- every service that changes a kept figure -----------------------------------------------------------------------

class SamplingDouble:
    """Two different answers per prompt for sample_candidates, except for prompts whose text asks for "same"."""

    model_id = "sampling-double"

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        return [1 if "same" in messages[-1]["content"] else 2]

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        for index, ids in enumerate(prompts):
            letter = 120 if ids == [1] else 97 + index % 2
            yield index, [TokenStep(token_id=letter, logprob=-1.0), TokenStep(token_id=0, logprob=-0.1,
                                                                               finish_reason="stop")]

    def detokenize(self, ids):
        return "".join(chr(i) for i in ids if i)


def test_every_service_keeps_the_figures(project, members, use_backend):
    curator = members["curator"]
    assert selectors.pool_counts(curator, project) == {"prompts": 0, "missing": 0}  # counted now: empty
    lines = [json.dumps({"id": f"p{n}", "prompt": "Which?", "candidates": [f"a{pct}", f"b{100 - pct}"]})
             for n, pct in enumerate([50, 51, 52, 49, 70, 48])]
    lines += [json.dumps({"id": f"m{n}", "prompt": "same" if n else "Name one."}) for n in range(2)]
    assert importers.import_prompts(project=project, lines=lines, user=curator).created == 8
    assert selectors.pool_counts(curator, project) == counted_pool(project) == {"prompts": 8, "missing": 2}
    use_backend(SamplingDouble())
    services.sample_candidates(project=project, progress=RecordingProgress(), tries=1)
    assert selectors.pool_counts(curator, project) == counted_pool(project) == {"prompts": 8, "missing": 1}
    run = services.start_scoring(project=project, batch_size=3, user=curator, publish=False)
    selectors.scored_count(run)  # counted now, before any score: the service keeps it from here
    use_backend(JudgeDouble())
    services.score_prompts(run=run, progress=RecordingProgress())
    assert_kept_equal_recount(project, curator, [run])
    assert selectors.scored_count(ScoringRun.objects.get(pk=run.pk)) == 7
    # A resumed job writes again what is there: its repeats are no score, and no figure.
    rng = random.Random(1)
    record(run, list(AtdPrompt.objects.filter(project=project).exclude(candidates_origin="missing")), rng)
    assert_kept_equal_recount(project, curator, [run])
    assert_same_as_counted(run)
    selection = services.freeze_selection(run=run, name="ties", epsilon=0.05, user=curator)
    teacher = services.start_teacher(selection=selection, mode="logprobs", user=curator, publish=False)
    assert selectors.teacher_counts(teacher)["answered"] == 0  # counted now
    services.ask_teacher(run=teacher, progress=RecordingProgress(), batch_size=2)
    services.record_answers(teacher, [item.prompt for item in selection.items.all()],
                            [{"bit": "", "status": "invalid"} for _ in range(selection.size)])  # all repeats
    assert_kept_equal_recount(project, curator, [run], [teacher])
    assert selectors.teacher_counts(TeacherRun.objects.get(pk=teacher.pk))["answered"] == selection.size


def test_figures_counted_on_first_read_then_kept(project, members):
    curator = members["curator"]
    rng = random.Random(7)
    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    batch = prompts(project, 30)
    record(run, batch[:10], rng)  # before any read: the first read counts them
    assert ScoringRun.objects.get(pk=run.pk).figures is None
    record(run, batch[5:20], rng)
    assert_kept_equal_recount(project, curator, [run])
    record(run, batch[15:], rng)
    assert_kept_equal_recount(project, curator, [run])
    assert ScoringRun.objects.get(pk=run.pk).figures["cells"]  # kept on the run's row


@pytest.mark.parametrize("both_orders", [True, False], ids=["debiased", "one order"])
def test_near_tie_counts_and_histograms_as_counted_over_random_scores(project, both_orders):
    rng = random.Random(46 + both_orders)
    run = ScoringRun.objects.create(project=project, template_version="judge-v1", debias=both_orders)
    batch = prompts(project, 400)
    for start in range(0, 400, 97):
        record(run, batch[start:start + 97], rng)
        if start == 0:
            selectors.scored_count(run)  # counted after the first batch, kept after
    assert_same_as_counted(run)
    run = ScoringRun.objects.get(pk=run.pk)  # its figures as kept now (a run read before holds those it read)
    for _ in range(40):  # and at random epsilons and thresholds
        epsilon, threshold = rng.uniform(0, 0.5), rng.choice([None, rng.uniform(0, 1)])
        assert selectors.kept_count(run, epsilon, threshold) == counted_kept(run, epsilon, threshold)


def test_whole_buckets_never_reach_past_the_limit():
    for limit in [0, 0.005, 0.02, 0.03, 0.07, 0.29, 0.5, 1.0] + [random.Random(3).random() for _ in range(200)]:
        for per_unit in (figures.DISTANCE_BUCKETS, figures.BIAS_BUCKETS):
            n = figures.whole_buckets(limit, per_unit)
            assert n / per_unit <= limit and (n + 1) / per_unit > limit - 1e-12


# --- random sequences of the services (hypothesis) ----------------------------------------------------------------

PROJECTS = itertools.count()
STEPS = st.lists(st.tuples(st.sampled_from(["import", "sample", "score", "answer", "read"]),
                           st.integers(min_value=0, max_value=2**32 - 1)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=STEPS)
def test_random_sequences_keep_figures_equal_to_their_recount(members, use_backend, steps):
    project = account_services.create_project(slug=f"h{next(PROJECTS)}", name="hypothesis")
    curator = members["curator"]
    account_services.set_membership(project=project, user=curator, role=Role.CURATOR)
    use_backend(SamplingDouble())
    runs = [ScoringRun.objects.create(project=project, template_version="judge-v1", debias=debias)
            for debias in (True, False)]
    selection = None
    teacher_runs = []
    for step, seed in steps:
        rng = random.Random(seed)
        if step == "import":
            start = AtdPrompt.objects.filter(project=project).count()
            lines = [json.dumps({"id": f"x{start + n}", "prompt": "same" if rng.random() < 0.3 else "Q?",
                                 **({"candidates": ["a", "b"]} if rng.random() < 0.6 else {})})
                     for n in range(rng.randrange(1, 6))]
            importers.import_prompts(project=project, lines=lines, user=curator)
        elif step == "sample":
            services.sample_candidates(project=project, progress=RecordingProgress(), tries=1)
        elif step == "score":
            run = rng.choice(runs)
            pool = list(AtdPrompt.objects.filter(project=project))
            record(run, rng.sample(pool, rng.randrange(0, len(pool) + 1)), rng)
        elif step == "answer":
            if selection is None and Score.objects.filter(run=runs[0]).exists():
                selection = services.freeze_selection(run=runs[0], name="s", epsilon=0.5, user=curator,
                                                      include_biased=True)
                teacher_runs = [TeacherRun.objects.create(selection=selection, mode=mode)
                                for mode in ("one_word", "logprobs")]
            if teacher_runs:
                chosen = rng.sample([item.prompt for item in selection.items.all()],
                                    rng.randrange(0, selection.size + 1))
                services.record_answers(rng.choice(teacher_runs), chosen, [
                    {"bit": "", "status": rng.choice(figures.ANSWER_STATUSES)} for _ in chosen])
        else:  # a first read between changes
            for run in runs:
                selectors.scored_count(ScoringRun.objects.get(pk=run.pk))
        assert_kept_equal_recount(project, curator, runs, teacher_runs)
    for run in runs:
        assert_same_as_counted(run, epsilons=[0, 0.02, 0.0137, 0.5], thresholds=[None, 0.2, 0.13])


@pytest.mark.postgres_only("the plans are PostgreSQL's")
def test_the_cut_cells_are_read_on_their_indexes(project):
    """A run of 20,000 scores (written by SQL: the plan is the point), ANALYZEd: each cut-cell count walks its range
    index, not every score of the run."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    with connection.cursor() as cursor:
        cursor.execute("""INSERT INTO corpora_atdprompt (project_id, external_id, messages, candidate_a, candidate_b,
                              candidates_origin, meta, source_sha256, created_at)
                          SELECT %s, 'g' || n, '[]', 'a', 'b', 'imported', '{}', '', now()
                          FROM generate_series(1, 20000) n""", [project.pk])
        cursor.execute("""INSERT INTO corpora_score (run_id, prompt_id, q, q_ab, position_bias, logprobs,
                              logprobs_json, created_at)
                          SELECT %s, id, random(), random(), random(), '{}', '{}', now()
                          FROM corpora_atdprompt WHERE project_id = %s""", [run.pk, project.pk])
        cursor.execute("ANALYZE corpora_score")
    selectors.scored_count(run)  # the first read counts the run's figures
    with CaptureQueriesContext(connection) as captured:
        kept = selectors.kept_count(run, 0.0137, 0.13)
    assert kept == counted_kept(run, 0.0137, 0.13)
    counts = [query["sql"] for query in captured.captured_queries if "COUNT(" in query["sql"]]
    assert len(counts) == 2, counts
    for sql, index in zip(counts, ["score_run_q", "score_run_bias"], strict=True):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert f"on {index}" in plan and "Seq Scan" not in plan, plan
