from django.utils.translation import gettext_lazy

from dataplatform.jobs.registry import JobKind, NoParams, register

from . import services


def run_export(job, progress) -> dict:
    return services.write_export(export=job.export, progress=progress)


register(JobKind(
    name=services.WRITE_JOB_KIND,
    label=gettext_lazy("Write export"),
    description=gettext_lazy("Writes an export's training shards, dataset card and manifest."),
    params_serializer=NoParams,
    run=run_export,
))
