"""The record every app keeps of an imported file (abstract: each app's subclass is its own table)."""

from django.conf import settings
from django.db import models


class ImportedFile(models.Model):
    """What every app records of an imported file: the same bytes imported again into a project add
    nothing (a subclass adds the project foreign key and a unique (project, sha256) constraint)."""

    filename = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    rows = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
