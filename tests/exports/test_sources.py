import pyarrow as pa
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dataplatform.exports.sources import keyset_pages, keyset_values, sql_keyset_batches
from dataplatform.jobs.models import Job


@pytest.fixture
def jobs(project):
    return [Job.objects.create(project=project, kind=f"k{i}", params={}) for i in range(23)]


@pytest.mark.django_db(transaction=True)
def test_keyset_values_reads_one_short_query_per_batch_outside_any_transaction(jobs):
    seen, atomic_during = [], []
    with CaptureQueriesContext(connection) as queries:
        for batch in keyset_values(Job.objects.all(), ["id", "kind"], batch_size=10):
            atomic_during.append(connection.in_atomic_block)
            seen += [row["id"] for row in batch]
    assert seen == [job.pk for job in jobs]
    assert [len(b) for b in [seen[:10], seen[10:20], seen[20:]]] == [10, 10, 3]
    assert len(queries.captured_queries) == 4  # three pages and the empty one that ends it
    assert not any(atomic_during)  # autocommit: no transaction spans the export
    assert all("LIMIT 10" in q["sql"] and "OFFSET" not in q["sql"] for q in queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_keyset_pages_reads_the_objects_one_short_query_per_batch(jobs):
    with CaptureQueriesContext(connection) as queries:
        pages = list(keyset_pages(Job.objects.order_by("-id"), batch_size=10))
    assert [[job.pk for job in page] for page in pages] == [[job.pk for job in jobs[i:i + 10]] for i in (0, 10, 20)]
    assert len(queries.captured_queries) == 4  # three pages and the empty one that ends it
    assert all("LIMIT 10" in q["sql"] and "OFFSET" not in q["sql"] for q in queries.captured_queries)


@pytest.mark.django_db
def test_keyset_values_needs_the_id():
    with pytest.raises(ValueError, match="needs 'id'"):
        list(keyset_values(Job.objects.all(), ["kind"], batch_size=10))


@pytest.mark.django_db
def test_sql_keyset_batches_builds_arrow_columns(jobs):
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string())])
    table = "jobs_job"
    batches = list(sql_keyset_batches(
        f"SELECT id, kind FROM {table} WHERE id > %(after)s ORDER BY id LIMIT %(limit)s", {}, schema, batch_size=8))
    assert [b.num_rows for b in batches] == [8, 8, 7]
    assert all(b.schema.equals(schema) for b in batches)
    assert pa.Table.from_batches(batches).column("kind").to_pylist() == [f"k{i}" for i in range(23)]


@pytest.mark.django_db
def test_sql_keyset_batches_decodes_json_columns(project):
    for i in range(3):
        Job.objects.create(project=project, kind="k", params={"tags": [f"t{i}", "x"], "meta": {"n": i}})
    schema = pa.schema([("id", pa.int64()), ("params", pa.struct([("tags", pa.list_(pa.string())),
                                                                   ("meta", pa.struct([("n", pa.int64())]))]))])
    batches = list(sql_keyset_batches(
        "SELECT id, params FROM jobs_job WHERE id > %(after)s ORDER BY id LIMIT %(limit)s", {}, schema,
        batch_size=10))
    rows = pa.Table.from_batches(batches).column("params").to_pylist()
    assert rows == [{"tags": [f"t{i}", "x"], "meta": {"n": i}} for i in range(3)]
