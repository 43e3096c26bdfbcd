"""Work queues with claims: hand each person the next item that still has a free slot.

Shared by the onPanda annotation queue and the SWE Labeler review queue. A claim model has an item
foreign key, a holder foreign key, the item's project (`project`, copied from the item so that a
constraint can see it), `state` (active/done/skipped/released), `lease_expires_at`, `created_at` and
`updated_at`, plus two constraints: unique (item, holder), and unique (project, holder) among active
claims, so a person holds at most one active claim per queue however many tabs claim at once.

An item has `overlap` slots; a claim holds one while it is done, or active with a live lease. An item
also counts its done claims (`claims_done`, kept by `end_claim`), and the queue hands out items by
(claims_done descending, id) from an index on (project, -claims_done, id), starting at
claims_done = overlap - 1. So an item's overlap is completed before new items start (as Label
Studio's sequential sampling does), and the scan for a free item never walks through finished items.

**The item row is the lock.** Every change to who holds an item's slots (a new claim, a renewal, a
claim ending, a reassignment) first locks the item's row, then touches claim rows, and counts the
item's holders only after it holds that lock. So two transactions can never both count a slot as free:
the second one waits for the first, and its count (a new statement, under READ COMMITTED) sees the
first one's claim. (Renewing used to lock only the claim row: a renewal and a new claim on the same
item each counted the other's claim as not there, and items ended up over their overlap.) The order
is always item, then claim, so two of these transactions never wait on each other in a circle.

Why raw SQL: this is the hottest write path (50 annotators claiming at once), and the ORM spent about
4 ms of Python per claim building the same statements. A claim is one short transaction:
1. lock the item of the holder's active claim, if there is one, and renew the claim if its slot is
   still its own (a live lease, or an expired one that nobody took meanwhile);
2. else lock the first item with a free slot, `FOR UPDATE OF item SKIP LOCKED`, so concurrent
   claimers pass each other instead of queueing on one row (and if every free item is locked by a
   claimer in flight, wait for the first of them rather than answer that the queue is empty);
3. insert the claim only if the slot is still free, counted again by that INSERT (claims committed
   while step 2 waited are not in its snapshot), and only if the holder has no other active claim
   (`ON CONFLICT DO NOTHING`: another tab of the same person may have claimed meanwhile; the loop
   then finds and renews that claim).
SQLite has no row locks; its transactions are IMMEDIATE here (settings), which serialises writers.
"""

import functools
from collections.abc import Callable
from datetime import timedelta

from django.db import connection, models, transaction
from django.db.models import F, Model, Q
from django.utils import timezone

from dataplatform.errors import Refused


class ClaimState(models.TextChoices):
    ACTIVE = "active", "Active"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped"
    RELEASED = "released", "Released"


ACTIVE, DONE = ClaimState.ACTIVE.value, ClaimState.DONE.value


class ClaimBase(models.Model):
    """The fields every claim model shares. A subclass adds the item and holder foreign keys, a unique
    (item, holder) constraint and `one_active_claim_per_queue`."""

    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=ClaimState.choices, default=ClaimState.ACTIVE)
    lease_expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def one_active_claim_per_queue(*, holder_field: str, name: str) -> models.UniqueConstraint:
    """A person holds at most one active claim in a project's queue (with the unique (item, holder)
    constraint every claim model also has)."""
    return models.UniqueConstraint(fields=["project", holder_field], condition=Q(state=ACTIVE), name=name)


class ClaimRefused(Refused):
    """The claim cannot change that way (it has ended, or its slot went to someone else)."""


def claim_next(*, claim_model: type[Model], item_field: str, holder_field: str, project_id: int, holder_id: int,
               overlap: int, lease_minutes: int, ready: Q | None = None,
               counted: Callable[[dict[str, int]], None] | None = None):
    """The holder's active claim in the project, renewed; else a new claim on the next item of the project
    that is `ready` (e.g. answered by the model), that they never had and that has a free slot; else None.
    Items have a `project` foreign key and the (project, -claims_done, id) index. The claim's `is_new`
    says which of the two it is. `counted`, if given, is called in the transaction with each change to the
    project's claims by state ({"claims|<state>": +1 or -1}, see `state_change`) after it is written: a queue that
    keeps those counts (a tally) learns here of every change, the release of a lost lease included."""
    sql = _Sql.of(claim_model, item_field, holder_field)
    ready_sql, ready_params = _ready_condition(sql.item_model, ready)
    # SQLite's path (the embedded mode) has no row locks: no FOR UPDATE, no SKIP LOCKED. It holds because its
    # transactions begin IMMEDIATE (settings/database.py): BEGIN takes the file's one write lock, waiting up to the
    # busy timeout, so steps 1-3 run one claimer at a time across all threads and processes on the file, and every
    # count sees the claims committed before. A deferred BEGIN would take the lock at the first write instead,
    # and a claimer whose snapshot went stale meanwhile would fail at once, "database is locked" without waiting
    # (tests/integration/test_claim_races_sqlite.py fails on that).
    locks = connection.features.has_select_for_update_skip_locked
    now = timezone.now()
    lease = now + timedelta(minutes=lease_minutes)

    # No savepoint when a caller's transaction is open (annotate opens the session in the same one):
    # a savepoint is two more round trips, and a failure here fails the caller's whole transaction anyway.
    # A claim is soft state: if the server crashed in the next moment and lost it, the annotator would
    # simply claim again. Not waiting for the WAL flush halves its latency. The SET travels with the
    # first query (psycopg's client-side binding sends both in one message): one round trip fewer.
    asynchronous_commit = "SET LOCAL synchronous_commit TO OFF; " if connection.vendor == "postgresql" else ""
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        while True:
            # 1. The holder's active claim, its item locked (waiting for it: a claimer holding it is brief).
            cursor.execute(
                f"{asynchronous_commit}SELECT c.id, c.{sql.item} FROM {sql.claims} c "
                f"JOIN {sql.items} it ON it.id = c.{sql.item} "
                f"WHERE c.{sql.project} = %s AND c.{sql.holder} = %s AND c.state = '{ACTIVE}' "
                f"{'FOR UPDATE OF it' if locks else ''}",
                [project_id, holder_id])
            if asynchronous_commit:
                cursor.nextset()  # from the SET's empty result to the SELECT's
                asynchronous_commit = ""
            mine = cursor.fetchone()
            if mine is not None:
                claim_id, item_id = mine
                # Its slot is still its own unless the others fill the overlap (they may have taken it
                # while the lease was expired). Counted under the item's lock, in the UPDATE itself.
                renewed = _one(claim_model.objects.raw(
                    f"UPDATE {sql.claims} SET lease_expires_at = %s, updated_at = %s "
                    f"WHERE id = %s AND state = '{ACTIVE}' AND ({sql.holders_of('%s')} AND c.id <> %s) < %s "
                    f"RETURNING {sql.returning}",
                    [lease, now, claim_id, now, item_id, claim_id, overlap]))
                if renewed is not None:
                    renewed.is_new = False
                    return renewed
                # The lease ran out and someone else took the slot meanwhile (or another tab just ended
                # the claim): it is gone; look for a new item.
                cursor.execute(f"UPDATE {sql.claims} SET state = 'released', updated_at = %s "
                               f"WHERE id = %s AND state = '{ACTIVE}'", [now, claim_id])
                if counted and cursor.rowcount:
                    counted(state_change(ACTIVE, ClaimState.RELEASED.value))

            # 2. The first item with a free slot that this holder never had, passing the items other claimers
            # hold locked. If every free item was locked, the queue only looks empty: wait for the first one
            # instead of answering "nothing left". Two such waits never close a circle: a claimer here holds
            # only items it found full, and waits only for one that its newer snapshot finds free.
            scan = (f"SELECT it.id FROM {sql.items} it WHERE it.project_id = %s AND it.claims_done < %s {ready_sql} "
                    f"AND NOT EXISTS (SELECT 1 FROM {sql.claims} c WHERE c.{sql.item} = it.id AND c.{sql.holder} = %s) "
                    f"AND ({sql.holders_of('it.id')}) < %s ORDER BY it.claims_done DESC, it.id LIMIT 1")
            scan_params = [project_id, overlap, *ready_params, holder_id, now, overlap]
            cursor.execute(scan + (" FOR UPDATE OF it SKIP LOCKED" if locks else ""), scan_params)
            row = cursor.fetchone()
            if row is None and locks:
                cursor.execute(scan + " FOR UPDATE OF it", scan_params)
                row = cursor.fetchone()
            if row is None:
                return None
            # 3. The claim, if the slot is still free and the holder has no other active claim.
            created = _one(claim_model.objects.raw(
                f"INSERT INTO {sql.claims} ({sql.item}, {sql.holder}, {sql.project}, state, lease_expires_at, "
                f"created_at, updated_at) SELECT %s, %s, %s, '{ACTIVE}', %s, %s, %s "
                f"WHERE ({sql.holders_of('%s')}) < %s ON CONFLICT DO NOTHING RETURNING {sql.returning}",
                [row[0], holder_id, project_id, lease, now, now, now, row[0], overlap]))
            if created is not None:
                if counted:
                    counted(state_change(None, ACTIVE))
                created.is_new = True  # callers can skip looking for what an older claim would have
                return created
            # The slot filled up between the scan and the lock, or another tab of this holder claimed
            # meanwhile: the next round renews that claim, or scans again and sees the new claims.


def state_change(old: str | None, new: str) -> dict[str, int]:
    """A queue tally's change when a claim moves from `old` (None: a new claim) to `new`."""
    return {f"claims|{new}": 1} | ({f"claims|{old}": -1} if old else {})


def end_claim(*, claim_model: type[Model], item_field: str, claim_id: int, state: str,
              overlap: Callable[[], int], counted: Callable[[dict[str, int]], None] | None = None):
    """Move an active claim to `state` (done, skipped or released), under its item's lock, and return it.

    Done counts on the item's `claims_done`. Ending a claim that has already ended is refused, except
    done after done, which changes nothing (an accept sent twice). A claim whose lease ran out can be
    done only if its slot is still free: otherwise someone else holds it, and the item would be done
    more often than its overlap. `overlap` gives the item's overlap; it is asked only then (it may cost a
    query, which the common case, an accept within the lease, does not need)."""
    meta = claim_model._meta
    # The refusal is raised after the block: raised inside it, it would doom a caller's transaction
    # (no savepoint) even when the caller means to carry on.
    with transaction.atomic(savepoint=False):  # no savepoint inside a caller's transaction (accept's)
        item_id = lock_item_of(claim_model, item_field, claim_id)
        claim = claim_model.objects.select_for_update().get(pk=claim_id)
        refusal = _why_not(claim_model, item_field, item_id, claim, state, overlap)
        if refusal is None and claim.state != state:
            was, claim.state = claim.state, state
            claim.save(update_fields=["state", "updated_at"])
            if counted:  # after the write (a tally's add asks for that)
                counted(state_change(was, state))
            if state == DONE:
                meta.get_field(item_field).related_model.objects.filter(pk=item_id).update(
                    claims_done=F("claims_done") + 1)
    if refusal is not None:
        raise ClaimRefused(refusal)
    return claim


def _why_not(claim_model, item_field: str, item_id: int, claim, state: str, overlap: Callable[[], int]) -> str | None:
    """Why the locked claim cannot move to `state`, or None if it can (or already has: done twice)."""
    if claim.state == DONE and state == DONE:
        return None
    if claim.state != ACTIVE:
        return f"This claim is already {claim.state}."
    now = timezone.now()
    if state == DONE and claim.lease_expires_at <= now and holders(
            claim_model, item_field, item_id, now=now, excluding=claim.pk) >= overlap():
        return ("Your claim on this item expired and the item went to someone else meanwhile; nothing was saved "
                "as done. Claim the next item.")
    return None


def lock_item_of(claim_model: type[Model], item_field: str, claim_id: int) -> int:
    """Lock the claim's item row until the transaction ends (the lock every change to its slots takes
    first) and return its id: one statement, the claim joined in."""
    field = claim_model._meta.get_field(item_field)
    items = field.related_model.objects.select_for_update(of=("self",))
    return items.filter(**{f"{field.related_query_name()}__pk": claim_id}).values_list("pk", flat=True).get()


def holders(claim_model: type[Model], item_field: str, item_id: int, *, now, excluding: int | None = None) -> int:
    """How many claims hold a slot of the item (done, or active with a live lease), `excluding` one."""
    held = claim_model.objects.filter(Q(state=DONE) | Q(state=ACTIVE, lease_expires_at__gt=now),
                                      **{f"{item_field}_id": item_id})
    return held.exclude(pk=excluding).count() if excluding is not None else held.count()


class _Sql:
    """The quoted names of a claim model's tables and columns, for the raw statements above."""

    def __init__(self, claim_model: type[Model], item_field: str, holder_field: str):
        quote = connection.ops.quote_name
        meta = claim_model._meta
        self.item_model = meta.get_field(item_field).related_model
        self.claims = quote(meta.db_table)
        self.items = quote(self.item_model._meta.db_table)
        self.item = quote(meta.get_field(item_field).column)
        self.holder = quote(meta.get_field(holder_field).column)
        self.project = quote(meta.get_field("project").column)
        self.returning = ", ".join(quote(f.column) for f in meta.concrete_fields)

    @classmethod
    @functools.cache  # one per claim model and connection vendor, for the life of the process
    def of(cls, claim_model, item_field, holder_field) -> "_Sql":
        return cls(claim_model, item_field, holder_field)

    def holders_of(self, item: str) -> str:
        """The count of claims holding a slot of `item` (a column or a placeholder). Its parameters: "now",
        then the item if it is a placeholder."""
        return (f"SELECT count(*) FROM {self.claims} c WHERE (c.state = '{DONE}' OR (c.state = '{ACTIVE}' "
                f"AND c.lease_expires_at > %s)) AND c.{self.item} = {item}")


@functools.cache  # compiled once per process: a Q is hashable, and equal Qs compile alike
def _ready_condition(item_model: type[Model], ready: Q | None) -> tuple[str, tuple]:
    """`ready` as a condition on the scanned row itself ("AND it.rollout IS NOT NULL").

    Not `it.id IN (SELECT id FROM item WHERE ...)`: PostgreSQL answered that with a scan and a sort of
    the whole item table on every claim, 1,024 pages for 220 items in the load bench's project, and a
    claim would have slowed down with every item the project grew by."""
    if ready is None:
        return "", ()
    query = item_model.objects.filter(ready).query
    compiler = query.get_compiler(connection=connection)
    condition, params = compiler.compile(query.where)
    if len(query.alias_map) != 1:
        raise ValueError(f"ready={ready!r} must be a condition on {item_model.__name__}'s own columns (no joins).")
    # The compiled condition names the table; the scan calls it `it`.
    return "AND " + condition.replace(connection.ops.quote_name(item_model._meta.db_table) + ".", "it."), tuple(params)


def _one(rows):
    """The single row of a RETURNING statement as a model instance (RawQuerySet applies the field converters)."""
    return next(iter(rows), None)
