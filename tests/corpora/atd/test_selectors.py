"""ATD reads: every selector scopes to the projects where the user curates, and the near-tie rule
(|q - 0.5| <= epsilon, up to NEAR_TIE_TOLERANCE) as the database applies it for the tie counts, their
sample and the frozen selections."""

import random

import pytest
from django.db import IntegrityError, connection, transaction
from django.http import Http404

from corpora.atd import selectors, services
from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherAnswer, TeacherRun
from corpora.atd.selectors import NEAR_TIE_TOLERANCE
from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Membership, Role

pytestmark = pytest.mark.django_db


def run_with(project, qs) -> ScoringRun:
    """A scoring run of `project` with one score per q (each on a prompt of its own)."""
    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    prompts = AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"run-{run.pk}-{n}", messages=[{"role": "user", "content": "?"}],
                  candidate_a="a", candidate_b="b", source_sha256="0" * 64) for n in range(len(qs))])
    Score.objects.bulk_create([Score(run=run, prompt=prompt, q=q, q_ab=q) for prompt, q in zip(prompts, qs,
                                                                                               strict=True)])
    return run


@pytest.fixture
def near_tie(project):
    """near_tie(q, epsilon): whether the database keeps a score of q as a near tie at epsilon."""
    def kept(q: float, epsilon: float) -> bool:
        return selectors.near_ties(Score.objects.filter(run=run_with(project, [q])), epsilon).exists()
    return kept


@pytest.fixture
def kept_counts(project):
    """kept_counts(qs, epsilons): {epsilon: the tie count of a run scoring qs}."""
    def counts(qs: list[float], epsilons: list[float]) -> dict[float, int]:
        run = run_with(project, qs)
        return {epsilon: selectors.kept_count(run, epsilon) for epsilon in epsilons}
    return counts


# --- the near-tie rule -----------------------------------------------------------------------------

EPSILONS = [0.0, 0.01, 0.02, 0.05, 0.1, 0.1 + 0.2, 0.15, 0.3, 0.45, 0.5]


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_q_exactly_at_the_boundary_is_kept_and_just_beyond_is_not(near_tie, epsilon):
    assert near_tie(0.5 + epsilon, epsilon)
    assert near_tie(0.5 - epsilon, epsilon)
    assert not near_tie(0.5 + epsilon + 1e-7, epsilon)
    assert not near_tie(0.5 - epsilon - 1e-7, epsilon)
    assert near_tie(0.5, epsilon)


def test_near_tie_literal_boundaries(near_tie):
    assert 0.52 - 0.5 > 0.02  # the float rounding the tolerance is there for
    assert near_tie(0.52, 0.02) and near_tie(0.48, 0.02)
    assert not near_tie(0.5200001, 0.02) and not near_tie(0.4799999, 0.02)
    assert near_tie(0.6, 0.1) and near_tie(0.4, 0.1)
    assert not near_tie(0.6000001, 0.1)
    assert near_tie(0.8, 0.1 + 0.2) and near_tie(0.2, 0.1 + 0.2)
    assert near_tie(0.8, 0.3) and not near_tie(0.8000001, 0.3)
    assert near_tie(0.0, 0.5) and near_tie(1.0, 0.5)
    with pytest.raises(ValueError):
        near_tie(0.5, -0.01)


def test_kept_counts_per_epsilon(kept_counts):
    qs = [0.5, 0.52, 0.48, 0.5200001, 0.6, 0.4, 0.9, 0.1, 0.0, 1.0]
    # eps 0: only 0.5; 0.02: + 0.52, 0.48; 0.1: + 0.5200001, 0.6, 0.4; 0.5: everything
    assert kept_counts(qs, [0.0, 0.02, 0.1, 0.5]) == {0.0: 1, 0.02: 3, 0.1: 6, 0.5: 10}
    assert kept_counts([], [0.1]) == {0.1: 0}


def test_a_nan_q_is_never_a_near_tie(project, kept_counts):
    """The scorer never writes one (corpora/atd/scoring.py refuses NaN logprobs); were one written, PostgreSQL
    keeps NaN, above every number, so no range of q holds it; SQLite stores NaN as NULL, which q refuses."""
    if connection.vendor == "sqlite":
        with pytest.raises(IntegrityError, match="NOT NULL"), transaction.atomic():
            run_with(project, [0.5, float("nan")])
        assert not Score.objects.exists()
    else:
        assert kept_counts([0.5, float("nan")], [0.5]) == {0.5: 1}


def test_the_counts_the_sample_and_the_freeze_keep_the_same_scores(project, members):
    """One rule: the tie count, the sample under it and a frozen selection agree with |q - 0.5| <= epsilon
    (up to the tolerance) on random scores and on scores right at each boundary."""
    rng = random.Random(7)
    qs = [rng.random() for _ in range(500)] + [0.5 + e for e in EPSILONS] + [0.5 - e for e in EPSILONS]
    run = run_with(project, qs)
    for epsilon in EPSILONS:
        expected = sorted(q for q in qs if abs(q - 0.5) <= epsilon + NEAR_TIE_TOLERANCE)
        assert selectors.kept_count(run, epsilon) == len(expected)
        assert [score.q for score in selectors.near_tie_sample(run, epsilon, 5)] == expected[:5]
        selection = services.freeze_selection(run=run, name="ties", epsilon=epsilon, user=members["curator"])
        assert selection.size == len(expected)
        assert sorted(selection.items.values_list("q", flat=True)) == expected


def test_tie_distance_is_computed_as_python_computes_it(project):
    qs = [0.0, 0.1, 0.48, 0.5, 0.52, 0.5200001, 0.7, 1.0]
    run_with(project, qs)
    distances = Score.objects.filter(run__project=project).annotate(distance=selectors.tie_distance())
    assert sorted((score.q, score.distance) for score in distances) == [(q, abs(q - 0.5)) for q in qs]


# --- scoped to curators -------------------------------------------------------------------------------

@pytest.fixture
def world(project, other_project):
    run = run_with(project, [0.5, 0.9])
    selection = Selection.objects.create(project=project, run=run, name="ties", version=1, epsilon=0.02, size=0)
    teacher = TeacherRun.objects.create(selection=selection)
    TeacherAnswer.objects.create(run=teacher, prompt=AtdPrompt.objects.filter(project=project).first(), bit="A",
                                 status="ok")
    run_with(other_project, [0.5])
    return {"run": run, "selection": selection, "teacher": teacher}


@pytest.mark.parametrize("who", ["admin", "curator"])
def test_curators_read_their_projects_pool_runs_and_selections(world, project, members, who):
    user = members[who]
    assert selectors.prompts_visible_to(user, project).count() == 2
    assert selectors.pool_counts(user, project) == {"prompts": 2, "missing": 0}
    assert list(selectors.runs_visible_to(user, project)) == [world["run"]]
    assert selectors.run_for(user, project, world["run"].pk) == world["run"]
    assert selectors.selection_for(user, project, world["selection"].pk) == world["selection"]
    [selection] = selectors.selections_with_teacher_runs(user, project)
    assert list(selection.teacher_runs.all()) == [world["teacher"]]
    assert selectors.teacher_run_for(user, project, world["teacher"].pk) == world["teacher"]
    assert selectors.teacher_counts(world["teacher"]) == {"ok": 1, "tie": 0, "invalid": 0, "answered": 1}


@pytest.mark.parametrize("who", ["annotator", "trainer", "outsider"])
def test_everyone_else_reads_nothing(world, project, members, who):
    user = members[who]
    assert not selectors.prompts_visible_to(user, project).exists()
    assert selectors.pool_counts(user, project) == {"prompts": 0, "missing": 0}
    assert not selectors.runs_visible_to(user, project).exists()
    assert not selectors.selections_visible_to(user, project).exists()
    for lookup in (lambda: selectors.run_for(user, project, world["run"].pk),
                   lambda: selectors.selection_for(user, project, world["selection"].pk),
                   lambda: selectors.teacher_run_for(user, project, world["teacher"].pk)):
        with pytest.raises(Http404):
            lookup()


def test_another_projects_objects_are_not_found(world, project, other_project, members):
    curator = members["curator"]
    other_run = ScoringRun.objects.get(project=other_project)
    with pytest.raises(Http404):
        selectors.run_for(curator, project, other_run.pk)
    with pytest.raises(Http404):  # beta's run looked up under beta: the curator is no member there
        selectors.run_for(curator, other_project, other_run.pk)


def test_a_token_limited_to_another_project_reads_nothing(world, project, other_project, members):
    curator = members["curator"]
    Membership.objects.create(user=curator, project=other_project, role=Role.CURATOR)
    token, _ = account_services.issue_token(user=curator, name="beta only", projects=[other_project])
    assert not selectors.runs_visible_to(curator, project, token=token).exists()
    assert selectors.runs_visible_to(curator, project).exists()
