"""The Arrow-native read path: a kind's values() queryset read from PostgreSQL as Arrow record batches.

Rows never become Python objects. The kind's queryset is compiled by Django once and bound by psycopg
(client side, so quoting is psycopg's); each keyset batch wraps it with its bound and runs through the
ADBC PostgreSQL driver, which reads the result with COPY in binary form straight into Arrow columns. Plain columns arrive in their
Arrow types. JSON documents (json/jsonb columns a nested schema field reads) are wrapped by PostgreSQL
into one JSON object per row, ending in a newline, so the text column's data buffer is already
newline-delimited JSON: pyarrow's JSON reader parses it into the schema's list/struct types in C++,
with no copy before it.

Each batch is its own query in autocommit, as on the ORM path: no transaction stays open for the
whole export. The next batch's query runs on a thread of its own while this one is parsed (`read_ahead`), so
PostgreSQL never waits for the parser.
"""

import ctypes
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json
from django.db import connection
from django.db.models import QuerySet
from psycopg.conninfo import make_conninfo

# The wrapped JSON documents' column: a name no schema uses (export columns are plain identifiers).
DOCUMENT_COLUMN = "__json_documents__"
KEY_COLUMN = "__keyset__"  # the keyset key, where the schema's column of its name is another (ExportKind.renamed)
JSON_TYPES = {"json", "jsonb"}
RECORD_BATCH_BYTES = 4 << 20
PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def available() -> bool:
    """Whether the Arrow-native path can serve this process's database."""
    return connection.vendor == "postgresql"


class Connection:
    """One ADBC connection to the database Django uses (the test database under the tests), in autocommit
    (ADBC's default), with one statement that runs query after query.

    Through the driver manager's own API: its DB-API module imports pandas and polars (~90 MB) for helpers
    this path never uses."""

    def __init__(self):
        import adbc_driver_manager
        import adbc_driver_postgresql

        params = connection.get_connection_params()
        # Only libpq's own keywords: Django adds psycopg objects (cursor_factory, context) beside them.
        libpq = {key: value for key, value in params.items() if isinstance(value, str | int)}
        # No JIT: an export's read costs over jit_above_cost, and compiling it took 205 ms of an 806 ms batch
        # (swe.trajectories, 10k rows), for every batch, to speed up row work that is mostly index lookups.
        libpq["options"] = f"{libpq.get('options', '')} -c jit=off".strip()
        conninfo = make_conninfo(**libpq)
        self._database = adbc_driver_postgresql.connect(conninfo)
        self._connection = adbc_driver_manager.AdbcConnection(self._database)
        self._statement = adbc_driver_manager.AdbcStatement(self._connection)
        # The driver cuts a result into record batches of about this size (16 MB by default): smaller
        # batches keep its growing buffers, and the worker's memory, small.
        self._statement.set_options(**{adbc_driver_postgresql.StatementOptions.BATCH_SIZE_HINT_BYTES.value:
                                       str(RECORD_BATCH_BYTES)})

    def query(self, sql: str) -> pa.Table:
        self._statement.set_sql_query(sql)
        stream, _ = self._statement.execute_query()
        return pa.RecordBatchReader.from_stream(stream).read_all()

    def close(self) -> None:
        for handle in (self._statement, self._connection, self._database):
            handle.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def values_names(queryset: QuerySet) -> list[str]:
    """The names of a values() queryset's columns in the order of its SELECT (as Django's ValuesIterable
    names them)."""
    query = queryset.query
    return [*query.extra_select, *query.values_select, *query.annotation_select]


def bound_sql(queryset: QuerySet) -> str:
    """The queryset's SQL with its parameters bound by psycopg."""
    sql, params = queryset.query.sql_with_params()
    return connection.ops.compose_sql(sql, params)


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def is_nested(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_struct(
        arrow_type) or pa.types.is_map(arrow_type)


class ArrowKeysetReader:
    """Reads a values() queryset in batches of at most `batch_size` rows, ordered by `key` (the values' column of
    the model's own id), each batch a RecordBatch in `schema`."""

    def __init__(self, queryset: QuerySet, schema: pa.Schema, *, batch_size: int, key: str = "id",
                 renamed: dict[str, str] | None = None, keys: QuerySet | None = None):
        """`renamed`: {values() column: schema column} (ExportKind.renamed); a key it renames over is read under
        KEY_COLUMN and not written. `keys`: the rows of the queryset's model whose ids cut the batches
        (ExportKind.keys); by default every row of its table."""
        renamed = renamed or {}
        names = [renamed.get(name, name) for name in values_names(queryset)]
        if key in renamed:  # read under the schema's name for it
            key = renamed[key]
        elif key in renamed.values():
            names[values_names(queryset).index(key)], key = KEY_COLUMN, KEY_COLUMN
        if sorted(name for name in names if name != KEY_COLUMN) != sorted(schema.names):
            raise ValueError(f"The values() columns {names} are not the schema's columns {schema.names}.")
        self.schema, self.batch_size, self.key = schema, batch_size, key
        # Composed once, here, with Django's connection: the batches' queries only add the keyset bound.
        # (No ORDER BY inside, so that PostgreSQL can push the bound down into the subquery's index scan.)
        self.rows_sql = f"({bound_sql(queryset.order_by())}) AS q ({', '.join(quote(name) for name in names)})"
        self.json_columns: list[str] = []  # found from the database's column types when reading starts
        # The key is the id of the queryset's model (keyset_values' rule): the batches' windows are ranges of it.
        if keys is not None and keys.model is not queryset.model:
            raise ValueError(f"The keys are {keys.model.__name__} rows, the values() rows {queryset.model.__name__}'s.")
        keys = queryset.model._base_manager.all() if keys is None else keys
        self.ids = keys.order_by("pk").values_list("pk", flat=True)

    def batches(self) -> Iterator[pa.RecordBatch]:
        with Connection() as adbc:
            self.json_columns = self._json_columns(adbc)
            for table, in read_ahead(adbc, self._window_queries()):
                for batch in table.to_batches():
                    yield self._shaped(batch)
                del table
                give_back_freed_memory()

    def _window_queries(self) -> Iterator[list[str]]:
        after = None
        while True:
            upto = self._window_end(after)
            yield [self._window_query(after, upto)]
            if upto is None:
                return
            after = upto

    def _window_end(self, after: int | None) -> int | None:
        """The `batch_size`-th id of the queryset's own table after `after` (None: fewer are left).

        Each batch reads the rows whose key (the table's id) lies in one such window: PostgreSQL finds the
        window's rows by the index and joins only those. (With `key > last ORDER BY key LIMIT n` on a query that
        joins, it joined and sorted every row after `last`, batch after batch: an export slowed as it grew.)"""
        ids = self.ids if after is None else self.ids.filter(pk__gt=after)
        end = list(ids[self.batch_size - 1:self.batch_size])
        return end[0] if end else None

    def _window_query(self, after: int | None, upto: int | None) -> str:
        key = f"q.{quote(self.key)}"
        bounds = ([] if after is None else [f"{key} > {int(after)}"]) + ([] if upto is None else [f"{key} <= {int(upto)}"])
        where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
        return f"SELECT {self._select()} FROM {self.rows_sql}{where} ORDER BY {key}"

    def _json_columns(self, adbc: Connection) -> list[str]:
        """The nested schema fields the database holds as JSON; the others (arrays) arrive as Arrow lists."""
        found = adbc.query(f"SELECT * FROM {self.rows_sql} LIMIT 0").schema
        json_columns = []
        for field in self.schema:
            pg_type = (found.field(field.name).metadata or {}).get(b"POSTGRESQL:type", b"").decode()
            if pg_type in JSON_TYPES:
                if not PLAIN_NAME.match(field.name):  # it becomes a JSON key inside an SQL string
                    raise ValueError(f"JSON column {field.name!r} needs a plain name (letters, digits, _).")
                if not is_nested(field.type):
                    raise TypeError(f"Column {field.name!r} is {pg_type} in the database but {field.type} in the "
                                    "kind's schema: JSON documents go into list or struct fields.")
                json_columns.append(field.name)
        return json_columns

    def _select(self) -> str:
        """The schema's columns, the JSON ones folded into one newline-terminated object per row."""
        select = [f"q.{quote(field.name)}" for field in self.schema if field.name not in self.json_columns]
        if self.key not in self.schema.names:
            select.append(f"q.{quote(self.key)}")
        if self.json_columns:
            # '{"a":' || a::text || ',"b":' || b::text || '}\n'  (a SQL null becomes JSON null)
            pieces = []
            for number, name in enumerate(self.json_columns):
                pieces.append(f"""'{"," if number else "{"}"{name}":'""")
                # ::jsonb first: a json column keeps its text as written, newlines included; jsonb's text has none.
                pieces.append(f"coalesce(q.{quote(name)}::jsonb::text, 'null')")
            pieces.append("E'}\\n'")
            select.append(f"{' || '.join(pieces)} AS {quote(DOCUMENT_COLUMN)}")
        return ", ".join(select)

    def _shaped(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = {}
        if self.json_columns:
            documents = parse_documents(batch.column(DOCUMENT_COLUMN),
                                         pa.schema([self.schema.field(name) for name in self.json_columns]))
            columns.update(zip(documents.column_names, documents.columns, strict=True))
        for field in self.schema:
            if field.name not in columns:
                columns[field.name] = batch.column(field.name)
        arrays = [as_type(columns[field.name], field) for field in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def read_ahead(adbc: Connection, queries: Iterator[list[str]]) -> Iterator[list[pa.Table]]:
    """The results of each list of queries in turn, read on `adbc` by a thread of its own one list ahead of the
    caller: the next queries run (PostgreSQL works, the driver decodes) while the caller parses these. The lists are
    taken from `queries` in the caller's thread (they may be composed with Django's connection there); the caller
    leaves `adbc` to this thread until the iteration ends."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export-reader") as fetcher:
        ahead = None
        for sqls in queries:
            fetched = fetcher.submit(lambda sqls: [adbc.query(sql) for sql in sqls], sqls)
            if ahead is not None:
                # Handed out from a list it leaves, with its future dropped: once the caller lets go of the tables,
                # nothing here holds them (the caller gives their memory back before asking for the next).
                done, ahead = [ahead.result()], fetched
                yield done.pop()
            ahead = fetched
        if ahead is not None:
            done, ahead = [ahead.result()], None
            yield done.pop()


def give_back_freed_memory() -> None:
    """Return the free pages of glibc's heaps to the system.

    The driver builds each result in buffers from glibc's malloc, which, once it has seen a large block
    freed, raises its mmap threshold (up to 32 MB) and keeps such blocks in its heaps: an export worker
    stayed ~70 MB larger (bench/export_bench.py). malloc_trim is cheap (a walk of the free lists) and
    gives those pages back. Elsewhere than glibc there is no such call, and nothing to do."""
    if _libc is not None:
        _libc.malloc_trim(0)


def _load_libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_libc = _load_libc()


def parse_documents(text: pa.StringArray, schema: pa.Schema) -> pa.Table:
    """Newline-delimited JSON objects, one per row, parsed into `schema` without copying the text."""
    if text.null_count:
        raise ValueError("A JSON document row came back null.")
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32 if pa.types.is_string(text.type) else np.int64)
    start, stop = int(offsets[text.offset]), int(offsets[text.offset + len(text)])
    data = text.buffers()[2].slice(start, stop - start)
    # One block for the whole batch: a block must hold whole rows, and a long trajectory can pass any fixed size.
    parsed = pa_json.read_json(
        pa.BufferReader(data),
        read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size + 1)),
        parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    if parsed.num_rows != len(text):
        raise ValueError(f"{len(text)} JSON documents parsed into {parsed.num_rows} rows.")
    return parsed


def as_type(column: pa.Array | pa.ChunkedArray, field: pa.Field) -> pa.Array:
    # The parsed documents come as a table's one-chunk columns (combining one chunk copies nothing).
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array.type, pa.ExtensionType):
        array = array.storage
    if not array.type.equals(field.type):
        array = array.cast(field.type)
    if not field.nullable and array.null_count:
        raise ValueError(f"Column {field.name!r} has null values but the schema says it never does.")
    return array
