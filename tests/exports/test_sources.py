import pyarrow as pa
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dataplatform.exports.registry import ExportQuery
from dataplatform.exports.sources import as_record_batch, keyset_pages, keyset_values, read_batches
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
def test_read_batches_takes_the_path_the_kind_declares(project, monkeypatch):
    from dataplatform.exports import arrow_reads

    from . import kinds

    Job.objects.create(project=project, kind="k", params={"tags": ["x"]})
    query = ExportQuery(project=project, filters={"n": 3, "duplicate_every": 0}, data_version="v", batch_size=2)
    path, batches = read_batches(kinds.SYNTHETIC, query)
    assert path == "rows" and [b.num_rows for b in batches] == [2, 1]
    monkeypatch.setattr(arrow_reads, "available", lambda: False)  # as on SQLite
    path, batches = read_batches(kinds.JOB_VALUES, query)
    rows = pa.Table.from_batches(list(batches)).to_pylist()
    assert path == "orm-values" and [(r["kind"], r["params"]["tags"]) for r in rows] == [("k", ["x"])]


def test_a_generator_batch_in_another_schema_is_refused():
    from . import kinds

    wrong = pa.RecordBatch.from_pylist([{"id": 1}])
    with pytest.raises(TypeError, match="not the kind's schema"):
        as_record_batch(wrong, kinds.SYNTHETIC)
