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
from .stored_windows import Window, own_rows

SOURCE = "source_id"
EMPTY_DOCUMENT = "{}\n"  # the live document of a source that has none (deleted since its rows were read)
LINE = Concat(Cast("live", TextField()), Value("\n"), output_field=TextField())  # a live document, one line of JSON


def live_annotations(spec: StoredRows, query: ExportQuery, source: OuterRef) -> dict:
    """The live columns as annotations, under names of their own (a column may share a name with a model field).
    A kind with a live document reads it apart, for a batch's sources at once (`window_documents`)."""
    return {f"live_{name}": expression for name, expression in spec.live(query, source).items()}


def live_names(spec: StoredRows) -> list[str]:
    """What a batch reads beside the stored document for its live columns: each column, or the source's id, by
    which the live documents are matched to the rows."""
    return [SOURCE] if spec.live_document is not None else [f"live_{name}" for name in spec.live_columns]


def live_arrays(kind: ExportKind, query: ExportQuery, read: dict[str, pa.Array],
                documents: pa.Table | None = None) -> dict[str, pa.Array]:
    """The live columns of a batch from what was read under `live_names` and, for a kind with a live document, the
    (source id, document) table read beside it (`window_documents`; read now through Django's connection if None)."""
    spec = kind.stored
    if spec.live_document is None:
        return {name: read[f"live_{name}"] for name in spec.live_columns}
    sources = read[SOURCE]
    sources = sources.combine_chunks() if isinstance(sources, pa.ChunkedArray) else sources
    if documents is None:
        pairs = list(documents_of(spec, query, pc.unique(sources).to_pylist()))
        ids, lines = pa.array([pk for pk, _ in pairs], pa.int64()), pa.array([line for _, line in pairs], pa.string())
    else:
        ids, lines = documents.column(0).combine_chunks(), documents.column(1).combine_chunks()
    parsed = arrow_reads.parse_documents(_aligned(sources, ids, lines),
                                         text_schema(pa.schema([kind.schema.field(name) for name in spec.live_columns])))
    return dict(zip(parsed.column_names, parsed.columns, strict=True))


def _within(documents: QuerySet, first: int, last: int, count: int, listed) -> QuerySet:
    """Sources mostly close ranks (they are derived in id order), and a range of ids is what the planner joins best
    (120 ms for 10k trajectories, against 200 ms and 100 ms of quoting for the list of their ids): the documents
    from `first` to `last` where that range holds at most twice `count` ids, else those `listed`."""
    if last - first < 2 * count:
        return documents.filter(pk__gte=first, pk__lte=last)
    return documents.filter(pk__in=listed)


def documents_of(spec: StoredRows, query: ExportQuery, source_ids: list[int]) -> QuerySet:
    """(source id, live document as one newline-terminated line of JSON) of each of `source_ids` that still exists,
    and perhaps of others between them (`_within`)."""
    documents = spec.live_document(query).order_by()
    if source_ids:
        documents = _within(documents, min(source_ids), max(source_ids), len(source_ids), source_ids)
    else:
        documents = documents.none()
    return documents.values_list("pk", LINE)


def window_documents(kind: ExportKind, query: ExportQuery, window: Window) -> QuerySet:
    """`documents_of` the sources of a window of stored rows, asked before its rows are read, so that both are read
    ahead together: the range of its sources where they close ranks, else its sources themselves by a subquery on the
    window's rows."""
    listed = own_rows(kind, query).filter(**window.bounds).values(SOURCE)
    documents = kind.stored.live_document(query).order_by()
    return _within(documents, window.first, window.last, window.rows, listed).values_list("pk", LINE)


def _aligned(sources: pa.Array, ids: pa.Array, lines: pa.Array) -> pa.Array:
    """The live document of each row's source (`sources`), in the rows' order: one query for the batch's sources,
    where a subquery for each row cost swe.trajectories twice as much (240 against 120 ms for 10k rows). A source
    gone since its rows were read gives an empty document (its live columns null)."""
    aligned = lines.take(pc.index_in(sources.cast(pa.int64()), value_set=ids.cast(pa.int64())))
    return pc.fill_null(aligned, EMPTY_DOCUMENT).cast(pa.string())


def live_values(spec: StoredRows, values: tuple) -> dict:
    """A source's live columns as Python values, from what `live_annotations` annotates."""
    return dict(zip(spec.live_columns, values, strict=True))
