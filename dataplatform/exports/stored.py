"""Stored kinds: rows derived once, when their source settles, and read by every export on the Arrow path.

A kind whose rows need Python (rendering and tokenizing a conversation, compressing a session's cache) paid that
at every export, row by row. A stored kind derives a source's rows once and keeps them (`StoredRow`, one JSON
document per row), so an export reads documents as fast as a values() kind reads its columns:

- `build(kind, query)` derives the rows of the sources the query selects that have none yet at the kind's
  version and the source's revision. The export runs it first (catch-up: an export is never short of a row),
  and a worker runs it soon after a source settles (`build_soon`) and every EXPORTS_BUILD_INTERVAL_SECONDS
  (`sweep`, which also drops rows nobody can read any more). A build remembers a check that found every row in
  place (`StoredCheck`), and checks again only once the selection or the stored rows changed. No transaction is
  open while rows are derived (a derivation may call the tokenizer); each page of rows is inserted in one short
  transaction, and a page two builders derived at once is inserted once (the rows of a source are the same
  whoever derives them).
- `read(kind, query)` reads the stored documents of the selected sources in keyset batches, with the kind's
  live columns (computed in SQL at read time: what changes in place, or is bounded by the export's data
  version, such as a latest review), in the kind's schema.
- `live_rows(kind, query)` gives what a live derivation gives now: the reference the stored rows are checked
  against (tests/exports/test_stored.py, bench/kinds_bench.py).

A source that changes in place names a `revision` field that changes with it (a version counter, an update
time): rows derived from an older revision no longer match it, so they are neither read nor kept. The revision
is read before the derivation reads the source, so a row is never labelled with a revision newer than its data.
"""

import json
import math
from collections.abc import Iterator
from datetime import date, datetime

import pyarrow as pa
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    CharField,
    Count,
    Exists,
    F,
    Max,
    OuterRef,
    QuerySet,
    Sum,
    TextField,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Concat

from dataplatform.accounts.models import Project
from dataplatform.conversations.training import text_schema
from dataplatform.dbfunctions import TextHash

from . import arrow_reads, stored_arrays, stored_live
from .models import StoredCheck, StoredRow
from .query_log import forget_logged_queries
from .registry import ExportKind, ExportQuery, StoredRows, all_kinds
from .stored_checks import remember_check, remembered_check
from .stored_windows import ARRAYS, Window, own_rows, windows
from .without_pandas import pandas_kept_out

# The stored document of each row, newline-terminated: one line of newline-delimited JSON.
DOCUMENT = "stored_document"
REVISION = "stored_revision"
# A build that derived this many sources refreshes the table's planner statistics, which the reads' plans use.
ANALYZE_AFTER = 2000
CHECK_PAGE = 1000  # sources whose stored rows a build looks up at once


class RowEncoder(json.JSONEncoder):
    """Times in full ISO 8601 with their offset, as pyarrow's JSON reader parses them (Django's encoder keeps
    milliseconds only)."""

    def default(self, o):
        if isinstance(o, datetime | date):
            return o.isoformat()
        return super().default(o)


def _revision(spec: StoredRows):
    # As text in SQL, both when a row is stored and when it is matched, so that the two always compare alike.
    return Cast(F(spec.revision), CharField()) if spec.revision else Value("", output_field=CharField())


def _current(kind: ExportKind, query: ExportQuery) -> QuerySet:
    """The selected sources with their revision as text."""
    return kind.stored.sources(query).annotate(**{REVISION: _revision(kind.stored)})


# --- building --------------------------------------------------------------------------------------------------
@pandas_kept_out()  # a worker's build converts rows with pyarrow as an export does (without_pandas.py)
def build(kind: ExportKind, query: ExportQuery) -> int:
    """Derive and store the rows of the sources `query` selects that have none at the kind's version and their
    revision; returns how many sources it derived.

    A check that finds every selected source with its rows is remembered (`StoredCheck`) with the fingerprint of
    the selection and of the kind's stored rows (`_fingerprint`, two aggregates): while both stay the same, a build
    checks nothing. (At 100k sources the check took 4.3 s of a 15 s export, the fingerprint takes a hundredth of
    that.) After deriving rows, the build checks once more, so that the next export finds the check remembered."""
    derived = 0
    for _ in range(2):
        fingerprint = _fingerprint(kind, query)
        if remembered_check(kind, query.project, SOURCES_CHECKED) == fingerprint:
            break
        missing = _derive_missing(kind, query)
        if not missing:
            remember_check(kind, query.project, SOURCES_CHECKED, fingerprint)
            break
        derived += missing
    forget_logged_queries()
    if derived >= ANALYZE_AFTER and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {StoredRow._meta.db_table}")
    return derived


SOURCES_CHECKED = "sources"


def _fingerprint(kind: ExportKind, query: ExportQuery) -> str:
    """The selected sources (how many, and a sum of a hash of each one's id and revision) and the kind's stored
    rows of the project (how many, and the highest id: ids only grow, so a row added and another deleted still
    change it). The sources are read first: a row stored after they were read counts as one more row."""
    pair = Concat(Cast("pk", TextField()), Value(":"), F(REVISION), output_field=TextField())
    sources = _current(kind, query).order_by().aggregate(count=Count("pk"), hashed=Sum(TextHash(pair)))
    rows = own_rows(kind, query).aggregate(count=Count("id"), last=Max("id"))
    return f"{sources['count']}:{sources['hashed'] or 0}:{rows['count']}:{rows['last'] or 0}"


def _derive_missing(kind: ExportKind, query: ExportQuery) -> int:
    """Derive and store the rows of the selected sources that have none; returns how many sources it derived.

    The sources are walked in keyset pages of CHECK_PAGE and each page's stored rows looked up by source id (the
    unique index), so the check costs the same whatever the planner's statistics say. (An anti-join of the
    sources against the stored rows, asked again for every page of a first build, was planned on a table never
    ANALYZEd as a nested loop over every stored row: 2,000 sources took 173 s on PostgreSQL.)"""
    spec = kind.stored
    derived, last = 0, 0
    while True:
        revisions = dict(_current(kind, query).filter(pk__gt=last).order_by("pk")
                         .values_list("pk", REVISION)[:CHECK_PAGE])
        if not revisions:
            return derived
        last = max(revisions)
        have = set(StoredRow.objects.filter(kind=kind.name, version=kind.version, source_id__in=list(revisions))
                   .values_list("source_id", "source_revision"))
        missing = [source_id for source_id, revision in revisions.items() if (source_id, revision) not in have]
        for start in range(0, len(missing), spec.page):
            page = missing[start:start + spec.page]
            _store(kind, query.project, {source_id: revisions[source_id] for source_id in page},
                   _derive(kind, query.project, page))
            derived += len(page)
            forget_logged_queries()  # DEBUG on: each page's inserts would stay in memory as SQL text


def _derive(kind: ExportKind, project: Project, source_ids: list[int]) -> dict[int, list[dict]]:
    """The rows of each source, checked against the kind's stored columns and as pyarrow reads them back."""
    rows_of: dict[int, list[dict]] = {source_id: [] for source_id in source_ids}
    order = []
    for source_id, row in kind.stored.derive(project, source_ids):
        if source_id not in rows_of:
            raise ValueError(f"Export kind {kind.name!r} derived a row of source {source_id}, which it was not given.")
        order.append(source_id)
        rows_of[source_id].append(row)
    # JSON-typed columns (pa.json_(): a message's tool calls, a tools list) are given and stored as their text.
    schema = text_schema(kind.stored.stored_schema(kind.schema))
    try:  # a row that does not fit the schema fails here, naming the kind, not in a later export
        checked = pa.Table.from_pylist([row for source_id in rows_of for row in rows_of[source_id]],
                                       schema=schema).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise ValueError(f"Export kind {kind.name!r} derived a row that does not fit its schema: {exc}") from exc
    rows = iter(checked)
    return {source_id: [next(rows) for _ in rows_of[source_id]] for source_id in rows_of}


def _store(kind: ExportKind, project: Project, revisions: dict[int, str], rows_of: dict[int, list[dict]]) -> None:
    stored, binary = [], kind.stored.binary_lists
    for source_id, rows in rows_of.items():
        # A source with no row keeps one empty row, so that it is not derived again at each export.
        for seq, row in enumerate(rows or [None]):
            arrays = None
            if row is not None and binary:
                row, arrays = stored_arrays.pack(kind.name, binary, row)
            stored.append(StoredRow(kind=kind.name, version=kind.version, project=project, source_id=source_id,
                                    source_revision=revisions[source_id], seq=seq,
                                    row=None if row is None else _as_json(kind, row), arrays=arrays))
    with transaction.atomic():
        StoredRow.objects.bulk_create(stored, batch_size=500, ignore_conflicts=True)


def _as_json(kind: ExportKind, row: dict) -> dict:
    # Through the encoder once, so that the JSONField stores plain JSON; NaN is not JSON (PostgreSQL refuses it).
    for name, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"Export kind {kind.name!r}: column {name!r} is {value}, which JSON cannot hold.")
    return json.loads(json.dumps(row, cls=RowEncoder))


def build_project(project: Project) -> dict[str, int]:
    """Build every stored kind's rows of `project` for the kinds' default filters: what a worker does soon after
    a source settles. Returns the sources derived per kind."""
    derived = {}
    for kind in stored_kinds():
        filters = kind.filters(data={})
        if not filters.is_valid():
            continue  # a kind with required filters has no default selection to build ahead
        query = ExportQuery(project=project, filters=filters.validated_data, data_version=kind.data_version(project))
        derived[kind.name] = build(kind, query)
    return derived


def build_soon(project_id: int) -> None:
    """Have a worker derive the project's new rows once the current transaction commits: call it where a source
    settles (a session accepted, a case submitted, a label reviewed). Settles within EXPORTS_BUILD_DEBOUNCE_SECONDS
    share one build; if the broker cannot be reached, the next sweep or export derives them instead."""
    if settings.EXPORTS_BUILD_AHEAD:
        transaction.on_commit(lambda: _send_build(project_id), robust=True)


def _send_build(project_id: int) -> None:
    from .tasks import build_stored_rows

    delay = settings.EXPORTS_BUILD_DEBOUNCE_SECONDS
    if cache.add(f"exports:stored-build:{project_id}", True, timeout=delay):
        build_stored_rows.apply_async(args=[project_id], countdown=delay)


def build_started(project_id: int) -> None:
    """A build of the project starts: a source that settles from now on asks for a build of its own."""
    cache.delete(f"exports:stored-build:{project_id}")


def sweep() -> dict:
    """Build every project's missing rows and delete the rows no export can read: those of another version or of
    a kind no longer registered, and those whose source changed or is gone."""
    current = {kind.name: kind for kind in stored_kinds()}
    dropped = StoredRow.objects.exclude(kind__in=current).delete()[0]
    StoredCheck.objects.exclude(kind__in=current).delete()
    for kind in current.values():
        StoredCheck.objects.filter(kind=kind.name).exclude(version=kind.version).delete()
        alive = kind.stored.model.objects.annotate(**{REVISION: _revision(kind.stored)}).filter(
            pk=OuterRef("source_id"), **{REVISION: OuterRef("source_revision")})
        rows = StoredRow.objects.filter(kind=kind.name)
        dropped += rows.exclude(version=kind.version).delete()[0]
        dropped += rows.filter(version=kind.version).filter(~Exists(alive)).delete()[0]
    derived = 0
    for project in Project.objects.all().iterator():
        derived += sum(build_project(project).values())
    return {"derived": derived, "dropped": dropped}


def stored_kinds() -> list[ExportKind]:
    return [kind for kind in all_kinds() if kind.stored is not None]


# --- reading ---------------------------------------------------------------------------------------------------
def read(kind: ExportKind, query: ExportQuery) -> tuple[str, Iterator[pa.RecordBatch]]:
    """The kind's rows as RecordBatches in its schema, after the catch-up, and the name of their read path. The
    catch-up runs first, so that the kind's notes count the rows of every selected source."""
    build(kind, query)
    if kind.stored.notes is not None:
        kind.stored.notes(query)
    path = "stored-postgresql-arrow" if _arrow() else "stored-orm"
    return path, _read(kind, query)


def _arrow() -> bool:
    """The Arrow path reads through a connection of its own, which sees committed rows only: inside a transaction
    (the caller's, a test's) the rows it just built or wrote are read through Django's connection instead."""
    return arrow_reads.available() and not transaction.get_connection().in_atomic_block


def _read(kind: ExportKind, query: ExportQuery) -> Iterator[pa.RecordBatch]:
    binary = kind.stored.binary_lists
    live_names = stored_live.live_names(kind.stored)
    names = ["id", DOCUMENT, *live_names, *([ARRAYS] if binary else [])]
    if not _arrow():
        for rows, _ in _window_rows(kind, query):
            columns = list(zip(*rows.values_list(*names), strict=True)) or [[] for _ in names]
            if columns[0]:
                live = {name: pa.array(values) for name, values in zip(live_names, columns[2:2 + len(live_names)],
                                                                       strict=True)}
                # bytes on SQLite, a memoryview from psycopg
                blobs = pa.array([bytes(blob) for blob in columns[-1]], pa.binary()) if binary else None
                yield _shaped(kind, pa.array(columns[1], pa.string()), stored_live.live_arrays(kind, query, live), blobs)
        return
    # PostgreSQL: the documents arrive as one Arrow text column, parsed in C++. A window's rows and live documents are
    # read on a connection and thread of their own while the window before is parsed.
    queries = ([arrow_reads.bound_sql(rows.values(*names))] + (
        [arrow_reads.bound_sql(stored_live.window_documents(kind, query, window))]
        if kind.stored.live_document is not None else []) for rows, window in _window_rows(kind, query))
    with arrow_reads.Connection() as ahead:
        for table, *documents in arrow_reads.read_ahead(ahead, queries):
            table = table.combine_chunks()
            if table.num_rows:
                live = stored_live.live_arrays(kind, query, {name: table.column(name) for name in live_names},
                                               *documents)
                blobs = table.column(ARRAYS).combine_chunks() if binary else None
                yield _shaped(kind, table.column(DOCUMENT), live, blobs)
                del live, blobs
            del table, documents
            arrow_reads.give_back_freed_memory()


def _window_rows(kind: ExportKind, query: ExportQuery) -> Iterator[tuple[QuerySet, Window]]:
    """The stored rows of the selected sources in each window (`stored_windows.windows`), in id order."""
    for window in windows(kind, query):
        # The sources' check reads only the window's range of sources: on all of them, PostgreSQL hashed every
        # selected source for each window (105 ms of 100k trajectories, for 10k rows).
        yield (_stored_rows(kind, query, sources=(window.first, window.last)).filter(**window.bounds).order_by("id"),
               window)


def _stored_rows(kind: ExportKind, query: ExportQuery, *, sources: tuple[int, int] | None = None) -> QuerySet:
    """The stored rows of the selected sources (those with ids in the range `sources`, if given) at their current
    revision, with the document and live columns."""
    spec = kind.stored
    selected = _current(kind, query)
    if sources is not None:
        selected = selected.filter(pk__gte=sources[0], pk__lte=sources[1])
    selected = selected.filter(pk=OuterRef(stored_live.SOURCE), **{REVISION: OuterRef("source_revision")})
    return (_kept(kind, query, own_rows(kind, query).filter(row__isnull=False))
            .filter(Exists(selected))
            .annotate(**{DOCUMENT: Concat(Cast("row", TextField()), Value("\n"), output_field=TextField())})
            .annotate(**stored_live.live_annotations(spec, query, OuterRef(stored_live.SOURCE))))


def sources_without_rows(kind: ExportKind, query: ExportQuery) -> QuerySet:
    """The selected sources whose derivation, at their current revision, gave no row (once `build` ran): what a
    kind's notes count as left out where the reason lies in the derivation itself."""
    empty = StoredRow.objects.filter(kind=kind.name, version=kind.version, source_id=OuterRef("pk"),
                                     source_revision=OuterRef(REVISION), row__isnull=True)
    return _current(kind, query).filter(Exists(empty))


def _kept(kind: ExportKind, query: ExportQuery, rows: QuerySet) -> QuerySet:
    """The stored rows whose `keep` columns hold a kept value."""
    for number, (column, kept) in enumerate(kind.stored.keep(query).items()):
        as_integer = pa.types.is_integer(kind.schema.field(column).type)
        value = Cast(KeyTextTransform(column, "row"), BigIntegerField() if as_integer else TextField())
        rows = rows.annotate(**{f"kept_{number}": value}).filter(**{f"kept_{number}__in": kept})
    return rows


def _keeps(kind: ExportKind, query: ExportQuery):
    """`keep` as a test of a derived row (live_rows)."""
    kept = {column: set(values) for column, values in kind.stored.keep(query).items()}
    return lambda row: all(row[column] in values for column, values in kept.items())


def _shaped(kind: ExportKind, documents: pa.Array | pa.ChunkedArray, live: dict[str, pa.Array],
            blobs: pa.Array | None = None) -> pa.RecordBatch:
    if isinstance(documents, pa.ChunkedArray):  # one chunk (a combined table's column): combining copies nothing
        documents = documents.combine_chunks()
    spec = kind.stored
    document_schema = pa.schema([field for field in spec.stored_schema(kind.schema)
                                 if field.name not in spec.binary_lists])
    parsed = arrow_reads.parse_documents(documents, text_schema(document_schema))
    columns = {**dict(zip(parsed.column_names, parsed.columns, strict=True)), **live}
    if spec.binary_lists:
        columns.update(stored_arrays.unpack(blobs, spec.binary_lists))
    return pa.RecordBatch.from_arrays([arrow_reads.as_type(columns[field.name], field) for field in kind.schema],
                                      schema=kind.schema)


# --- the reference ---------------------------------------------------------------------------------------------
def live_rows(kind: ExportKind, query: ExportQuery, *, source_ids: list[int] | None = None) -> list[dict]:
    """The rows a live derivation gives now for the selected sources (or those of them in `source_ids`), in the
    order of the sources and of each source's rows, as pyarrow reads them back in the kind's schema."""
    spec = kind.stored
    sources = spec.sources(query)
    if source_ids is not None:
        sources = sources.filter(pk__in=source_ids)
    if spec.live_document is not None:
        ids = set(sources.values_list("pk", flat=True))
        # Asked by range, the documents may hold unselected sources between the selected ones: only these count.
        live = {pk: json.loads(line) for pk, line in stored_live.documents_of(spec, query, list(ids)) if pk in ids}
    else:
        annotated = sources.annotate(**stored_live.live_annotations(spec, query, OuterRef("pk")))
        live = {values[0]: stored_live.live_values(spec, values[1:])
                for values in annotated.values_list("pk", *stored_live.live_names(spec))}
    ids, keeps = sorted(live), _keeps(kind, query)
    rows = []
    for start in range(0, len(ids), spec.page):
        for source_id, source_rows in _derive(kind, query.project, ids[start:start + spec.page]).items():
            rows.extend({**row, **live[source_id]} for row in source_rows if keeps(row))
    return pa.Table.from_pylist(rows, schema=text_schema(kind.schema)).cast(kind.schema).to_pylist()


def stored_read_rows(kind: ExportKind, query: ExportQuery) -> list[dict]:
    """What an export of the kind reads (stored documents and live columns), in the order of `live_rows`."""
    _, batches = read(kind, query)
    table = pa.Table.from_batches(list(batches), schema=kind.schema)
    keys = _stored_rows(kind, query).order_by("id").values_list("source_id", "seq")
    return [row for _, row in sorted(zip(keys, table.to_pylist(), strict=True), key=lambda pair: pair[0])]
