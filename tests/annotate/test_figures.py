"""The onPanda figures kept as tallies (annotate/figures.py): after changes through every service that moves them,
in a script and in random orders, each kept tally equals its recount, and the metrics and the queue state read from
them equal what the old per-request computation (tests/annotate/metrics_oracle.py) and plain counts give."""

from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate import corrections, figures, importers, selectors, services, streaming
from annotate.metrics import project_metrics
from annotate.models import AnnotationConfig, Claim, ClaimState, Item, NodeStatus, Session, SessionStatus
from annotate.panda_json import import_panda_json
from dataplatform.accounts.models import Role
from dataplatform.tallies import registry
from dataplatform.tallies import selectors as tallies
from tests.doubles import RecordingProgress
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

from . import metrics_oracle
from .panda_files import minimal_file

pytestmark = pytest.mark.django_db

KEPT = (*figures.SESSION_FIGURES, figures.CANDIDATES, figures.QUEUE)


def assert_kept_equals_recount(project) -> None:
    for name in KEPT:
        kept = {key: figure for key, figure in tallies.figures(project.pk, name).items() if figure.count}
        recount = {key: figure for key, figure in registry.definition(name).recount(project.pk).items() if figure.count}
        assert sorted(kept) == sorted(recount), name
        for key, figure in recount.items():
            assert kept[key].count == figure.count, (name, key)
            assert kept[key].total == pytest.approx(figure.total), (name, key)


def assert_close(new, old, where="metrics") -> None:
    """Equal, floats within rounding (a kept sum adds in another order than the old loop did)."""
    if isinstance(old, float) and isinstance(new, float | int):
        assert new == pytest.approx(old, rel=1e-9, abs=1e-12), where
    elif isinstance(old, dict):
        assert isinstance(new, dict) and sorted(new) == sorted(old), where
        for key in old:
            assert_close(new[key], old[key], f"{where}.{key}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for index, (a, b) in enumerate(zip(new, old, strict=True)):
            assert_close(a, b, f"{where}[{index}]")
    else:
        assert new == old, where


def assert_metrics_as_before(project) -> None:
    assert_close(project_metrics(project), metrics_oracle.project_metrics(project))


def assert_queue_as_counted(project) -> None:
    items = Item.objects.filter(project=project)
    by_state = dict(Claim.objects.filter(item__project=project).values_list("state").annotate(n=Count("id")))
    now = timezone.now()
    active = Claim.objects.filter(item__project=project, state=ClaimState.ACTIVE)
    assert selectors.queue_state(project) == {
        "items": items.count(), "answered": items.filter(rollout__isnull=False).count(),
        "claims": {state: by_state.get(state, 0) for state in ClaimState.values},
        "active_leases": active.filter(lease_expires_at__gt=now).count(),
        "expired_leases": active.filter(lease_expires_at__lte=now).count()}


def assert_all(project) -> None:
    assert_kept_equals_recount(project)
    assert_metrics_as_before(project)
    assert_queue_as_counted(project)


class World:
    """A project and its people, changed only through the services."""

    def __init__(self, project, people: int = 3, overlap: int = 2):
        self.project = project
        AnnotationConfig.objects.update_or_create(project=project, defaults={"overlap": overlap, "top_k": 3})
        self.curator = MembershipFactory(project=project, role=Role.CURATOR,
                                         user=UserFactory(username=f"curator-{project.pk}")).user
        self.people = [MembershipFactory(project=project, role=Role.ANNOTATOR,
                                         user=UserFactory(username=f"p{n}-{project.pk}")).user
                       for n in range(people)]
        self.prompts = 0

    def import_prompts(self, count: int) -> None:
        lines = [f'{{"messages": [{{"role": "user", "content": "q{self.prompts + n} of {self.project.pk}"}}]}}'
                 for n in range(count)]
        self.prompts += count
        assert importers.import_prompts(project=self.project, lines=lines).created == count

    def answer(self) -> None:
        services.generate_rollouts(project=self.project, progress=RecordingProgress())

    def session_of(self, person) -> Session | None:
        claim = services.claim_with_session(project=self.project, annotator=person)
        return None if claim is None else Session.objects.get(pk=claim.session.pk)

    def correct(self, session: Session, person, how: str, at: int) -> None:
        session = Session.objects.select_related("item__project", "current_node").get(pk=session.pk)
        node = session.current_node
        if session.status != SessionStatus.OPEN or node.status != NodeStatus.COMPLETE:
            return
        position = node.locked_until + at % max(1, len(node.token_ids) - node.locked_until)
        if position >= len(node.token_ids) or (how == "candidate" and not node.top[position]):
            return
        pick = {"candidate": {"token_id": node.top[position][-1][0]}, "typed": {"text": "no<|stop|>"},
                "stop": {"stop": True}}[how]
        child = corrections.correct(session=session, version=session.version, node_id=node.pk, position=position,
                                    actor=person, **pick)
        if child.status == NodeStatus.STREAMING:
            list(streaming.continue_node(node=child))

    def undo(self, session: Session, person) -> None:
        session = Session.objects.get(pk=session.pk)
        if session.status == SessionStatus.OPEN and session.current_node.parent_id is not None:
            services.undo(session=session, version=session.version, actor=person)

    def finish(self, session: Session, person, *, accept: bool, minutes: float = 0) -> None:
        session = Session.objects.get(pk=session.pk)
        if session.status != SessionStatus.OPEN:
            return
        if minutes:  # a session started earlier: its active time (an 8-hour one is left out of the median)
            Session.objects.filter(pk=session.pk).update(created_at=timezone.now() - timedelta(minutes=minutes))
        services.finish(session=session, version=session.version, actor=person, accept=accept)

    def end(self, person, state: str) -> None:
        claim = Claim.objects.filter(project=self.project, annotator=person, state=ClaimState.ACTIVE).first()
        if claim is not None:
            services.end_claim(claim=claim, state=state)

    def reassign(self, person, to) -> None:
        claim = Claim.objects.filter(project=self.project, annotator=person, state=ClaimState.ACTIVE).first()
        if claim is not None and person != to and not Claim.objects.filter(item_id=claim.item_id, annotator=to) \
                .exists() and not Claim.objects.filter(project=self.project, annotator=to,
                                                       state=ClaimState.ACTIVE).exists():
            services.reassign(claim=claim, to_user=to)

    def import_panda(self, person, n: int) -> None:
        data = minimal_file() | {"uuid": f"{self.project.pk}-{n}"}
        report = import_panda_json(project=self.project, data=data, annotator=person, file=f"{n}.panda.json")
        assert report.created or report.duplicate, report.as_dict()


def read_every_tally(project) -> None:
    """The first read counts each tally; from then on the services keep it."""
    for name in KEPT:
        tallies.figures(project.pk, name)


def test_every_service_keeps_the_figures(project, chars):
    world = World(project)
    ann, bob, cat = world.people
    world.import_prompts(2)
    read_every_tally(project)  # counted now (items, nothing answered): every change below is kept by `add`
    world.import_prompts(3)
    world.answer()
    first = world.session_of(ann)
    world.correct(first, ann, "candidate", 1)
    world.correct(first, ann, "typed", 0)
    world.undo(first, ann)
    world.finish(first, ann, accept=True, minutes=12)
    second = world.session_of(bob)  # the same item (overlap 2): a pair for the agreement
    assert second.item_id == first.item_id
    world.correct(second, bob, "stop", 2)
    world.finish(second, bob, accept=True, minutes=8 * 60)  # over 7 h: counted, not timed
    third = world.session_of(ann)
    world.correct(third, ann, "candidate", 0)
    world.finish(third, ann, accept=False)  # rejected: its pick counts, the session does not
    world.session_of(bob)
    world.end(bob, ClaimState.SKIPPED)
    world.session_of(cat)
    world.end(cat, ClaimState.RELEASED)
    world.session_of(ann)
    world.reassign(ann, cat)
    world.finish(world.session_of(cat), cat, accept=True, minutes=3)
    world.import_panda(bob, 1)  # an accepted session with a candidate pick, its item and its done claim
    assert_all(project)
    metrics = project_metrics(project)
    assert metrics["accepted_sessions"] == 4 and metrics["agreement"]["pairs"] == 1
    assert metrics["active_time"]["excluded_over_7h"] == 1 and sum(metrics["candidate_rank"]["counts"]) >= 2


def test_a_lease_that_ran_out_and_lost_its_slot_is_released_and_kept(project, chars):
    """claim_next releases a claim whose lease expired while others filled the item (inside dataplatform.claims)."""
    world = World(project, overlap=1)
    world.import_prompts(1)
    world.answer()
    read_every_tally(project)
    ann, bob, _cat = world.people
    world.session_of(ann)
    Claim.objects.filter(annotator=ann).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    world.finish(world.session_of(bob), bob, accept=True)
    assert world.session_of(ann) is None  # nothing left for ann: her claim was released
    assert Claim.objects.get(annotator=ann).state == ClaimState.RELEASED
    assert_all(project)


def test_the_median_reads_exact_times_within_one_minute(project, chars):
    """Times in one minute and across minutes, odd and even counts: the median is the old one exactly."""
    world = World(project, people=2)
    world.import_prompts(4)
    world.answer()
    read_every_tally(project)
    for index, minutes in enumerate((10.25, 10.5, 42, 10.75, 0.5, 10.1, 7 * 60 + 1)):
        person = world.people[index % 2]
        world.finish(world.session_of(person), person, accept=True, minutes=minutes)
        median = project_metrics(project)["active_time"]["median_seconds"]
        assert median == metrics_oracle.project_metrics(project)["active_time"]["median_seconds"]
    assert_kept_equals_recount(project)


def test_reads_cost_the_same_at_any_size(project, other_project, django_assert_max_num_queries, chars):
    small, large = World(project, people=2), World(other_project, people=2)
    for world, sessions in ((small, 1), (large, 6)):
        world.import_prompts(sessions)
        world.answer()
        for n in range(sessions):
            person = world.people[n % 2]
            world.finish(world.session_of(person), person, accept=True, minutes=n + 1)
        project_metrics(world.project)  # the first reads count
        selectors.queue_state(world.project)
    for world in (small, large):
        with django_assert_max_num_queries(16):
            project_metrics(world.project, origin_sessions=False)
        with django_assert_max_num_queries(4):
            selectors.queue_state(world.project)


def test_figures_of_a_project_stay_its_own(project, other_project, chars):
    mine, theirs = World(project), World(other_project)
    for world in (mine, theirs):
        world.import_prompts(1)
        world.answer()
        read_every_tally(world.project)
    world = mine
    world.finish(world.session_of(world.people[0]), world.people[0], accept=True)
    assert project_metrics(other_project)["accepted_sessions"] == 0
    assert selectors.queue_state(other_project)["claims"]["done"] == 0
    assert_all(project)
    assert_all(other_project)


# --- random orders -----------------------------------------------------------------------------------

PEOPLE = st.integers(min_value=0, max_value=2)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("import"), st.integers(min_value=1, max_value=3)),
    st.tuples(st.just("answer")),
    st.tuples(st.just("claim"), PEOPLE),
    st.tuples(st.just("correct"), PEOPLE, st.sampled_from(["candidate", "typed", "stop"]),
              st.integers(min_value=0, max_value=6)),
    st.tuples(st.just("undo"), PEOPLE),
    st.tuples(st.just("accept"), PEOPLE, st.sampled_from([0, 0.5, 3, 61, 7 * 60, 8 * 60])),
    st.tuples(st.just("reject"), PEOPLE),
    st.tuples(st.just("skip"), PEOPLE),
    st.tuples(st.just("release"), PEOPLE),
    st.tuples(st.just("reassign"), PEOPLE, PEOPLE),
    st.tuples(st.just("panda"), PEOPLE),
), min_size=1, max_size=14)


def _open_session(world: World, person) -> Session | None:
    return (Session.objects.filter(item__project=world.project, annotator=person, status=SessionStatus.OPEN,
                                   claim__state=ClaimState.ACTIVE).first())


def apply(world: World, step: tuple, number: int) -> None:
    kind, *args = step
    person = world.people[args[0]] if args and kind not in ("import",) else None
    if kind == "import":
        world.import_prompts(args[0])
    elif kind == "answer":
        world.answer()
    elif kind == "claim":
        world.session_of(person)
    elif kind in ("correct", "undo", "accept", "reject") and (session := _open_session(world, person)):
        if kind == "correct":
            world.correct(session, person, args[1], args[2])
        elif kind == "undo":
            world.undo(session, person)
        else:
            world.finish(session, person, accept=kind == "accept", minutes=args[1] if kind == "accept" else 0)
    elif kind in ("skip", "release"):
        world.end(person, ClaimState.SKIPPED if kind == "skip" else ClaimState.RELEASED)
    elif kind == "reassign":
        world.reassign(person, world.people[args[1]])
    elif kind == "panda":
        world.import_panda(person, number)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS, counted_first=st.booleans())
def test_random_orders_of_the_services_keep_the_figures(chars, steps, counted_first):
    """Counted first, then kept by every step (compared after each); or counted at the end, after all of them."""
    world = World(ProjectFactory())
    if counted_first:
        read_every_tally(world.project)
    for number, step in enumerate(steps):
        apply(world, step, number)
        if counted_first:
            assert_kept_equals_recount(world.project)
    assert_all(world.project)


