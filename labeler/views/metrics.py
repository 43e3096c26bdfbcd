"""The SWE Labeler's metrics page: agreement of the model with reviewers and of reviewers with each
other, and the distributions of the final labels."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from dataplatform import inputs
from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.charts import bar_chart
from dataplatform.errors import PlatformError, Refused, show_error
from dataplatform.jobs import services as job_services

from .. import agreement, selectors, services
from ..serializers import CompareVersionsSerializer
from ..templatetags.labeler_text import field_text

TOP_TAGS = 30


@login_required
def metrics_page(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    taxonomy = services.settings_for(project).taxonomy
    kept = agreement.reports(project.pk, taxonomy)  # kept counts: a few rows, whatever the project's size
    llm, humans, distributions = kept["llm_vs_human"], kept["human_vs_human"], kept["distributions"]
    tags = sorted(((field, tag, row) for field, data in llm["multi"].items() for tag, row in data["tags"].items()),
                  key=lambda item: (-item[2]["support"], item[0], item[1]))[:TOP_TAGS]
    singles = taxonomy.definition.single_fields()
    # Another version's labels against the pinned one's, as the latest comparison job found them.
    other = _other_taxonomy(request, taxonomy, request.GET.get("compare"))
    comparison = selectors.version_comparison(project, taxonomy, other) if other else None
    return render(request, "labeler/metrics.html", {
        "compare": other,
        "comparison": comparison,
        "changes": comparison.kept.result if comparison and comparison.kept else None,
        "other_taxonomies": selectors.taxonomies_visible_to(request.user).exclude(pk=taxonomy.pk),
        "project": project,
        "taxonomy": taxonomy,
        "llm": llm,
        "humans": humans,
        "distributions": distributions,
        "tags": [{"field": field, "tag": tag, **row} for field, tag, row in tags],
        "single_fields": singles,
        "reviewers": [{"name": name, "scores": [scores.get(field) for field in singles]}
                      for name, scores in llm["reviewers"].items()],
        "charts": [bar_chart([value for value, _ in counts[:TOP_TAGS]], [count for _, count in counts[:TOP_TAGS]],
                             title=_chart_title(name, top=len(counts) > TOP_TAGS))
                   for name, counts in distributions["fields"].items()],
        "category_chart": bar_chart(list(distributions["categories"]), list(distributions["categories"].values()),
                                    title=gettext("Reviewer category of the final labels")),
    })


def _other_taxonomy(request, pinned, pk):
    if not str(pk or "").isdigit():
        return None
    return selectors.taxonomies_visible_to(request.user).exclude(pk=pinned.pk).filter(pk=int(pk)).first()


@login_required
@require_POST
def compare_versions(request, slug: str):
    """Queue a comparison of the pinned version's final labels with another's (labeler/job_kinds.py); the page
    shows its progress, then its result."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    taxonomy = services.settings_for(project).taxonomy
    try:
        other = _other_taxonomy(request, taxonomy, inputs.read(CompareVersionsSerializer, request.POST)["compare"])
        if other is None:
            raise Refused(gettext("Choose another taxonomy version to compare with."), field="compare")
        job = selectors.version_comparison(project, taxonomy, other).pending or job_services.enqueue_job(
            project=project, kind=selectors.COMPARE_KIND, user=request.user,
            params={"taxonomy": taxonomy.pk, "compare": other.pk})
    except PlatformError as exc:
        show_error(request, exc)
        return redirect("labeler-metrics", slug=slug)
    messages.success(request, gettext("Job %(job)s is comparing the two versions.") % {"job": job.pk})
    return redirect(f"{reverse('labeler-metrics', args=[slug])}?compare={other.pk}#compare-title")


def _chart_title(name: str, *, top: bool) -> str:
    if top:
        return gettext("%(field)s (final labels, top %(top)s)") % {"field": field_text(name), "top": TOP_TAGS}
    return gettext("%(field)s (final labels)") % {"field": field_text(name)}
