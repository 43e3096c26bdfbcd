"""Helpers for a kind's row generator: keyset pagination, one short query per batch.

Each batch is its own query (and, in autocommit, its own transaction), so an
export never holds a transaction open across the whole run, and only one batch
is ever in memory.
"""

import json
from collections.abc import Callable, Iterator

import pyarrow as pa
from django.db import connection
from django.db.models import QuerySet


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


def sql_keyset_batches(sql: str, params: dict, schema: pa.Schema, *, batch_size: int) -> Iterator[pa.RecordBatch]:
    """Yield RecordBatches from raw SQL, paginated on its first column.

    `sql` selects the schema's columns in order, the first being the key, and
    contains `%(after)s` (key > after) and `%(limit)s`, e.g.
    "SELECT id, text FROM t WHERE id > %(after)s ORDER BY id LIMIT %(limit)s".
    Rows become columns without ever being row dicts, which is what makes this the fast path.
    JSON columns may arrive as text (Django's PostgreSQL connection leaves jsonb undecoded,
    SQLite stores JSON as text); for list/struct/map fields such text is decoded here.
    """
    nested = [_is_nested(field.type) for field in schema]
    after = -(2**63)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(sql, {**params, "after": after, "limit": batch_size})
            rows = cursor.fetchall()
        if not rows:
            return
        columns = [
            [json.loads(value) if isinstance(value, str) else value for value in column] if is_nested else column
            for column, is_nested in zip(zip(*rows, strict=True), nested, strict=True)
        ]
        yield pa.RecordBatch.from_arrays(
            [pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)], schema=schema
        )
        after = rows[-1][0]


def _is_nested(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_struct(
        arrow_type) or pa.types.is_map(arrow_type)
