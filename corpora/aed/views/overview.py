"""The AED overview: the trace import form and the trace list, filtered by environment, harness, policy
model, case and grade."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Exists, OuterRef
from django.shortcuts import redirect, render
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.dbfunctions import JSONArrayLength
from dataplatform.imports import page_import

from .. import importers, selectors, stats
from ..models import CaseStatus
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
    cases = selectors.cases_of(project).prefetch_related(None).filter(trace=OuterRef("pk"))
    if filters["case"] == "with":
        listed = listed.filter(Exists(cases))
    elif filters["case"] == "without":
        listed = listed.filter(~Exists(cases))
    elif filters["case"] == "submitted":
        listed = listed.filter(Exists(cases.filter(status=CaseStatus.SUBMITTED)))
    grading = selectors.grading_of(project)
    if filters["grade"] in GRADE_FILTERS:
        # Grades are computed from replay statistics in Python; a project's hand-curated cases are few.
        graded = {case.trace_id for case in selectors.cases_of(project)
                  if (selectors.grade_of(case, grading) or "ungraded") == filters["grade"]}
        listed = listed.filter(pk__in=sorted(graded))
    listed = (listed.defer("steps", "meta").order_by("id")
              .annotate(n_steps=JSONArrayLength("steps")))
    page = Paginator(listed, PAGE_SIZE).get_page(request.GET.get("page"))
    by_trace: dict[int, list] = {}
    if page.object_list:
        for case in selectors.cases_of(project).filter(trace__in=[t.pk for t in page]):
            by_trace.setdefault(case.trace_id, []).append({"case": case, "grade": selectors.grade_of(case, grading)})
    statuses = dict(selectors.cases_of(project).prefetch_related(None).order_by()
                    .values_list("status").annotate(n=Count("pk")))
    return render(request, "corpora/aed/overview.html", {
        "project": project,
        "import_report": import_report,
        "counts": {"traces": traces.count(), "cases": sum(statuses.values()),
                   "submitted": statuses.get(CaseStatus.SUBMITTED, 0)},
        "filters": filters,
        "choices": {field: list(traces.order_by(field).values_list(field, flat=True).distinct()[:MAX_FILTER_CHOICES])
                    for field in TRACE_FILTERS},
        "case_filters": CASE_FILTERS,
        "grade_filters": [(g, grade_label(g)) for g in GRADE_FILTERS],
        "page": page,
        "rows": [{"trace": trace, "cases": by_trace.get(trace.pk, [])} for trace in page],
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
