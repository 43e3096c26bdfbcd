"""Stored kinds made for the tests (exports/stored.py): each job of the project gives `params.copies` rows
(one by default, none with 0), derived in Python; its state is a live column, and progress_done its revision. The
second kind reads its live columns (nested ones too) as one JSON document."""

import pyarrow as pa
from django.db.models import F, Subquery
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import JSONObject

from dataplatform.dbfunctions import JSONValue
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.jobs.models import Job

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("job_id", pa.int64()),
    ("copy", pa.int64()),
    ("title", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("progress_done", pa.int64()),
    ("state", pa.string()),
])
# How many times `derive` was asked for each job: a stored row is derived once.
DERIVED: list[int] = []


def sources(query):
    return Job.objects.filter(project=query.project).exclude(kind__startswith="exports.")


def derive(project, source_ids):
    for job in Job.objects.filter(id__in=source_ids).order_by("id"):
        DERIVED.append(job.pk)
        for copy in range(job.params.get("copies", 1)):
            yield job.pk, {
                "id": job.pk * 100 + copy, "job_id": job.pk, "copy": copy, "title": f"{job.kind} #{copy} ünï 🙂",
                "created_at": job.created_at,
                "messages": [{"role": "user", "content": f"line one\nline \"two\" of {job.kind}"},
                             {"role": "assistant", "content": job.params.get("answer", "")}],
                "progress_done": job.progress_done,
            }


def live(query, source):
    return {"state": Subquery(Job.objects.filter(pk=source).values("state")[:1])}


STORED_JOBS = register(ExportKind(
    name="test.stored_jobs",
    version=1,
    schema=SCHEMA,
    group="job",
    group_by=("job_id",),
    label="Job rows (stored kind)",
    description="The project's jobs as rows derived once, for the stored-kind tests.",
    stored=StoredRows(model=Job, sources=sources, derive=derive, live_columns=("state",), live=live,
                      revision="progress_done", page=3),
    data_version=lambda project: "stored-jobs-v1",
    not_append_only="a job's progress changes in place.",
    field_meanings={"id": "The job's id times 100 plus the copy.", "job_id": "The job.", "copy": "The copy's number.",
                    "title": "The job's kind and copy.", "created_at": "When the job was created.",
                    "messages": "A made-up exchange.", "progress_done": "The job's progress when derived.",
                    "state": "The job's state at export time."},
))


TOKENS_SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("job_id", pa.int64()),
    ("input_ids", pa.list_(pa.int64())),
    ("labels", pa.list_(pa.int64())),
    ("title", pa.string()),
    ("state", pa.string()),
])


def token_sources(query):
    # Jobs of their own (kind "tok-..."): the other stored-kind tests count what is derived from theirs.
    return Job.objects.filter(project=query.project, kind__startswith="tok-")


def derive_tokens(project, source_ids):
    """Lists of every shape a token column takes: long, empty, null, with negative values (-100) and large ids."""
    for job in Job.objects.filter(id__in=source_ids).order_by("id"):
        length = (job.pk * 37) % 300
        ids = [(job.pk * 7919 + n * 104_729) % 2_000_000_000 for n in range(length)]
        yield job.pk, {
            "id": job.pk, "job_id": job.pk, "title": job.kind,
            "input_ids": None if job.params.get("copies") == 0 else ids,
            "labels": [-100 if n % 3 else value for n, value in enumerate(ids)],
        }


STORED_TOKENS = register(ExportKind(
    name="test.stored_tokens",
    version=1,
    schema=TOKENS_SCHEMA,
    group="job",
    group_by=("job_id",),
    label="Job token rows (stored kind, binary lists)",
    description="The project's jobs as rows with token-id lists kept as binary, for the stored-kind tests.",
    stored=StoredRows(model=Job, sources=token_sources, derive=derive_tokens, live_columns=("state",), live=live, page=4,
                      binary_lists=("input_ids", "labels")),
    data_version=lambda project: "stored-tokens-v1",
    append_only=True,
    field_meanings={"id": "The job.", "job_id": "The job.", "input_ids": "Made-up token ids.",
                    "labels": "input_ids with -100 on two of three.", "title": "The job's kind.",
                    "state": "The job's state at export time."},
))


# The same rows with their live columns given as one JSON document (StoredRows.live_document), nested ones among them.
DOCUMENT_SCHEMA = pa.schema([
    ("id", pa.int64()), ("job_id", pa.int64()), ("title", pa.string()),
    ("state", pa.string()), ("tags", pa.list_(pa.string())),
    ("progress", pa.struct([("done", pa.int64()), ("total", pa.int64())])),
])
DOCUMENT_LIVE = ("state", "tags", "progress")


def derive_plain(project, source_ids):
    for source_id, row in derive(project, source_ids):
        yield source_id, {name: row[name] for name in ("id", "job_id", "title")}


def live_document(query):
    return Job.objects.filter(project=query.project).annotate(live=JSONObject(
        state=F("state"), tags=JSONValue(KeyTransform("tags", "params")),
        progress=JSONObject(done=F("progress_done"), total=F("progress_total"))))


STORED_JOBS_DOCUMENT = register(ExportKind(
    name="test.stored_jobs_document",
    version=1,
    schema=DOCUMENT_SCHEMA,
    group="job",
    group_by=("job_id",),
    label="Job rows (stored kind, live document)",
    description="The project's jobs as rows derived once, their state, tags and progress read live in one document.",
    stored=StoredRows(model=Job, sources=sources, derive=derive_plain, live_columns=DOCUMENT_LIVE,
                      live_document=live_document, page=3),
    data_version=lambda project: "stored-jobs-v1",
    not_append_only="a job's state, tags and progress change in place.",
    field_meanings={"id": "The job's id times 100 plus the copy.", "job_id": "The job.", "title": "The job's kind and copy.",
                    "state": "The job's state at export time.", "tags": "The job's params' tags at export time.",
                    "progress": "The job's progress at export time."},
))


def query_of(project, *, batch_size: int = 4, data_version: str = "stored-jobs-v1") -> ExportQuery:
    """An export query of these kinds on the project's jobs, with no filters."""
    return ExportQuery(project=project, filters={}, data_version=data_version, batch_size=batch_size)
