"""The SWE Labeler's metrics page: agreement of the model with reviewers and of reviewers with each
other, and the distributions of the final labels."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.charts import bar_chart

from .. import agreement, metrics, selectors, services
from ..templatetags.labeler_text import field_text

TOP_TAGS = 30


@login_required
def metrics_page(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    taxonomy = services.settings_for(project).taxonomy
    labels = selectors.project_labels(project).filter(taxonomy=taxonomy)
    kept = agreement.reports(project.pk, taxonomy)  # kept counts: a few rows, whatever the project's size
    llm, humans, distributions = kept["llm_vs_human"], kept["human_vs_human"], kept["distributions"]
    tags = sorted(((field, tag, row) for field, data in llm["multi"].items() for tag, row in data["tags"].items()),
                  key=lambda item: (-item[2]["support"], item[0], item[1]))[:TOP_TAGS]
    singles = taxonomy.definition.single_fields()
    # Another version's labels against the pinned one's: what moving between them changes.
    other = selectors.taxonomies_visible_to(request.user).exclude(pk=taxonomy.pk).filter(
        pk=request.GET.get("compare") or 0).first()
    changes = metrics.version_changes(labels, selectors.project_labels(project).filter(taxonomy=other), taxonomy,
                                      other) if other else None
    return render(request, "labeler/metrics.html", {
        "compare": other,
        "changes": changes,
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


def _chart_title(name: str, *, top: bool) -> str:
    if top:
        return gettext("%(field)s (final labels, top %(top)s)") % {"field": field_text(name), "top": TOP_TAGS}
    return gettext("%(field)s (final labels)") % {"field": field_text(name)}
