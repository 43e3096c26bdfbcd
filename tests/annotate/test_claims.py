import functools
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotate import corrections, services
from annotate.models import Claim, ClaimState, Item
from dataplatform import claims
from tests import claim_invariants
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def set_overlap(project, overlap, lease_minutes=30):
    config = services.config_for(project)
    config.overlap, config.lease_minutes = overlap, lease_minutes
    config.save()


def test_claim_returns_the_same_active_claim_until_done(project, members, make_items):
    make_items(3)
    first = services.claim_next(project=project, annotator=members["annotator"])
    assert services.claim_next(project=project, annotator=members["annotator"]).pk == first.pk
    services.end_claim(claim=first, state=ClaimState.SKIPPED)
    second = services.claim_next(project=project, annotator=members["annotator"])
    assert second.item_id != first.item_id  # a skipped item never comes back to the same person


def test_overlap_lets_n_annotators_take_an_item(project, members, make_items):
    make_items(1)
    set_overlap(project, 2)
    a = services.claim_next(project=project, annotator=members["annotator"])
    b = services.claim_next(project=project, annotator=members["curator"])
    assert a.item_id == b.item_id
    assert services.claim_next(project=project, annotator=members["admin"]) is None


def test_expired_lease_frees_the_slot(project, members, make_items):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    Claim.objects.filter(pk=claim.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    other = services.claim_next(project=project, annotator=members["curator"])
    assert other is not None and other.item_id == claim.item_id
    # The first annotator comes back after the slot was taken: their claim is released, nothing else is free.
    assert services.claim_next(project=project, annotator=members["annotator"]) is None
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.RELEASED


def test_items_without_a_rollout_are_not_offered(project, members, make_items):
    item = make_items(1)[0]
    item.rollout = None
    item.save()
    assert services.claim_next(project=project, annotator=members["annotator"]) is None


def test_the_ready_condition_is_checked_on_the_scanned_item_not_by_a_subquery(project, members, make_items):
    """`it.id IN (SELECT id FROM item WHERE ...)` made PostgreSQL scan and sort the whole item table on every
    claim; the scan must name the item table once."""
    make_items(2)
    Item.objects.filter(pk=Item.objects.order_by("pk").first().pk).update(rollout=None)
    with CaptureQueriesContext(connection) as queries:
        claim = services.claim_next(project=project, annotator=members["annotator"])
    assert claim.item.rollout is not None
    scan = next(query["sql"] for query in queries.captured_queries if query["sql"].startswith("SELECT it.id"))
    assert scan.count(f'"{Item._meta.db_table}"') == 1 and "IS NOT NULL" in scan


@pytest.mark.django_db(transaction=True)  # the test's own transaction would hide where the claim's ends
@pytest.mark.postgres_only("synchronous_commit, a PostgreSQL setting")
def test_a_claim_commits_without_waiting_for_the_wal_flush_and_only_its_own_transaction(project, members,
                                                                                        make_items):
    make_items(1)
    with transaction.atomic(), connection.cursor() as cursor:
        assert services.claim_next(project=project, annotator=members["annotator"]) is not None
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("off",)  # set by the claim's first statement
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("on",)  # SET LOCAL: the next transaction waits for the flush again


def test_a_ready_condition_that_needs_a_join_is_refused(project, members):
    with pytest.raises(ValueError, match="own columns"):
        claims.claim_next(claim_model=Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                          holder_id=members["annotator"].pk, overlap=1, lease_minutes=5,
                          ready=Q(project__slug="x"))


def test_reassign_moves_the_item(project, members, make_items):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    moved = services.reassign(claim=claim, to_user=members["curator"])
    assert moved.annotator == members["curator"] and Claim.objects.get(pk=claim.pk).state == ClaimState.RELEASED
    assert moved.project_id == project.pk
    with pytest.raises(services.AnnotationError, match="already had"):
        services.reassign(claim=moved, to_user=members["annotator"])


def test_reassign_to_someone_working_on_another_item_is_refused(project, members, make_items):
    make_items(2)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    services.claim_next(project=project, annotator=members["curator"])
    with pytest.raises(services.AnnotationError, match="working on another item"):
        services.reassign(claim=claim, to_user=members["curator"])
    assert Claim.objects.get(pk=claim.pk).state == ClaimState.ACTIVE  # nothing changed


def test_reassigning_an_expired_claim_whose_slot_was_taken_is_refused(project, members, make_items):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    Claim.objects.filter(pk=claim.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert services.claim_next(project=project, annotator=members["curator"]).item_id == claim.item_id
    with pytest.raises(services.AnnotationError, match="no free slot"):
        services.reassign(claim=claim, to_user=members["admin"])


def test_an_ended_claim_cannot_end_again(project, members, make_items):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    services.end_claim(claim=claim, state=ClaimState.SKIPPED)
    for state in (ClaimState.DONE, ClaimState.RELEASED, ClaimState.SKIPPED):
        with pytest.raises(services.AnnotationError, match="already skipped"):
            services.end_claim(claim=claim, state=state)
    assert Item.objects.get(pk=claim.item_id).claims_done == 0


def test_done_after_the_lease_ran_out_needs_the_slot_to_be_still_free(project, members, make_items):
    make_items(2)
    expired = timezone.now() - timedelta(seconds=1)
    nobody_came = services.claim_next(project=project, annotator=members["annotator"])
    Claim.objects.filter(pk=nobody_came.pk).update(lease_expires_at=expired)
    services.end_claim(claim=nobody_came, state=ClaimState.DONE)  # late, but the slot was still its own
    assert Item.objects.get(pk=nobody_came.item_id).claims_done == 1

    taken = services.claim_next(project=project, annotator=members["curator"])
    Claim.objects.filter(pk=taken.pk).update(lease_expires_at=expired)
    services.claim_next(project=project, annotator=members["admin"])  # takes the free slot
    with pytest.raises(services.AnnotationError, match="went to someone else"):
        services.end_claim(claim=taken, state=ClaimState.DONE)
    assert Claim.objects.get(pk=taken.pk).state == ClaimState.ACTIVE
    assert Item.objects.get(pk=taken.item_id).claims_done == 0


def test_a_session_whose_claim_was_skipped_cannot_change(session, members):
    services.end_claim(claim=session.claim, state=ClaimState.SKIPPED)
    with pytest.raises(services.AnnotationError, match="was skipped"):
        services.finish(session=session, version=session.version, actor=members["annotator"], accept=True)
    with pytest.raises(services.AnnotationError, match="was skipped"):
        corrections.correct(session=session, version=session.version, node_id=session.current_node_id, position=1,
                         actor=members["annotator"], stop=True)
    assert Item.objects.get(pk=session.item_id).claims_done == 0


def test_accept_ends_the_claim_and_an_accept_of_a_released_claim_changes_nothing(project, members, make_items):
    make_items(2)
    first = services.claim_with_session(project=project, annotator=members["annotator"])
    services.finish(session=first.session, version=first.session.version, actor=members["annotator"], accept=True)
    assert Claim.objects.get(pk=first.pk).state == ClaimState.DONE
    second = services.claim_with_session(project=project, annotator=members["annotator"])
    services.end_claim(claim=second, state=ClaimState.RELEASED)
    with pytest.raises(services.AnnotationError):
        services.finish(session=second.session, version=second.session.version, actor=members["annotator"],
                        accept=True)
    second.session.refresh_from_db()
    assert second.session.status == "open" and Item.objects.get(pk=second.item_id).claims_done == 0


def test_two_active_claims_in_one_queue_are_refused_by_the_database(project, members, make_items):
    """The last line of defence behind claim_next: a partial unique constraint."""
    from django.db import IntegrityError

    first, second = make_items(2)
    services.claim_next(project=project, annotator=members["annotator"])
    lease = timezone.now() + timedelta(minutes=5)
    with pytest.raises(IntegrityError), transaction.atomic():
        Claim.objects.create(item=second, project=project, annotator=members["annotator"], lease_expires_at=lease)
    # Ended claims do not count, nor do active claims in another project's queue.
    Claim.objects.create(item=second, project=project, annotator=members["annotator"], lease_expires_at=lease,
                         state=ClaimState.SKIPPED)


@pytest.mark.integration  # real concurrent transactions: SKIP LOCKED on PostgreSQL, SQLite's one write lock
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("overlap", [1, 3])
def test_fifty_threads_racing_for_claims(project, make_items, overlap):
    items = make_items(20)
    set_overlap(project, overlap)
    annotators = [UserFactory(username=f"racer{i}") for i in range(50)]
    for user in annotators:
        MembershipFactory(project=project, user=user, role="annotator")
    barrier = threading.Barrier(50)
    results, errors = {}, []

    def race(user):
        try:
            barrier.wait()
            for _ in range(3):  # each annotator claims, finishes, claims again
                claim = services.claim_next(project=project, annotator=user)
                if claim is None:
                    break
                results.setdefault(user.pk, []).append(claim.item_id)
                services.end_claim(claim=claim, state=ClaimState.DONE)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=race, args=(user,)) for user in annotators]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for taken in results.values():
        assert len(taken) == len(set(taken))  # never the same item twice to one annotator
    per_item = {item.pk: Claim.objects.filter(item=item).count() for item in items}
    assert max(per_item.values()) <= overlap  # never beyond the overlap
    assert sum(per_item.values()) == min(20 * overlap, 50 * 3)  # and every free slot was handed out
    claim_invariants.assert_none(Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                                 overlap=overlap)


def _race(functions) -> list:
    """Run the functions at the same instant, each in a thread with its own connection; their results or
    exceptions, in order."""
    barrier = threading.Barrier(len(functions))
    outcomes = [None] * len(functions)

    def run(index, function):
        try:
            barrier.wait()
            outcomes[index] = function()
        except Exception as exc:  # noqa: BLE001 (the caller looks at what each one got)
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=pair) for pair in enumerate(functions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _annotators(project, count, prefix):
    users = [UserFactory(username=f"{prefix}{i}") for i in range(count)]
    for user in users:
        MembershipFactory(project=project, user=user, role="annotator")
    return users


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("overlap", [1, 2])
def test_expired_leases_renewed_while_others_claim_never_exceed_the_overlap(project, make_items, overlap):
    """The attack that found it: every slot taken, every lease run out, then the old holders and 30
    newcomers claim at the same instant and accept what they got."""
    make_items(20)
    set_overlap(project, overlap)
    first = _annotators(project, 20 * overlap, "first")
    for user in first:
        assert services.claim_next(project=project, annotator=user) is not None
    Claim.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    everyone = first + _annotators(project, 30, "late")

    def claim_and_accept(user):
        claim = services.claim_with_session(project=project, annotator=user)
        if claim is not None:
            services.finish(session=claim.session, version=claim.session.version, actor=user, accept=True)
        return claim

    outcomes = _race([functools.partial(claim_and_accept, user) for user in everyone])
    assert [o for o in outcomes if isinstance(o, Exception) and not isinstance(o, services.AnnotationError)] == []
    claim_invariants.assert_none(Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                                 overlap=overlap)
    assert Claim.objects.filter(state=ClaimState.DONE).count() == 20 * overlap  # every slot ended done, once


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_one_annotator_claiming_from_eight_tabs_gets_one_claim(project, members, make_items):
    make_items(10)
    annotator = members["annotator"]
    outcomes = _race([functools.partial(services.claim_with_session, project=project, annotator=annotator)] * 8)
    assert {claim.pk for claim in outcomes} == {Claim.objects.get(annotator=annotator).pk}  # one claim, 8 answers
    assert len({claim.session.pk for claim in outcomes}) == 1
    claim_invariants.assert_none(Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                                 overlap=1)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_accept_skip_and_release_of_one_claim_at_once_only_one_wins(project, make_items):
    make_items(8)
    users = _annotators(project, 8, "decider")
    claimed = [services.claim_with_session(project=project, annotator=user) for user in users]
    actions = []
    for user, claim in zip(users, claimed, strict=True):
        actions += [functools.partial(services.finish, session=claim.session, version=claim.session.version,
                                      actor=user, accept=True),
                    functools.partial(services.end_claim, claim=claim, state=ClaimState.SKIPPED),
                    functools.partial(services.end_claim, claim=claim, state=ClaimState.RELEASED)]
    outcomes = _race(actions)
    for index, claim in enumerate(claimed):
        mine = outcomes[3 * index:3 * index + 3]
        assert sum(not isinstance(o, Exception) for o in mine) == 1, mine  # exactly one of the three
        assert all(isinstance(o, services.AnnotationError) for o in mine if isinstance(o, Exception)), mine
        claim.refresh_from_db()
        claim.session.refresh_from_db()
        assert (claim.state == ClaimState.DONE) == (claim.session.status == "accepted")
    claim_invariants.assert_none(Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                                 overlap=1)


def test_done_claims_are_counted_once_and_an_items_overlap_fills_first(project, members, make_items):
    first_item, second_item = make_items(2)
    set_overlap(project, 2)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    assert claim.item_id == first_item.pk
    services.end_claim(claim=claim, state=ClaimState.DONE)
    services.end_claim(claim=claim, state=ClaimState.DONE)  # a repeat changes nothing
    first_item.refresh_from_db()
    assert first_item.claims_done == 1
    # The half-done item is offered before the untouched one, so overlaps complete early.
    assert services.claim_next(project=project, annotator=members["curator"]).item_id == first_item.pk
    assert services.claim_next(project=project, annotator=members["admin"]).item_id == second_item.pk  # item 1 full
