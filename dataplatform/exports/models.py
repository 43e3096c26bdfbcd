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
