from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.apiutils import MAX_INT
from dataplatform.jobs.registry import JobKind, register

from . import services


class AutolabelParams(serializers.Serializer):
    subjects = serializers.ChoiceField(choices=[services.TASKS, services.TRAJECTORIES], default=services.TASKS,
                                       help_text="label the tasks, or the trajectories (the published trajectory mode)")
    retry_errors = serializers.BooleanField(default=False, help_text="label again the tasks whose answer failed")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=MAX_INT, allow_null=True, default=None,
                                     help_text="stop after this many tasks (resume later with another job)")


def run_autolabel(job, progress) -> dict:
    return services.autolabel_project(project=job.project, progress=progress, job=job,
                                      retry_errors=job.params["retry_errors"], limit=job.params.get("limit"),
                                      subjects=job.params.get("subjects", services.TASKS))


register(JobKind(
    name="labeler.autolabel",
    label=_("Auto-label SWE tasks or trajectories"),
    description=_("The model labels every task (or trajectory) that has no label under the pinned taxonomy yet: "
                "families and dimensions first, then the tags of the chosen families. Invalid answers are retried "
                "once with twice the token budget, then recorded as errors. A trajectory is labeled from its "
                "summary, keeping complete level-1 labels it or its task already has (unless the project relabels)."),
    params_serializer=AutolabelParams,
    run=run_autolabel,
))
