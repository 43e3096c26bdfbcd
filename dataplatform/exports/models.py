"""An export: one immutable, reproducible set of training shards written by a Job."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from dataplatform.accounts.models import Project
from dataplatform.jobs.models import Job


class ExportFormat(models.TextChoices):
    PARQUET = "parquet", _("Parquet")
    JSONL = "jsonl", _("JSON Lines")
    JSONL_GZ = "jsonl.gz", _("JSON Lines, gzip")


class Export(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="exports")
    # The job that writes it: its state, progress and error are the export's.
    job = models.OneToOneField(Job, on_delete=models.PROTECT, related_name="export")
    kind = models.CharField(max_length=100, db_index=True)
    kind_version = models.PositiveIntegerField()
    filters = models.JSONField(default=dict, blank=True)
    format = models.CharField(max_length=16, choices=ExportFormat.choices, default=ExportFormat.PARQUET)
    shard_rows = models.PositiveIntegerField(null=True, blank=True)
    shard_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    validation_ratio = models.FloatField(default=0.0)
    dedup = models.BooleanField(default=False)
    # Read when the export starts (e.g. the highest row id): rows newer than it are not exported,
    # so re-running the same export later gives the same data.
    data_version = models.CharField(max_length=100, blank=True)
    # Storage prefix holding the shards, manifest.json and README.md.
    location = models.CharField(max_length=300, blank=True)
    # The storage (an alias in settings.STORAGES) the files were written to: served and deleted from there.
    storage = models.CharField(max_length=64, default="exports-files")
    rows_total = models.PositiveBigIntegerField(default=0)
    bytes_total = models.PositiveBigIntegerField(default=0)
    manifest = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["project", "-created_at", "-id"], name="export_project_recent")]

    def __str__(self) -> str:
        return f"Export {self.pk} {self.kind} ({self.format})"


class StoredRow(models.Model):
    """One row of a stored kind (exports/stored.py), derived once from its source (a finished session, a
    submitted case, ...) and read by every export of the kind.

    A row belongs to the kind's `version` and to its source's `source_revision` as it was when the row was
    derived: a version bump or a change of the source in place makes it invisible, and it is derived again.
    `row` is null for a source that gives no row, so that it is not derived again at each export. `arrays` holds
    the row's integer-list columns the kind keeps as typed binary (`StoredRows.binary_lists`: long token-id lists,
    which cost an export more to parse as JSON than everything else in the row), out of the document."""

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    source_id = models.BigIntegerField()
    source_revision = models.CharField(max_length=64, blank=True)
    seq = models.PositiveIntegerField()  # the row's place among its source's rows
    row = models.JSONField(null=True)
    arrays = models.BinaryField(null=True)
    built_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "version", "source_id", "source_revision", "seq"],
                                               name="stored_row_once")]
        # An export reads a kind's rows of one project in ranges of ids (stored.py `_windows`).
        indexes = [models.Index(fields=["kind", "version", "project", "id"], name="stored_row_read")]

    def __str__(self) -> str:
        return f"{self.kind} v{self.version} row {self.seq} of source {self.source_id}"


class StoredCheck(models.Model):
    """What a check of a stored kind's rows in a project last found complete, so that the next one can skip it
    while nothing it looked at changed (exports/stored.py `remembered_check`):

    - "sources" (`stored.build`): the fingerprint of the selection and of the kind's stored rows when every
      selected source was seen to have its rows;
    - "tokenizer" (aed.recovery's notes): the tokenizer and template its rows were checked against, and the
      highest stored row id checked."""

    kind = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    checked = models.CharField(max_length=32)
    fingerprint = models.CharField(max_length=200)
    checked_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "version", "project", "checked"],
                                               name="stored_check_once")]

    def __str__(self) -> str:
        return f"{self.kind} v{self.version} {self.checked}: {self.fingerprint}"
