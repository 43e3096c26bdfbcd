from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID, MAX_INT
from dataplatform.errors import Missing
from dataplatform.jobs.registry import JobKind, register

from . import metrics, selectors, services


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


class CompareParams(serializers.Serializer):
    taxonomy = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="the taxonomy version compared from")
    compare = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="the taxonomy version compared to")


def run_compare_versions(job, progress) -> dict:
    """The final labels under two taxonomy versions compared over the whole project (metrics.version_changes): a
    figure that costs every label of both, so a job computes it and its result is what the metrics page and API
    show, with the time it ran ("as of") and a button to run it again."""
    visible = selectors.taxonomies_visible_to(job.created_by)
    versions = {pk: visible.filter(pk=pk).first() for pk in (job.params["taxonomy"], job.params["compare"])}
    if missing := [pk for pk, taxonomy in versions.items() if taxonomy is None]:
        raise Missing(f"No such taxonomy: {missing[0]}.")
    old, new = versions[job.params["taxonomy"]], versions[job.params["compare"]]
    labels = selectors.project_labels(job.project)
    return {"from": str(old), "to": str(new),
            **metrics.version_changes(labels.filter(taxonomy=old), labels.filter(taxonomy=new), old, new)}


register(JobKind(
    name=selectors.COMPARE_KIND,
    label=_("Compare two taxonomy versions"),
    description=_("Compares the final labels of the project's tasks under two taxonomy versions: per field they "
                  "share, how many tasks' values differ (with examples), and how the tasks move between categories. "
                  "The metrics page shows the latest comparison, as of when it ran."),
    params_serializer=CompareParams,
    run=run_compare_versions,
))
