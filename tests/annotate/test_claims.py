import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotate import services
from annotate.models import Claim, ClaimState, Item
from dataplatform import claims
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
def test_a_claim_commits_without_waiting_for_the_wal_flush_and_only_its_own_transaction(project, members,
                                                                                        make_items):
    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's")
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
    with pytest.raises(services.AnnotationError, match="already had"):
        services.reassign(claim=moved, to_user=members["annotator"])


@pytest.mark.integration  # PostgreSQL: SKIP LOCKED and real concurrent transactions
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("overlap", [1, 3])
def test_fifty_threads_racing_for_claims(project, make_items, overlap):
    if connection.vendor != "postgresql":
        pytest.fail("The claim race needs PostgreSQL (SKIP LOCKED); run with DATABASE_URL=postgres://...")
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
                claims.mark_done(claim_model=Claim, item_field="item", claim_id=claim.pk)
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


def test_done_claims_are_counted_once_and_an_items_overlap_fills_first(project, members, make_items):
    first_item, second_item = make_items(2)
    set_overlap(project, 2)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    assert claim.item_id == first_item.pk
    claims.mark_done(claim_model=Claim, item_field="item", claim_id=claim.pk)
    claims.mark_done(claim_model=Claim, item_field="item", claim_id=claim.pk)  # a repeat changes nothing
    first_item.refresh_from_db()
    assert first_item.claims_done == 1
    # The half-done item is offered before the untouched one, so overlaps complete early.
    assert services.claim_next(project=project, annotator=members["curator"]).item_id == first_item.pk
    assert services.claim_next(project=project, annotator=members["admin"]).item_id == second_item.pk  # item 1 full
