"""The generic long-running job: one row per job, a state machine and progress."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from dataplatform.accounts.models import Project
from dataplatform.status import Status, for_row, render_html, render_status


class JobState(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


class Job(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=100, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.QUEUED, db_index=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    # A short human-readable line about what the job is doing now (e.g. "retrying in 10 s").
    # It is in English (the API and the logs show it); `status_i18n` holds the same line as a message id and
    # its values ({"text": ..., "params": {...}}, see status.py), which pages show in their own language.
    status_message = models.CharField(max_length=500, blank=True)
    status_i18n = models.JSONField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # An error the platform words itself (a time limit, a lost worker, an outage that outlasted its retries) is
    # also kept as a message id and its values, as `status_i18n` is, so that pages show it in their own
    # language (`error_html`) while `error` stays English for the API and the logs. An exception's own text
    # (a bug, a library's refusal) has none and is shown as it is.
    error_i18n = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    cancel_requested = models.BooleanField(default=False)
    # Who runs it ("host:pid") and when that worker last said it is alive: a running job whose
    # heartbeat stops is requeued or failed by `services.reap_stale_jobs`, never left "running".
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at", "-id"], name="job_project_recent"),
                   models.Index(fields=["state", "heartbeat_at"], name="job_state_heartbeat"),
                   # A project's latest job of a kind (the home page's demo.seed progress) without reading
                   # the project's whole history.
                   models.Index(fields=["project", "kind", "-id"], name="job_project_kind_latest"),
                   # the project page's latest jobs (selectors.latest_jobs), whatever the other projects' jobs
                   models.Index(fields=["project", "id"], name="job_project_id"),
                   # Every enqueue counts the project's queued jobs (the cap in services.enqueue_job):
                   # this index holds only those rows, so the count stays small however long the history.
                   models.Index(fields=["project"], condition=models.Q(state=JobState.QUEUED),
                                name="job_queued_per_project")]

    def __str__(self) -> str:
        return f"Job {self.pk} {self.kind} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def set_status(self, status: Status) -> None:
        """Set the status line (both fields); the caller saves."""
        self.status_message = status.english()[:500]
        self.status_i18n = status.as_json()

    def set_error(self, error: Status | str) -> None:
        """Set the error (both fields); the caller saves."""
        self.error, self.error_i18n = for_row(error)

    @property
    def error_html(self) -> str:
        """The error in the active language, its data marked translate="no" (an exception's text as it is)."""
        return render_html(self.error_i18n, self.error)

    @property
    def status_text(self) -> str:
        """The status line in the active language (the English one for rows written before translation)."""
        return render_status(self.status_i18n, self.status_message)

    @property
    def percent(self) -> int:
        if self.state == JobState.SUCCEEDED:
            return 100
        if not self.progress_total:
            return 0
        return min(100, int(100 * self.progress_done / self.progress_total))
