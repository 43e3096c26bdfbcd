"""The labeler's kept figures (labeler/figures.py, labeler/agreement.py) equal their recount after a change through
every service that touches them, and after each step of random sequences of those services; the agreement reports
read from them equal the computation from every label they replaced (metrics_oracle.py)."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplatform.tallies import registry, selectors
from labeler import agreement, figures, importers, services
from labeler import selectors as lists
from labeler.models import Label, ReviewClaim, ReviewClaimState, SweTask, Trajectory

from .metrics_oracle import human_vs_human, label_distributions, llm_vs_human, same
from .world import COMPLETE, model_label, review, world

pytestmark = pytest.mark.django_db

TALLIES = (figures.TASK_STATES, figures.TRAJECTORY_STATES, figures.CLAIM_STATES, agreement.AGREEMENT)
# Values a reviewer may change a field to (valid under swe_v1), so that reviewers and the model disagree.
CHOICES = {"code_language": ["python", "go", "java"], "scope": ["single-file", "multi-file"],
           "cognitive_complexity": ["low", "medium", "high"],
           "task_type_l2": [["logic-error"], ["crash-exception"], ["logic-error", "off-by-one-boundary"], []],
           "domain_l2": [["rest-api"], ["graphql-api", "rest-api"], ["orm-queries"]]}


def assert_kept(project):
    """Every kept figure of the project equals its recount (keys at zero are as good as absent)."""
    for name in TALLIES:
        kept = {key: figure for key, figure in selectors.figures(project.pk, name).items() if figure.count}
        assert kept == registry.definition(name).recount(project.pk), name


def assert_state_counts(project, taxonomy):
    """What the overview shows from the kept counts equals what the lists' filters find, and the pages of a state
    found from its labels (selectors.state_page_ids, two ids a page) are those items in order."""
    for trajectories, items in ((False, SweTask.objects.filter(project=project)),
                                (True, Trajectory.objects.filter(project=project))):
        counts = figures.state_counts(project.pk, taxonomy.pk, trajectories=trajectories)
        for state in lists.REVIEW_STATES:
            found = lists.filter_by_state(items, taxonomy, state)
            assert counts["states"][state] == found.count(), (trajectories, state)
            if state in lists.STATE_LABELS:
                expected = list(found.order_by("id").values_list("id", flat=True))
                assert paged_ids(project, items.model, taxonomy, state) == expected, (trajectories, state)
        flagged = lists.with_review_state(items, taxonomy)
        assert (counts["all"], counts["auto"], counts["errors"], counts["reviewed"]) == (
            items.count(), flagged.filter(has_auto=True).count(), flagged.filter(has_error=True).count(),
            flagged.filter(reviewed=True).count())


def paged_ids(project, model, taxonomy, state) -> list[int]:
    ids, after = [], None
    while page := lists.state_page_ids(project, model, taxonomy, state, after, 2):
        ids += page
        after = page[-1]
        assert len(ids) < 100
    return ids


def assert_reports(project, taxonomy):
    labels = Label.objects.filter(task__project=project, taxonomy=taxonomy)
    kept = agreement.reports(project.pk, taxonomy)
    for report, oracle in (("llm_vs_human", llm_vs_human), ("human_vs_human", human_vs_human),
                           ("distributions", label_distributions)):
        assert same(kept[report], oracle(labels, taxonomy)), report


def test_every_service_keeps_the_figures(project):
    project, taxonomy, (alice, bob, carol) = world(project)
    assert_kept(project)  # first read: counted
    tasks = list(SweTask.objects.filter(project=project).order_by("id"))
    runs = list(Trajectory.objects.filter(project=project).order_by("id"))
    importers.import_tasks(project=project, file="more.jsonl", lines=[json.dumps(
        {"instance_id": "task-late", "problem_statement": "p"})])
    assert figures.item_count(project.pk) == 5
    model_label(tasks[0], taxonomy)
    model_label(tasks[1], taxonomy, error=True)
    model_label(tasks[1], taxonomy, {**COMPLETE, "scope": "multi-file"})  # the retried error, now answered
    model_label(runs[0], taxonomy)
    model_label(runs[1], taxonomy, error=True)
    assert_kept(project)
    claim = services.claim_next_task(project=project, reviewer=alice)
    review(claim.task, alice, {"code_language": "go"})  # submitting ends the claim: done
    claim = services.claim_next_task(project=project, reviewer=bob)
    services.end_review_claim(claim=claim, state=ReviewClaimState.SKIPPED)
    claim = services.claim_next_task(project=project, reviewer=bob)
    review(claim.task, bob, {"domain_l2": ["graphql-api"]})
    services.claim_next(project=project, reviewer=carol, queue=services.TRAJECTORIES)
    review(runs[0], carol)
    label = review(tasks[0], carol, submit=False)  # a draft counts nowhere
    assert_kept(project)
    assert_reports(project, taxonomy)
    label = services.edit_label(label=label, version=label.version, changes={"scope": "single-file"}, actor=carol)
    services.submit_label(label=label, version=label.version, actor=carol)
    submitted = Label.objects.get(task=tasks[0], author=alice)  # a submitted label edited again: the final moves
    services.edit_label(label=submitted, version=submitted.version, changes={"cognitive_complexity": "high"},
                        actor=alice)
    # A claim whose lease ran out and whose slot another reviewer took is released by its holder's next claim.
    held = services.claim_next_task(project=project, reviewer=alice)
    ReviewClaim.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    services.update_settings(project=project, overlap=1)
    services.claim_next_task(project=project, reviewer=bob)
    services.claim_next_task(project=project, reviewer=alice)
    assert ReviewClaim.objects.get(pk=held.pk).state in (ReviewClaimState.RELEASED, ReviewClaimState.ACTIVE)
    assert_kept(project)
    assert_reports(project, taxonomy)
    assert_state_counts(project, taxonomy)


OPERATIONS = st.one_of(
    st.tuples(st.just("model"), st.integers(0, 3), st.booleans(), st.sampled_from(sorted(CHOICES))),
    st.tuples(st.just("review"), st.integers(0, 3), st.integers(0, 2), st.sampled_from(sorted(CHOICES)),
              st.integers(0, 3), st.booleans()),
    st.tuples(st.just("edit"), st.integers(0, 3), st.integers(0, 2), st.sampled_from(sorted(CHOICES)),
              st.integers(0, 3)),
    st.tuples(st.just("claim"), st.integers(0, 2), st.booleans()),
    st.tuples(st.just("end"), st.integers(0, 2), st.sampled_from([ReviewClaimState.SKIPPED,
                                                                  ReviewClaimState.RELEASED])),
    st.tuples(st.just("run"), st.integers(0, 1), st.booleans()),
)


def _choice(field: str, n: int):
    return CHOICES[field][n % len(CHOICES[field])]


def _apply(operation, project, taxonomy, reviewers, tasks, runs) -> None:
    kind, *args = operation
    if kind == "model":
        task, error, field = tasks[args[0]], args[1], args[2]
        model_label(task, taxonomy, {**COMPLETE, field: _choice(field, task.pk)}, error=error)
    elif kind == "review":
        task, reviewer, field, choice, submit = tasks[args[0]], reviewers[args[1]], args[2], args[3], args[4]
        try:
            review(task, reviewer, {field: _choice(field, choice)}, submit=submit)
        except services.LabelingError:
            pass  # refused (e.g. its claim went to someone else): nothing changed
    elif kind == "edit":
        label = Label.objects.filter(task=tasks[args[0]], author=reviewers[args[1]]).first()
        if label is not None:
            services.edit_label(label=label, version=label.version, changes={args[2]: _choice(args[2], args[3])},
                                actor=reviewers[args[1]])
    elif kind == "claim":
        services.claim_next(project=project, reviewer=reviewers[args[0]],
                            queue=services.TRAJECTORIES if args[1] else services.TASKS)
    elif kind == "end":
        claim = ReviewClaim.objects.filter(project=project, reviewer=reviewers[args[0]],
                                           state=ReviewClaimState.ACTIVE).first()
        if claim is not None:
            services.end_review_claim(claim=claim, state=args[1])
    elif kind == "run":
        model_label(runs[args[0]], taxonomy, error=args[1])


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=12), counted_first=st.booleans())
def test_random_sequences_keep_the_figures(operations, counted_first):
    project, taxonomy, reviewers = world()
    tasks = list(SweTask.objects.filter(project=project).order_by("id"))
    runs = list(Trajectory.objects.filter(project=project).order_by("id"))
    if counted_first:  # else the first read, at the end, counts what the services did
        assert_kept(project)
    for operation in operations:
        _apply(operation, project, taxonomy, reviewers, tasks, runs)
        if counted_first:
            assert_kept(project)
    assert_kept(project)
    assert_reports(project, taxonomy)
    assert_state_counts(project, taxonomy)
