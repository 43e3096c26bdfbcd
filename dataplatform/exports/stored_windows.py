"""The windows a stored kind's export reads its rows in (stored.py): ranges of stored row ids, each about as many
rows as a batch holds."""

from collections.abc import Iterator
from typing import NamedTuple

from django.conf import settings
from django.db.models import Count, Max, Min, QuerySet, TextField
from django.db.models.functions import Cast, Coalesce, Length

from .models import StoredRow
from .registry import ExportKind, ExportQuery

ARRAYS = "arrays"  # StoredRow.arrays: the binary list columns (stored_arrays.py)
SIZE_SAMPLE = 200  # stored rows whose size sets the rows of a batch (rows_per_batch)


class Window(NamedTuple):
    after: int  # its stored rows' ids: after `after`, up to `upto` (None: every one after `after`)
    upto: int | None
    first: int  # the lowest and highest source id of its rows
    last: int
    rows: int  # how many rows it holds

    @property
    def bounds(self) -> dict:
        """Its stored rows' ids, as filters."""
        return {"id__gt": self.after, **({} if self.upto is None else {"id__lte": self.upto})}


def windows(kind: ExportKind, query: ExportQuery) -> Iterator[Window]:
    """Ranges of stored row ids, `rows_per_batch` stored rows each (the last one open-ended), in id order, each with
    the span of its rows' sources; one query a window.

    Each batch reads one range: the index finds it, and the sources' check and live columns run on its rows
    only. (A keyset query on the joined rows, `id > last ORDER BY id LIMIT n`, had PostgreSQL join and sort
    every row after `last`, batch after batch.)"""
    size = rows_per_batch(kind, query)
    after = 0
    while True:
        # The span of the next rows read by the index, then aggregated: asked of the rows themselves, PostgreSQL found
        # the lowest and highest source id by walking the kind's rows of every project in source order (~45 ms a
        # window, against ~5).
        span = own_rows(kind, query).filter(id__gt=after).order_by("id").values("id", "source_id")[:size].aggregate(
            upto=Max("id"), first=Min("source_id"), last=Max("source_id"), rows=Count("id"))
        if not span["rows"]:
            return
        full = span["rows"] == size
        yield Window(after, span["upto"] if full else None, span["first"], span["last"], span["rows"])
        if not full:
            return
        after = span["upto"]


def rows_per_batch(kind: ExportKind, query: ExportQuery) -> int:
    """The export's batch size, or fewer rows where the kind's documents are large: about EXPORT_STORED_BATCH_BYTES
    of JSON text a batch (the newest rows' average size), which the reader holds as text and as parsed columns.
    (Ten thousand .panda.json documents of ~7 KB each took a worker to 406 MB.) Binary lists count twice their
    bytes: their 32-bit values are read as 64-bit ones."""
    size = Length(Cast("row", TextField()))
    if kind.stored.binary_lists:
        size = size + 2 * Coalesce(Length(ARRAYS), 0)
    sizes = list(own_rows(kind, query).filter(row__isnull=False).order_by("-id")
                 .annotate(size=size).values_list("size", flat=True)[:SIZE_SAMPLE])
    if not sizes:
        return query.batch_size
    average = sum(sizes) / len(sizes)
    return max(1, min(query.batch_size, int(settings.EXPORT_STORED_BATCH_BYTES / max(average, 1))))


def own_rows(kind: ExportKind, query: ExportQuery) -> QuerySet:
    """The project's stored rows of the kind at its version."""
    return StoredRow.objects.filter(kind=kind.name, version=kind.version, project=query.project)
