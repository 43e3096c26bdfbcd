"""The AED overview: the trace import form and the trace list, filtered by environment, harness, policy
model, case and grade."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Exists, OuterRef
from django.shortcuts import redirect, render
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.dbfunctions import JSONArrayLength
from dataplatform.imports import page_import
from dataplatform.pagination import capped_count, keyset_page
from dataplatform.tallies.registry import Figure

from .. import grades, importers, selectors, stats
from ..models import Case, CaseStatus
from .panels import grade_label

PAGE_SIZE = 50
MAX_FILTER_CHOICES = 200
CASE_FILTERS = [("with", gettext_lazy("with a case")), ("without", gettext_lazy("without a case")),
                ("submitted", gettext_lazy("with a submitted case"))]
GRADE_FILTERS = [*stats.GRADE_ORDER, "ungraded"]
TRACE_FILTERS = ("environment", "harness", "policy_model")


@login_required
def overview(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    return _render_overview(request, project)


def _render_overview(request, project, *, import_report=None):
    traces = selectors.traces_visible_to(request.user, project)
    filters = {key: request.GET.get(key, "").strip() for key in (*TRACE_FILTERS, "case", "grade")}
    listed = traces
    for field in TRACE_FILTERS:
        if filters[field]:
            listed = listed.filter(**{field: filters[field]})
    cases = Case.objects.filter(trace=OuterRef("pk"))
    if filters["case"] == "with":
        listed = listed.filter(Exists(cases))
    elif filters["case"] == "without":
        listed = listed.filter(~Exists(cases))
    elif filters["case"] == "submitted":
        listed = listed.filter(Exists(cases.filter(status=CaseStatus.SUBMITTED)))
    if filters["grade"] in GRADE_FILTERS:  # the grades kept on the cases (grades.regrade)
        grade = filters["grade"]
        listed = listed.filter(Exists(cases.filter(grade__isnull=True) if grade == grades.UNGRADED
                                      else cases.filter(grade=grade)))
    # Unfiltered (no filter above narrowed it), the page walks the project's (project, id) index; a filter is left
    # to the planner, which weighs the filter's own index against a walk of the project by how rare the value is.
    unfiltered = listed is traces
    listed = listed.defer("steps", "meta").annotate(n_steps=JSONArrayLength("steps"))
    page = keyset_page(request, listed, size=PAGE_SIZE, descending=False,
                       project_id=project.pk if unfiltered else None)
    by_trace: dict[int, list] = {}
    for case in (Case.objects.filter(trace__in=[t.pk for t in page.rows]).select_related("curator")
                 .only("pk", "trace_id", "status", "grade", "curator__username").order_by("pk")):
        by_trace.setdefault(case.trace_id, []).append({"case": case, "grade": case.grade})
    # Kept figures (the importer and the curation services keep them): no count over the project's traces or cases.
    figures = selectors.trace_figures(project)
    trace_count = figures.get("traces", Figure(0)).count
    chosen = [field for field in TRACE_FILTERS if filters[field]]
    if not chosen and not filters["case"] and not filters["grade"]:
        matching, more = trace_count, False
    elif len(chosen) == 1 and not filters["case"] and not filters["grade"]:
        matching, more = figures.get(f"{chosen[0]}|{filters[chosen[0]]}", Figure(0)).count, False
    else:
        matching, more = capped_count(listed)
    case_counts = selectors.case_counts(project)
    return render(request, "corpora/aed/overview.html", {
        "project": project,
        "import_report": import_report,
        "counts": {"traces": trace_count, "cases": case_counts["cases"],
                   "submitted": case_counts[CaseStatus.SUBMITTED]},
        "matching": matching,
        "more": more,
        "filters": filters,
        "choices": {field: sorted(key.split("|", 1)[1] for key, figure in figures.items()
                                  if key.startswith(f"{field}|") and figure.count)[:MAX_FILTER_CHOICES]
                    for field in TRACE_FILTERS},
        "case_filters": CASE_FILTERS,
        "grade_filters": [(g, grade_label(g)) for g in GRADE_FILTERS],
        "page": page,
        "rows": [{"trace": trace, "cases": by_trace.get(trace.pk, [])} for trace in page.rows],
    })


@login_required
@require_POST
def import_file(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    result = page_import(request, importers.import_traces, project=project, user=request.user)
    if result is None:
        messages.error(request, gettext("Choose a JSONL file of traces."))
        return redirect("aed-overview", slug=slug)
    return _render_overview(request, project, import_report=result)
