"""A record kind made for the tests: rows generated in Python, with duplicates and failures on demand."""

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from rest_framework import serializers

from dataplatform.exports.registry import ExportFilters, ExportKind, ExportQuery, register

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("tags", pa.list_(pa.string())),
    ("score", pa.float64()),
])
START = datetime(2026, 1, 1, tzinfo=UTC)
MEANINGS = {
    "id": "The row's number, 1 to the filter n.",
    "created_at": "2026-01-01 00:00 UTC plus id minutes.",
    "messages": "A made-up user question and assistant answer numbered by the row's content (a duplicate row "
                "repeats the previous row's).",
    "tags": '"t<content number mod 3>" and "synthetic".',
    "score": "The content number divided by 7.",
}


class SyntheticFilters(ExportFilters):
    n = serializers.IntegerField(min_value=0, default=100)
    duplicate_every = serializers.IntegerField(min_value=0, default=0)  # row i copies row i-1 when i % k == 0
    fail_at = serializers.IntegerField(min_value=0, required=False)  # raise when this row is reached


class GeneratorBroke(RuntimeError):
    pass


# A transient failure: the next run raises when it reaches this row, then forgets it.
TRANSIENT = {"fail_at": None}


def make_row(i: int, content_of: int | None = None) -> dict:
    source = i if content_of is None else content_of
    return {
        "id": i,
        "created_at": START + timedelta(minutes=i),
        "messages": [{"role": "user", "content": f"question {source} <b>&</b> ünïcødé 🙂"},
                     {"role": "assistant", "content": f"answer {source}\n" + "x" * (source % 50)}],
        "tags": [f"t{source % 3}", "synthetic"],
        "score": source / 7,
    }


def rows(query: ExportQuery):
    filters = query.filters
    batch = []
    for i in range(1, filters["n"] + 1):
        if filters.get("fail_at") == i:
            raise GeneratorBroke(f"generator broke at row {i}")
        if TRANSIENT["fail_at"] == i:
            TRANSIENT["fail_at"] = None
            raise GeneratorBroke(f"lost the database connection at row {i}")
        duplicate = filters["duplicate_every"] and i % filters["duplicate_every"] == 0
        batch.append(make_row(i, content_of=i - 1 if duplicate else None))
        if len(batch) == query.batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


SYNTHETIC = register(ExportKind(
    name="test.synthetic",
    version=1,
    schema=SCHEMA,
    group="row",
    group_by=("id",),
    label="Synthetic chat rows",
    description="Generated rows for the export engine's tests.",
    rows=rows,
    data_version=lambda project: "synthetic-v1",
    append_only=True,  # generated from the filters alone
    count=lambda query: query.filters["n"],
    filters=SyntheticFilters,
    dedup_ignore=("id", "created_at"),
    field_meanings=MEANINGS,
))


# A values() kind over the job table: plain columns, a joined username and a JSON document, read on the
# Arrow-native path on PostgreSQL and through the ORM elsewhere.
JOB_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("kind", pa.string()),
    ("creator", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("params", pa.struct([("tags", pa.list_(pa.string())),
                          ("meta", pa.struct([("n", pa.int64()), ("note", pa.string())]))])),
    ("progress_done", pa.int64()),
])
JOB_MEANINGS = {
    "id": "The job's id.",
    "kind": "The job's kind.",
    "creator": "Username of who created it.",
    "created_at": "When it was created.",
    "params": "Its parameters' tags and meta.",
    "progress_done": "Its progress.",
}


def job_values(project):
    from django.db.models import F

    from dataplatform.jobs.models import Job

    # Columns in another order than the schema's (the annotation comes last in the SELECT): matched by name.
    # The exports' own jobs are left out: each export of the tests would otherwise see the one before.
    return Job.objects.filter(project=project).exclude(kind="exports.write").values(
        "id", "kind", "created_at", "params", "progress_done", creator=F("created_by__username"))


JOB_VALUES = register(ExportKind(
    name="test.job_values",
    version=1,
    schema=JOB_SCHEMA,
    group="job",
    group_by=("id",),
    label="Job rows (values kind)",
    description="The project's jobs as plain columns and a JSON document, for the read-path tests.",
    values=lambda query: job_values(query.project),
    data_version=lambda project: "jobs-v1",
    not_append_only="it reads every job as it is now.",
    dedup_ignore=("id", "created_at"),
    field_meanings=JOB_MEANINGS,
))


# A partitioned kind (one shard set per category, as swe.routed writes) whose JSONL shards each read as other types
# when pyarrow guesses them from their own rows: `note` looks like a timestamp in the first rows and is text later,
# `reviewed_at` is null in the first rows.
PARTED_SCHEMA = pa.schema([("id", pa.int64()), ("category", pa.string()), ("note", pa.string()),
                           ("reviewed_at", pa.timestamp("us", tz="UTC"))])


def parted_rows(query: ExportQuery):
    yield [{"id": i, "category": "AB"[i % 2], "note": f"2026-01-{1 + i % 28:02d} 10:00:00" if i < 20 else f"note {i}",
            "reviewed_at": START + timedelta(minutes=i) if i >= 20 else None} for i in range(query.filters["n"])]


class PartedFilters(ExportFilters):
    n = serializers.IntegerField(min_value=0, default=40)


PARTED = register(ExportKind(
    name="test.parted",
    version=1,
    schema=PARTED_SCHEMA,
    label="Partitioned rows",
    description="Rows in one shard set per category, for the loader tests.",
    rows=parted_rows,
    data_version=lambda project: "parted-v1",
    append_only=True,  # generated from the filters alone
    group="row",
    group_by=("id",),
    filters=PartedFilters,
    partition_field="category",
    field_meanings={"id": "The row's number.", "category": "A for even ids, B for odd ones.",
                    "note": "A date-like text in the first 20 rows, plain text after.",
                    "reviewed_at": "Null in the first 20 rows, then 2026-01-01 plus id minutes."},
))
