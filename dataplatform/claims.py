"""Work queues with claims: hand each person the next item that still has a free slot.

Shared by the onPanda annotation queue and the SWE Labeler review queue. A claim model has
an item foreign key, a holder foreign key, `state` (active/done/skipped/released),
`lease_expires_at`, `created_at` and `updated_at`, and a unique (item, holder) constraint.
An item has `overlap` slots; a claim holds one while it is done, or active with a live lease.
An item also counts its done claims (`claims_done`, kept by `mark_done`), and the queue hands out
items by (claims_done descending, id) from an index on (project, -claims_done, id), starting at
claims_done = overlap - 1. So an item's overlap is completed before new items start (as Label
Studio's sequential sampling does), and the scan for a free item never walks through finished
items. (Ordered by id alone, it counted the claims of every finished item first, so a claim got
slower as the project progressed: 8 ms of planning and scanning after 1,100 done items.)

Why raw SQL: this is the hottest write path (50 annotators claiming at once), and the ORM
spent about 4 ms of Python per claim building the same four statements. Here a claim is one
short transaction of three statements:
1. renew the holder's own active claim, if there is one;
2. lock the first item with a free slot, `FOR UPDATE OF item SKIP LOCKED`, so concurrent
   claimers pass each other instead of queueing on one row;
3. insert the claim only if the slot is still free, counted again by that INSERT: it is a new
   statement, so under READ COMMITTED it sees claims committed while step 2 waited, which the
   snapshot of step 2 may not. Two claimers can therefore never take an item's last slot together.
SQLite has no row locks; its transactions are IMMEDIATE here (settings), which serialises writers.
"""

import functools
from datetime import timedelta

from django.db import connection, models, transaction
from django.db.models import F, Model, Q
from django.utils import timezone


class ClaimState(models.TextChoices):
    ACTIVE = "active", "Active"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped"
    RELEASED = "released", "Released"


class ClaimBase(models.Model):
    """The fields every claim model shares. A subclass adds the item and holder foreign keys and
    a unique (item, holder) constraint."""

    state = models.CharField(max_length=16, choices=ClaimState.choices, default=ClaimState.ACTIVE)
    lease_expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


ACTIVE, DONE = ClaimState.ACTIVE.value, ClaimState.DONE.value


def claim_next(*, claim_model: type[Model], item_field: str, holder_field: str, project_id: int, holder_id: int,
               overlap: int, lease_minutes: int, ready: Q | None = None):
    """The holder's active claim on an item of the project, renewed; else a new claim on the next item
    of the project that is `ready` (e.g. answered by the model), that they never had and that has a
    free slot; else None. Items have a `project` foreign key and the (project, -claims_done, id) index.
    The claim's `is_new` says which of the two it is."""
    quote = connection.ops.quote_name
    meta = claim_model._meta
    table = quote(meta.db_table)
    item_col = quote(meta.get_field(item_field).column)
    holder_col = quote(meta.get_field(holder_field).column)
    item_model = meta.get_field(item_field).related_model
    item_table = quote(item_model._meta.db_table)
    returning = ", ".join(quote(f.column) for f in meta.concrete_fields)
    ready_sql, ready_params = _ready_condition(item_model, ready)
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
        cursor.execute(
            f"{asynchronous_commit}SELECT c.id, c.{item_col}, c.lease_expires_at > %s FROM {table} c "
            f"JOIN {item_table} it ON it.id = c.{item_col} WHERE c.{holder_col} = %s AND c.state = '{ACTIVE}' "
            f"AND it.project_id = %s ORDER BY c.id LIMIT 1{' FOR UPDATE OF c' if locks else ''}",
            [now, holder_id, project_id])
        if asynchronous_commit:
            cursor.nextset()  # from the SET's empty result to the SELECT's
        mine = cursor.fetchone()
        if mine is not None:
            claim_id, item_id, live = mine
            if live or _holders(cursor, table, item_col, item_id, now, excluding=claim_id) < overlap:
                renewed = _one(claim_model.objects.raw(
                    f"UPDATE {table} SET lease_expires_at = %s, updated_at = %s WHERE id = %s RETURNING {returning}",
                    [lease, now, claim_id]))
                renewed.is_new = False
                return renewed
            # The lease ran out and someone else took the slot meanwhile: this claim is gone.
            cursor.execute(f"UPDATE {table} SET state = 'released', updated_at = %s WHERE id = %s", [now, claim_id])

        while True:
            cursor.execute(
                f"SELECT it.id FROM {item_table} it WHERE it.project_id = %s AND it.claims_done < %s {ready_sql} "
                f"AND NOT EXISTS (SELECT 1 FROM {table} c WHERE c.{item_col} = it.id AND c.{holder_col} = %s) "
                f"AND ({_HOLDERS.format(table=table, item_col=item_col)} AND c.{item_col} = it.id) < %s "
                f"ORDER BY it.claims_done DESC, it.id LIMIT 1{' FOR UPDATE OF it SKIP LOCKED' if locks else ''}",
                [project_id, overlap, *ready_params, holder_id, now, overlap])
            row = cursor.fetchone()
            if row is None:
                return None
            created = _one(claim_model.objects.raw(
                f"INSERT INTO {table} ({item_col}, {holder_col}, state, lease_expires_at, created_at, updated_at) "
                f"SELECT %s, %s, '{ACTIVE}', %s, %s, %s "
                f"WHERE ({_HOLDERS.format(table=table, item_col=item_col)} AND c.{item_col} = %s) < %s "
                f"RETURNING {returning}",
                [row[0], holder_id, lease, now, now, now, row[0], overlap]))
            if created is not None:
                created.is_new = True  # callers can skip looking for what an older claim would have
                return created
            # Filled up between the scan and the lock; the next scan sees the new claim and moves on.


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


def mark_done(*, claim_model: type[Model], item_field: str, claim_id: int) -> None:
    """Mark a claim done and count it on its item (once, however often this is called)."""
    meta = claim_model._meta
    item_model = meta.get_field(item_field).related_model
    with transaction.atomic(savepoint=False):  # no savepoint inside a caller's transaction (accept's)
        claim = claim_model.objects.select_for_update().get(pk=claim_id)
        if claim.state == DONE:
            return
        claim.state = DONE
        claim.save(update_fields=["state", "updated_at"])
        item_model.objects.filter(pk=getattr(claim, meta.get_field(item_field).attname)).update(
            claims_done=F("claims_done") + 1)


# The claims holding a slot of an item: done, or active with a live lease (the %s is "now").
_HOLDERS = ("SELECT count(*) FROM {table} c WHERE (c.state = 'done' OR (c.state = 'active' "
            "AND c.lease_expires_at > %s))")


def _holders(cursor, table: str, item_col: str, item_id: int, now, *, excluding: int) -> int:
    """How many claims other than `excluding` hold a slot of the item."""
    cursor.execute(f"{_HOLDERS.format(table=table, item_col=item_col)} AND c.{item_col} = %s AND c.id <> %s",
                   [now, item_id, excluding])
    return cursor.fetchone()[0]


def _one(rows):
    """The single row of a RETURNING statement as a model instance (RawQuerySet applies the field converters)."""
    return next(iter(rows), None)
