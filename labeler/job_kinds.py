from rest_framework import serializers

from dataplatform.apiutils import MAX_INT
from dataplatform.jobs.registry import JobKind, register

from . import services


class AutolabelParams(serializers.Serializer):
    retry_errors = serializers.BooleanField(default=False, help_text="label again the tasks whose answer failed")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_INT, allow_null=True, default=None,
                                     help_text="stop after this many tasks (resume later with another job)")


def run_autolabel(job, progress) -> dict:
    return services.autolabel_project(project=job.project, progress=progress, job=job,
                                      retry_errors=job.params["retry_errors"], limit=job.params.get("limit"))


register(JobKind(
    name="labeler.autolabel",
    label="Auto-label SWE tasks",
    description="The model labels every task that has no label under the pinned taxonomy yet: families and "
                "dimensions first, then the tags of the chosen families. Invalid answers are retried once with "
                "twice the token budget, then recorded as errors.",
    params_serializer=AutolabelParams,
    run=run_autolabel,
))
