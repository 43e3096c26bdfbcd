"""Record kind `platform.jobs`: the project's job history, for audits and dashboards.

It lives with the export engine rather than with jobs: exports stands above jobs (an export runs as a job), so
jobs never imports the export registry."""

import pyarrow as pa
from django.db.models import F, Max
from django.utils.translation import gettext_lazy, gettext_noop
from rest_framework import serializers

from dataplatform.jobs.models import TERMINAL_STATES, Job, JobState

from .registry import ExportFilters, ExportKind, ExportQuery, register

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("kind", pa.string()),
    ("state", pa.string()),
    ("progress_done", pa.int64()),
    ("progress_total", pa.int64()),
    ("attempts", pa.int64()),
    ("error", pa.string()),
    ("created_by", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
])
MEANINGS = {
    "id": "The job's id.",
    "kind": "The job kind's name, e.g. atd.score or labeler.autolabel.",
    "state": "How the job ended: succeeded, failed or cancelled.",
    "progress_done": "Units of work done when it ended, in the kind's own unit (rows, prompts, tasks, ...).",
    "progress_total": "Units of work it expected in all (0 when it did not say).",
    "attempts": "How many times a worker started it (a retry or a lost worker's requeue adds one).",
    "error": "Why it failed; empty when it did not.",
    "created_by": "Username of who started it; null when it has no user (or the account is gone).",
    "created_at": "When it was created (UTC).",
    "started_at": "When a worker first started it (UTC); null when it never ran (cancelled before it started).",
    "finished_at": "When it ended (UTC).",
}


class JobExportFilters(ExportFilters):
    status = serializers.MultipleChoiceField(choices=JobState.choices, required=False)
    job_kind = serializers.CharField(required=False)


def _jobs(query: ExportQuery):
    # Finished jobs only: a queued or running job's row would still change after the export
    # (the export's own job is one of them), and an export must be reproducible.
    jobs = Job.objects.filter(project=query.project, id__lte=int(query.data_version or 0),
                              state__in=list(TERMINAL_STATES))
    filters = query.filters
    if filters.get("status"):
        jobs = jobs.filter(state__in=list(filters["status"]))
    if filters.get("job_kind"):
        jobs = jobs.filter(kind=filters["job_kind"])
    if filters.get("created_after"):
        jobs = jobs.filter(created_at__gte=filters["created_after"])
    if filters.get("created_before"):
        jobs = jobs.filter(created_at__lt=filters["created_before"])
    return jobs


def values(query: ExportQuery):
    # The creator's username is "created_by" in the rows; Django refuses an annotation named like the field.
    return _jobs(query).values("id", "kind", "state", "progress_done", "progress_total", "attempts", "error",
                               "created_at", "started_at", "finished_at", creator=F("created_by__username"))


register(ExportKind(
    name="platform.jobs",
    version=1,
    schema=SCHEMA,
    label=gettext_lazy("Job history"),
    description=gettext_lazy("One row per finished job of the project: kind, final state, progress, attempts, error, "
                             "timings."),
    values=values,
    renamed={"creator": "created_by"},
    # Jobs created after the export starts are left out.
    data_version=lambda project: str(Job.objects.filter(project=project).aggregate(top=Max("id"))["top"] or 0),
    count=lambda query: _jobs(query).count(),
    group="job",  # a job is a record of its own
    group_by=("id",),
    filters=JobExportFilters,
    not_append_only=gettext_noop("a job's row changes until the job ends (one queued or running when an export "
                                 "started finishes later), and deleting an export deletes its job."),
    dedup_ignore=("id", "created_at", "started_at", "finished_at"),
    field_meanings=MEANINGS,
))
