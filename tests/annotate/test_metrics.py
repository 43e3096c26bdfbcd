"""Project metrics on hand-built session trees, with the exact numbers worked out by hand. The trees are written
straight to the tables, so each test reads its project's metrics after building it (the first read counts the kept
figures; the services keep them afterwards: tests/annotate/test_figures.py)."""

import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate import corrections, services
from annotate.metrics import project_metrics
from annotate.models import (
    AnnotationConfig,
    Claim,
    ClaimState,
    Event,
    EventKind,
    Item,
    Node,
    Session,
    SessionStatus,
)
from tests.factories import UserFactory

from .conftest import fake_rollout

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
M, C, T = "model", "candidate", "typed"


def item_in(project, n: int) -> Item:
    return Item.objects.create(project=project, messages=[{"role": "user", "content": f"q{n}"}],
                               source_sha256=f"{project.pk}-{n}".rjust(64, "0"), prompt_ids=[1, 2, 3],
                               rollout=fake_rollout([10, 11, 12, 13, 14, 15]))


def build(item, annotator, *, forks=(), origins=(M,) * 6, minutes: float | None = 10, undone=(),
          status=SessionStatus.ACCEPTED) -> Session:
    """A session whose accepted lineage is root -> fork forks[0] -> fork forks[1] -> ...

    `origins` are the accepted node's (its length is the response length); `undone` adds
    side branches off the root that are not on the lineage. The accept event comes
    `minutes` after the session starts at T0.
    """
    claim = Claim.objects.create(item=item, project_id=item.project_id, annotator=annotator, state=ClaimState.DONE, lease_expires_at=T0)
    session = Session.objects.create(claim=claim, item=item, project_id=item.project_id, annotator=annotator,
                                     status=status)
    root = Node.objects.create(session=session, key=1, token_ids=list(range(6)), origins=[M] * 6)
    key = 1
    for fork in undone:
        key += 1
        Node.objects.create(session=session, parent=root, key=key, fork_index=fork, origins=[M] * fork)
    node = root
    for fork in forks:
        key += 1
        node = Node.objects.create(session=session, parent=node, key=key, fork_index=fork, origins=[M] * fork)
    Node.objects.filter(pk=node.pk).update(origins=list(origins), token_ids=list(range(len(origins))))
    Session.objects.filter(pk=session.pk).update(current_node=node, created_at=T0)
    if status == SessionStatus.ACCEPTED and minutes is not None:
        event = Event.objects.create(session=session, kind=EventKind.ACCEPT, node=node, actor=annotator)
        Event.objects.filter(pk=event.pk).update(created_at=T0 + timedelta(minutes=minutes))
    return session


def chosen(session, *, rank: int, logprob: float) -> Event:
    return Event.objects.create(session=session, kind=EventKind.CONTINUE_WITH_CHOSEN,
                                payload={"position": 0, "token_id": 1, "rank": rank, "logprob": logprob,
                                         "rejected_token_id": 2})


@pytest.fixture
def people(db):
    return {name: UserFactory(username=name) for name in ("ann", "bob", "cat")}


@pytest.fixture
def scenario(project, other_project, people):
    """Six accepted sessions on three items (two of them overlapped), plus noise that must be ignored.

    item 1: ann corrects first at 3 (len 6), bob at 5 (len 6)           -> distance 2
    item 2: ann accepts directly (len 6 -> position 6, an undone fork at 1 is ignored),
            bob corrects at 0 then 4 (len 8), cat at 0 (len 4, 8 h: too long to time)
    item 3: cat accepts directly (len 5); ann's session there is still open
    """
    ann, bob, cat = people["ann"], people["bob"], people["cat"]
    item1, item2, item3 = (item_in(project, n) for n in (1, 2, 3))
    s1 = build(item1, ann, forks=[3], origins=[M, M, M, C, M, M], minutes=10)
    build(item1, bob, forks=[5], origins=[M] * 5 + [T], minutes=20)
    build(item2, ann, origins=[M] * 6, minutes=30, undone=[1])
    s4 = build(item2, bob, forks=[0, 4], origins=[T, T, M, M, C, M, M, M], minutes=40)
    build(item2, cat, forks=[0], origins=[C, M, M, M], minutes=8 * 60)
    build(item3, cat, origins=[M] * 5, minutes=50)
    still_open = build(item3, ann, forks=[2], status=SessionStatus.OPEN)
    elsewhere = build(item_in(other_project, 1), ann, forks=[0], origins=[T], minutes=1)

    AnnotationConfig.objects.create(project=project, top_k=3)
    chosen(s1, rank=2, logprob=-1.0)  # p = 0.37 -> bin 3
    chosen(s4, rank=1, logprob=-0.1)  # p = 0.90 -> bin 9
    chosen(s4, rank=1, logprob=0.0)  # p = 1.0 -> the last bin, not an 11th
    chosen(still_open, rank=3, logprob=-2.0)  # picks in open sessions count too: p = 0.14 -> bin 1
    chosen(elsewhere, rank=2, logprob=-0.5)  # another project: ignored
    return project


def test_agreement_on_overlapped_items(scenario):
    agreement = project_metrics(scenario)["agreement"]
    # pairs: item 1 ann-bob |3-5| = 2; item 2 ann-bob |6-0| = 6, ann-cat |6-0| = 6, bob-cat |0-0| = 0
    assert (agreement["items"], agreement["pairs"]) == (2, 4)
    assert agreement["exact_match_rate"] == 0.25
    assert agreement["mean_abs_distance"] == 3.5
    assert agreement["per_annotator"] == [
        {"annotator": "ann", "pairs": 3, "exact_match_rate": 0.0, "mean_abs_distance": pytest.approx(14 / 3)},
        {"annotator": "bob", "pairs": 3, "exact_match_rate": pytest.approx(1 / 3), "mean_abs_distance": pytest.approx(8 / 3)},
        {"annotator": "cat", "pairs": 2, "exact_match_rate": 0.5, "mean_abs_distance": 3.0},
    ]


def test_two_annotators_three_tokens_apart_through_the_services(project, members, make_items):
    """The brief's example, built with the real services: first errors at 3 and 5."""
    AnnotationConfig.objects.create(project=project, overlap=2)
    make_items(1)
    second = UserFactory(username="second")
    for user, position in ((members["annotator"], 3), (second, 5)):
        session = services.open_session(claim=services.claim_next(project=project, annotator=user))
        corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=position, stop=True,
                         actor=user)
        services.finish(session=session, version=1, actor=user, accept=True)
    metrics = project_metrics(project)
    assert metrics["agreement"]["pairs"] == 1
    assert metrics["agreement"]["exact_match_rate"] == 0.0
    assert metrics["agreement"]["mean_abs_distance"] == 2.0
    # A stop at p leaves p tokens, so each fork sits at the very end: ratio 1.0, the last bin.
    assert metrics["fork_positions"]["counts"] == [0, 0, 0, 0, 2]
    assert metrics["origin_ratios"]["mean"] == {"model": 1.0, "candidate": 0.0, "typed": 0.0}


def test_origin_ratios_per_accepted_response(scenario):
    origins = project_metrics(scenario)["origin_ratios"]
    expected = [  # (model, candidate, typed) per accepted session, in session order
        (5 / 6, 1 / 6, 0), (5 / 6, 0, 1 / 6), (1, 0, 0), (5 / 8, 1 / 8, 2 / 8), (3 / 4, 1 / 4, 0), (1, 0, 0),
    ]
    got = [(row["model"], row["candidate"], row["typed"]) for row in origins["sessions"]]
    assert got == [pytest.approx(row) for row in expected]
    assert [row["annotator"] for row in origins["sessions"]] == ["ann", "bob", "ann", "bob", "cat", "cat"]
    for index, origin in enumerate(("model", "candidate", "typed")):
        assert origins["mean"][origin] == pytest.approx(sum(row[index] for row in expected) / 6)


def test_fork_positions_first_token_and_direct_accepts(scenario):
    metrics = project_metrics(scenario)
    forks = metrics["fork_positions"]
    # fork / length: 3/6 -> bin 2; 5/6 -> bin 4; 0/8 -> 0, 4/8 -> bin 2; 0/4 -> 0. The undone fork at 1 is not counted.
    assert forks["edges"] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert forks["counts"] == [2, 0, 2, 0, 1]
    assert forks["corrections"] == 5
    assert forks["first_token_modification_rate"] == pytest.approx(2 / 6)
    assert metrics["direct_accept_rate"] == pytest.approx(2 / 6)
    assert metrics["accepted_sessions"] == 6


def test_corrections_per_item(scenario):
    # lineage corrections per accepted session: 1, 1, 0, 2, 1, 0
    assert project_metrics(scenario)["corrections_per_item"] == {"labels": [0, 1, 2], "counts": [2, 3, 1]}


def test_candidate_rank_and_probability(scenario):
    metrics = project_metrics(scenario)
    assert metrics["candidate_rank"] == {"labels": [1, 2, 3], "counts": [2, 1, 1]}
    probability = metrics["candidate_probability"]
    assert probability["counts"] == [0, 1, 0, 1, 0, 0, 0, 0, 0, 2]
    assert probability["edges"] == [round(i / 10, 10) for i in range(11)]


def test_ranks_above_the_current_top_k_widen_the_histogram(scenario):
    AnnotationConfig.objects.filter(project=scenario).update(top_k=2)  # lowered after a rank-3 pick
    assert project_metrics(scenario)["candidate_rank"] == {"labels": [1, 2, 3], "counts": [2, 1, 1]}


def test_active_time_and_throughput(scenario):
    metrics = project_metrics(scenario)
    # timed sessions: 10, 20, 30, 40, 50 min; cat's 8 h session on item 2 is left out
    assert metrics["active_time"] == {"median_seconds": 1800.0, "sessions": 5, "excluded_over_7h": 1}
    assert metrics["throughput"] == [
        {"annotator": "ann", "accepted": 2, "active_hours": pytest.approx(40 / 60), "accepted_per_hour": pytest.approx(3.0)},
        {"annotator": "bob", "accepted": 2, "active_hours": pytest.approx(1.0), "accepted_per_hour": pytest.approx(2.0)},
        {"annotator": "cat", "accepted": 2, "active_hours": pytest.approx(50 / 60), "accepted_per_hour": pytest.approx(1.2)},
    ]


def test_a_session_of_exactly_seven_hours_still_counts(project, people):
    build(item_in(project, 1), people["ann"], minutes=7 * 60)
    build(item_in(project, 2), people["bob"], minutes=7 * 60 + 0.5)
    assert project_metrics(project)["active_time"] == {
        "median_seconds": 7 * 3600.0, "sessions": 1, "excluded_over_7h": 1}


def test_an_empty_accepted_response(project, people):
    # Stopped at token 0: no tokens, so no origin ratios, but a first-token correction in the first bin.
    build(item_in(project, 1), people["ann"], forks=[0], origins=[])
    metrics = project_metrics(project)
    assert metrics["origin_ratios"]["sessions"] == []
    assert metrics["fork_positions"]["counts"] == [1, 0, 0, 0, 0]
    assert metrics["fork_positions"]["first_token_modification_rate"] == 1.0


def test_an_empty_project_gives_zeros_and_nones(project):
    metrics = project_metrics(project)
    assert metrics["accepted_sessions"] == 0
    assert metrics["direct_accept_rate"] is None
    assert metrics["agreement"]["exact_match_rate"] is None and metrics["agreement"]["per_annotator"] == []
    assert metrics["origin_ratios"] == {"sessions": [], "mean": {"model": None, "candidate": None, "typed": None}}
    assert metrics["active_time"]["median_seconds"] is None
    assert metrics["candidate_rank"] == {"labels": list(range(1, 21)), "counts": [0] * 20}  # the default top_k
    assert metrics["corrections_per_item"] == {"labels": [], "counts": []}
    assert metrics["throughput"] == []


def test_the_result_is_plain_json(scenario):
    metrics = project_metrics(scenario)
    assert json.loads(json.dumps(metrics, allow_nan=False)) == metrics


def test_other_projects_do_not_leak_in(scenario, other_project):
    metrics = project_metrics(other_project)
    assert metrics["accepted_sessions"] == 1
    assert metrics["candidate_rank"]["counts"][:2] == [0, 1]
    assert metrics["origin_ratios"]["mean"]["typed"] == 1.0


def test_queries_do_not_grow_with_sessions(project, other_project, people):
    """The metrics read kept figures: the same queries for 4 accepted sessions as for 30 (both even: the median
    reads its two middle times)."""
    def queries(of) -> int:
        with CaptureQueriesContext(connection) as captured:
            project_metrics(of)
        return len(captured)

    for n in range(4):
        build(item_in(project, n), people["ann"], forks=[1, 2], undone=[0])
    for n in range(30):
        build(item_in(other_project, n), people["bob" if n % 2 else "cat"], forks=[4], minutes=math.pi + n)
    for counted in (project, other_project):
        project_metrics(counted)  # the first read counts them
    assert queries(project) == queries(other_project) <= 16
    assert project_metrics(other_project)["accepted_sessions"] == 30
