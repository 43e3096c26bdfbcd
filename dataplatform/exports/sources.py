"""Where an export's rows come from: keyset pagination, one short query per batch, and the choice of read path.

Each batch is its own query (and, in autocommit, its own transaction), so an
export never holds a transaction open across the whole run, and only one batch
is ever in memory.
"""

from collections.abc import Callable, Iterator

import pyarrow as pa
from django.db.models import QuerySet

from . import arrow_reads


def keyset_values(
    queryset: QuerySet, fields: list[str], *, batch_size: int, transform: Callable[[dict], dict] | None = None
) -> Iterator[list[dict]]:
    """Yield lists of `queryset.values(*fields)` dicts in primary-key order, `batch_size` at a time.

    `fields` must include "id". `transform` turns a values() dict into an export row.
    """
    if "id" not in fields:
        raise ValueError("keyset_values needs 'id' among the fields: it is the pagination key.")
    last_id = None
    while True:
        page = queryset.order_by("id")
        if last_id is not None:
            page = page.filter(id__gt=last_id)
        rows = list(page.values(*fields)[:batch_size])
        if not rows:
            return
        last_id = rows[-1]["id"]
        yield [transform(row) for row in rows] if transform else rows


def keyset_pages(queryset: QuerySet, *, batch_size: int) -> Iterator[list]:
    """Yield lists of `queryset`'s objects in primary-key order, `batch_size` at a time: for rows made from
    the objects and what they prefetch, where `keyset_values` reads plain values."""
    last_id = 0
    while True:
        page = list(queryset.filter(id__gt=last_id).order_by("id")[:batch_size])
        if not page:
            return
        last_id = page[-1].pk
        yield page


def read_batches(kind, query) -> tuple[str, Iterator[pa.RecordBatch]]:
    """The kind's rows as RecordBatches in its schema, and the name of the read path they take:

    - "postgresql-arrow": a values kind on PostgreSQL, read as Arrow (arrow_reads.py);
    - "orm-values": a values kind elsewhere (SQLite, the embedded mode), through the ORM in keyset batches;
    - "rows": a kind that computes its rows in Python, batch by batch;
    - "stored-postgresql-arrow" / "stored-orm": a stored kind's documents (stored.py), on either path.
    """
    if kind.stored is not None:
        from . import stored

        return stored.read(kind, query)
    if kind.rows is not None:
        return "rows", (as_record_batch(batch, kind) for batch in kind.rows(query))
    return values_batches(kind.values(query), kind.schema, batch_size=query.batch_size, renamed=kind.renamed,
                          keys=kind.keys(query) if kind.keys else None)


def values_batches(queryset: QuerySet, schema: pa.Schema, *, batch_size: int, renamed: dict[str, str] | None = None,
                   keys: QuerySet | None = None) -> tuple[str, Iterator[pa.RecordBatch]]:
    """A values() queryset's rows as RecordBatches in `schema`, in id order, and the read path's name: as Arrow on
    PostgreSQL (batches cut by `keys`' ids: ArrowKeysetReader), through the ORM in keyset batches elsewhere."""
    if arrow_reads.available():
        reader = arrow_reads.ArrowKeysetReader(queryset, schema, batch_size=batch_size, renamed=renamed, keys=keys)
        return "postgresql-arrow", reader.batches()
    pages = keyset_values(queryset, arrow_reads.values_names(queryset), batch_size=batch_size,
                          transform=_renaming(renamed))
    return "orm-values", (pa.RecordBatch.from_pylist(page, schema=schema) for page in pages)


def _renaming(renamed) -> Callable[[dict], dict] | None:
    """A values() dict with its columns under the schema's names (a renamed-over "id", the keyset, is replaced)."""
    if not renamed:
        return None

    def rename(row: dict) -> dict:
        for name, schema_name in renamed.items():
            row[schema_name] = row.pop(name)
        return row
    return rename


def as_record_batch(batch, kind) -> pa.RecordBatch:
    if isinstance(batch, pa.RecordBatch):
        if not batch.schema.equals(kind.schema):
            raise TypeError(f"Export kind {kind.name} yielded a batch whose schema is not the kind's schema.")
        return batch
    return pa.RecordBatch.from_pylist(batch, schema=kind.schema)
