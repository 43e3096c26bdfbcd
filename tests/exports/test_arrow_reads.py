"""The Arrow-native read path (PostgreSQL through ADBC) against the ORM path on the same rows."""

import pyarrow as pa
import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from dataplatform.exports import arrow_reads
from dataplatform.exports.sources import keyset_values
from dataplatform.jobs.models import Job

from .kinds import JOB_SCHEMA, job_values

pytestmark = [
    # The ADBC connection is a connection of its own: it sees committed rows only.
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only("ADBC's Arrow-native read path is PostgreSQL's; SQLite exports read through the ORM"),
]

PARAMS = [
    {"tags": ["a", "b"], "meta": {"n": 1, "note": "line one\nline two \"quoted\" ünïcødé 🙂 <b>&</b>"}},
    {"tags": [], "meta": {"n": 2, "note": None}, "unknown": {"dropped": True}},  # a key the schema lacks
    {"meta": {"n": 3, "extra": [1, 2]}},  # no tags at all; an unknown nested key
    {"tags": None, "meta": None},
]


@pytest.fixture
def jobs(project, members):
    made = []
    for i in range(23):
        # Job i + 12 repeats job i but for its id and time: kind, params and creator cycle every 6, 4 and 2.
        made.append(Job.objects.create(project=project, kind=f"k{i % 6}", params=PARAMS[i % len(PARAMS)],
                                       created_by=members["curator"] if i % 2 else None))
    return made


def orm_rows(queryset, schema: pa.Schema) -> list[dict]:
    pages = keyset_values(queryset, list(schema.names), batch_size=1000)
    return pa.Table.from_batches([pa.RecordBatch.from_pylist(page, schema=schema) for page in pages],
                                 schema=schema).to_pylist()


def test_arrow_batches_equal_the_orm_rows(project, jobs):
    queryset = job_values(project)
    reader = arrow_reads.ArrowKeysetReader(queryset, JOB_SCHEMA, batch_size=8)
    batches = list(reader.batches())
    assert [batch.num_rows for batch in batches] == [8, 8, 7]
    assert all(batch.schema.equals(JOB_SCHEMA) for batch in batches)
    assert reader.json_columns == ["params"]
    rows = pa.Table.from_batches(batches).to_pylist()
    assert rows == orm_rows(queryset, JOB_SCHEMA)
    # What the ORM rows say, checked on their own: the JSON parsed, keys the schema lacks left out.
    assert rows[0]["params"] == {"tags": ["a", "b"], "meta": PARAMS[0]["meta"]}
    assert rows[2]["params"] == {"tags": None, "meta": {"n": 3, "note": None}}
    assert rows[3]["params"] == {"tags": None, "meta": None}
    assert [row["creator"] for row in rows[:2]] == [None, "curator"]


def test_each_batch_is_its_own_query_outside_any_transaction(project, jobs):
    reader = arrow_reads.ArrowKeysetReader(job_values(project), JOB_SCHEMA, batch_size=10)
    states = []
    for _ in reader.batches():
        with connection.cursor() as cursor:  # Django's own connection, not the reader's
            cursor.execute("SELECT state FROM pg_stat_activity WHERE pid <> "
                           "pg_backend_pid() AND datname = current_database()")
            states += [state for (state,) in cursor.fetchall()]
    assert states and "idle in transaction" not in states


def test_a_json_column_read_into_a_plain_field_is_refused(project, jobs):
    schema = pa.schema([("id", pa.int64()), ("params", pa.string())])
    reader = arrow_reads.ArrowKeysetReader(Job.objects.filter(project=project).values("id", "params"), schema,
                                           batch_size=10)
    with pytest.raises(TypeError, match="'params' is jsonb in the database but string"):
        next(reader.batches())


def test_the_columns_must_be_the_schemas(project, jobs):
    with pytest.raises(ValueError, match="are not the schema's columns"):
        arrow_reads.ArrowKeysetReader(Job.objects.values("id", "kind", creator=F("created_by__username")),
                                      JOB_SCHEMA, batch_size=10)


def shard_rows(export, storage_root) -> dict[str, list[dict]]:
    import pyarrow.parquet as pq

    folder = storage_root / export.location
    return {shard["name"]: pq.read_table(folder / shard["name"]).to_pylist() for shard in export.manifest["shards"]}


def test_an_export_on_the_arrow_path_equals_the_orm_path(run_export, export_storage_in_tmp, jobs, monkeypatch,
                                                         settings):
    settings.EXPORT_BATCH_ROWS = 7
    options = {"kind": "test.job_values", "validation_ratio": 0.3, "dedup": True, "shard_rows": 5}
    arrow = run_export(**options)
    monkeypatch.setattr(arrow_reads, "available", lambda: False)
    orm = run_export(**options)
    assert arrow.job.state == orm.job.state == "succeeded", (arrow.job.error, orm.job.error)
    assert (arrow.manifest["read_path"], orm.manifest["read_path"]) == ("postgresql-arrow", "orm-values")
    assert shard_rows(arrow, export_storage_in_tmp) == shard_rows(orm, export_storage_in_tmp)
    assert arrow.manifest["dedup"]["removed_rows"] == 11 and arrow.manifest["totals"]["rows"] == 12
    assert arrow.manifest["totals"]["by_split"]["validation"]["rows"] > 0


def test_keys_cut_the_batches_and_any_subset_of_them_reads_every_row(project, other_project, jobs):
    Job.objects.bulk_create([Job(project=other_project, kind="o") for _ in range(30)])  # ids after the project's
    queryset = job_values(project)

    def windows(reader) -> tuple[int, list[int]]:
        """(queries of Django's connection, the batches' sizes): each window's end is one query."""
        with CaptureQueriesContext(connection) as queries:
            sizes = [batch.num_rows for batch in reader.batches()]
        return len(queries), sizes

    # The whole table's ids: the other project's cut four more windows, each a query for nothing.
    assert windows(arrow_reads.ArrowKeysetReader(queryset, JOB_SCHEMA, batch_size=8)) == (7, [8, 8, 7])
    own = arrow_reads.ArrowKeysetReader(queryset, JOB_SCHEMA, batch_size=8, keys=Job.objects.filter(project=project))
    assert windows(own) == (3, [8, 8, 7])
    some = arrow_reads.ArrowKeysetReader(queryset, JOB_SCHEMA, batch_size=8,
                                         keys=Job.objects.filter(pk__in=[jobs[3].pk, jobs[20].pk]))
    assert pa.Table.from_batches(list(some.batches())).to_pylist() == orm_rows(queryset, JOB_SCHEMA)
    with pytest.raises(ValueError, match="keys are Project rows"):
        arrow_reads.ArrowKeysetReader(queryset, JOB_SCHEMA, batch_size=8, keys=type(project).objects.all())


def test_the_reads_run_without_jit():
    # An export's read costs over jit_above_cost: compiling it took a quarter of each batch's time.
    with arrow_reads.Connection() as adbc:
        assert adbc.query("SELECT current_setting('jit') AS jit").column("jit").to_pylist() == ["off"]


def test_read_ahead_runs_the_next_queries_while_the_caller_holds_these():
    """Each list's results in order; the next list is taken from the caller's iterator and under way before this
    one is handed out; a caller that stops early leaves no query running."""
    taken = []

    def queries():
        for n in range(3):
            taken.append(n)
            yield [f"SELECT {n} AS n, pg_sleep(0.05)::text AS slept", f"SELECT {n * 10} AS m"]

    with arrow_reads.Connection() as adbc:
        results = arrow_reads.read_ahead(adbc, queries())
        first, tenfold = next(results)
        assert (first.column("n").to_pylist(), tenfold.column("m").to_pylist()) == ([0], [0])
        assert taken == [0, 1]  # the second list is read while the caller holds the first
        assert [(a.column("n")[0].as_py(), b.column("m")[0].as_py()) for a, b in results] == [(1, 10), (2, 20)]
        stopped = arrow_reads.read_ahead(adbc, queries())
        next(stopped)
        stopped.close()  # waits for the list under way: the connection is free again
        assert adbc.query("SELECT 7 AS seven").column("seven").to_pylist() == [7]
