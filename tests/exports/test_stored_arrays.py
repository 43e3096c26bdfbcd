"""A stored kind's integer-list columns kept as typed binary (exports/stored_arrays.py, StoredRows.binary_lists):
read back as the live derivation gives them, on the Arrow path and through the ORM."""

import dataclasses

import pyarrow as pa
import pytest
from django.db import connection, transaction

from dataplatform.exports import stored, stored_arrays
from dataplatform.exports.models import StoredRow
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.jobs.models import Job

from . import stored_kind
from .stored_kind import STORED_TOKENS

# The Arrow-native read (ADBC) is a connection of its own: it sees committed rows only.
reads = pytest.mark.django_db(transaction=True)


@pytest.fixture
def jobs(project):
    params = [{}, {"copies": 0}, {}, {}, {}]
    return [Job.objects.create(project=project, kind=f"tok-{i}", params=params[i % len(params)]) for i in range(11)]


def query_of(project, batch_size=4) -> ExportQuery:
    return stored_kind.query_of(project, batch_size=batch_size, data_version="stored-tokens-v1")


@reads
def test_binary_lists_read_back_as_the_live_derivation_gives_them(project, jobs):
    query = query_of(project)
    expected = stored.live_rows(STORED_TOKENS, query)
    assert [row["input_ids"] is None for row in expected] == [i % 5 == 1 for i in range(len(jobs))]
    assert any(-100 in row["labels"] for row in expected)
    assert stored.stored_read_rows(STORED_TOKENS, query) == expected
    path, _ = stored.read(STORED_TOKENS, query)
    assert path == ("stored-postgresql-arrow" if connection.vendor == "postgresql" else "stored-orm")


@reads
def test_binary_lists_read_through_the_orm_inside_a_transaction(project, jobs):
    query = query_of(project, batch_size=3)
    expected = stored.live_rows(STORED_TOKENS, query)
    with transaction.atomic():  # the Arrow path cannot see what this transaction wrote: the ORM reads it
        assert stored.read(STORED_TOKENS, query)[0] == "stored-orm"
        assert stored.stored_read_rows(STORED_TOKENS, query) == expected


@reads
def test_binary_lists_are_kept_out_of_the_document(project, jobs):
    stored.build(STORED_TOKENS, query_of(project))
    kept = StoredRow.objects.filter(kind=STORED_TOKENS.name, row__isnull=False)
    assert kept.count() == len(jobs)
    for document, arrays in kept.values_list("row", "arrays"):
        assert "input_ids" not in document and "labels" not in document and document["title"].startswith("tok-")
        assert len(bytes(arrays)) % 4 == 0


def test_unpack_reads_a_slice_and_an_empty_batch():
    rows = [{"a": [1, -100, 2**31 - 1], "b": None}, {"a": [], "b": [-(2**31)]}, {"a": None, "b": [5, 6]}]
    blobs = pa.array([stored_arrays.pack("k", ("a", "b"), row)[1] for row in rows], pa.binary())
    for sliced, expected in ((blobs, rows), (blobs.slice(1), rows[1:]), (blobs.slice(0, 0), [])):
        columns = stored_arrays.unpack(sliced, ("a", "b"))
        assert [{"a": a, "b": b} for a, b in zip(columns["a"].to_pylist(), columns["b"].to_pylist(),
                                                 strict=True)] == expected


@pytest.mark.parametrize(("value", "message"), [([1, None], "holds a null value"), ([2**31], "does not fit in 32 bits")])
def test_pack_refuses_what_32_bit_lists_cannot_hold_naming_the_kind_and_column(value, message):
    with pytest.raises(ValueError, match=message) as raised:
        stored_arrays.pack("test.kind", ("input_ids",), {"id": 1, "input_ids": value})
    assert "test.kind" in str(raised.value)


def test_a_binary_list_must_be_a_stored_integer_list_column():
    for columns in (("title",), ("state",), ("nope",)):
        kind = dataclasses.replace(STORED_TOKENS, name="test.bad_binary", stored=StoredRows(
            model=Job, sources=STORED_TOKENS.stored.sources, derive=STORED_TOKENS.stored.derive,
            live_columns=("state",), live=STORED_TOKENS.stored.live, binary_lists=columns))
        with pytest.raises(ValueError, match=f"binary list column {columns[0]!r}"):
            register(kind)
    assert isinstance(STORED_TOKENS, ExportKind)
