from django.utils.translation import gettext_lazy
from rest_framework import serializers

from dataplatform.jobs.registry import JobKind, register

from . import services


class NoParams(serializers.Serializer):
    """The export row holds the options; the job only points at it (job.export)."""


def run_export(job, progress) -> dict:
    return services.write_export(export=job.export, progress=progress)


register(JobKind(
    name=services.WRITE_JOB_KIND,
    label=gettext_lazy("Write export"),
    description=gettext_lazy("Writes an export's training shards, dataset card and manifest."),
    params_serializer=NoParams,
    run=run_export,
))
