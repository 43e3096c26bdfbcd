"""A stored kind's live columns: read at export time beside its stored documents (stored.py), either as one SQL
expression a column (`StoredRows.live`, a subquery on the row's source) or as one JSON document a source
(`StoredRows.live_document`), read for a batch's sources in one query and matched to the rows by source id."""

import pyarrow as pa
import pyarrow.compute as pc
from django.db.models import OuterRef, QuerySet, TextField, Value
from django.db.models.functions import Cast, Concat

from dataplatform.conversations.training import text_schema

from . import arrow_reads
from .registry import ExportKind, ExportQuery, StoredRows

SOURCE = "source_id"
EMPTY_DOCUMENT = "{}\n"  # the live document of a source that has none (deleted since its rows were read)


def live_annotations(spec: StoredRows, query: ExportQuery, source: OuterRef) -> dict:
    """The live columns as annotations, under names of their own (a column may share a name with a model field).
    A kind with a live document reads it apart, for a batch's sources at once (`live_documents`)."""
    return {f"live_{name}": expression for name, expression in spec.live(query, source).items()}


def live_names(spec: StoredRows) -> list[str]:
    """What a batch reads beside the stored document for its live columns: each column, or the source's id, by
    which the live documents are matched to the rows."""
    return [SOURCE] if spec.live_document is not None else [f"live_{name}" for name in spec.live_columns]


def live_arrays(kind: ExportKind, query: ExportQuery, read: dict[str, pa.Array],
                adbc: arrow_reads.Connection | None) -> dict[str, pa.Array]:
    """The live columns of a batch from what was read under `live_names`."""
    spec = kind.stored
    if spec.live_document is None:
        return {name: read[f"live_{name}"] for name in spec.live_columns}
    sources = read[SOURCE]
    sources = sources.combine_chunks() if isinstance(sources, pa.ChunkedArray) else sources
    parsed = arrow_reads.parse_documents(live_documents(spec, query, sources, adbc),
                                         text_schema(pa.schema([kind.schema.field(name) for name in spec.live_columns])))
    return dict(zip(parsed.column_names, parsed.columns, strict=True))


def documents_of(spec: StoredRows, query: ExportQuery, source_ids: list[int]) -> QuerySet:
    """(source id, live document as one newline-terminated line of JSON) of each of `source_ids` that still exists,
    and perhaps of others between them: sources mostly close ranks (they are derived in id order), and a range of
    ids is what the planner joins best (120 ms for 10k trajectories, against 200 ms and 100 ms of quoting for the
    list of their ids), so a range is asked where it holds at most twice as many ids as the list."""
    line = Concat(Cast("live", TextField()), Value("\n"), output_field=TextField())
    documents = spec.live_document(query).order_by()
    if source_ids and max(source_ids) - min(source_ids) < 2 * len(source_ids):
        documents = documents.filter(pk__gte=min(source_ids), pk__lte=max(source_ids))
    else:
        documents = documents.filter(pk__in=source_ids)
    return documents.values_list("pk", line)


def live_documents(spec: StoredRows, query: ExportQuery, sources: pa.Array,
                   adbc: arrow_reads.Connection | None) -> pa.Array:
    """The live document of each row's source (`sources`), in the rows' order: one query for the batch's sources
    (`documents_of`), where a subquery for each row cost swe.trajectories twice as much (240 against 120 ms for
    10k rows). A source gone since its rows were read gives an empty document (its live columns null)."""
    wanted = pc.unique(sources).to_pylist()
    if adbc is not None:
        found = adbc.query(arrow_reads.bound_sql(documents_of(spec, query, wanted)))
        ids, documents = found.column(0).combine_chunks(), found.column(1).combine_chunks()
    else:
        pairs = list(documents_of(spec, query, wanted))
        ids, documents = pa.array([pk for pk, _ in pairs], pa.int64()), pa.array([line for _, line in pairs], pa.string())
    aligned = documents.take(pc.index_in(sources.cast(pa.int64()), value_set=ids.cast(pa.int64())))
    return pc.fill_null(aligned, EMPTY_DOCUMENT).cast(pa.string())


def live_values(spec: StoredRows, values: tuple) -> dict:
    """A source's live columns as Python values, from what `live_annotations` annotates."""
    return dict(zip(spec.live_columns, values, strict=True))
