"""The AED corpus dashboard: cases by grade and by error category, the mean gain with its confidence
interval, pooled pass rates by arm, and breakdowns by environment, harness and policy model."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.charts import bar_chart
from dataplatform.errors import PlatformError, show_error
from dataplatform.inputs import read
from dataplatform.jobs.models import TERMINAL_STATES, Job

from .. import selectors, services
from ..inputs import MAX_REPLAY_PAIRS, GradingSerializer
from ..models import GradingEvidence
from ..taxonomy import shipped_error_taxonomy
from .panels import describe_grading, grade_label, grade_rules, percent, signed

BREAKDOWN_FIELDS = {"environment": gettext_lazy("environment"), "harness": gettext_lazy("harness"),
                    "policy_model": gettext_lazy("policy model")}


@login_required
def dashboard(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    summary = selectors.corpus_summary(project)
    grading = selectors.grading_of(project)
    # New grading rules on many cases are applied by a job: until it is done, the figures mix old and new grades.
    regrading = (Job.objects.filter(project=project, kind="aed.regrade").exclude(state__in=TERMINAL_STATES)
                 .order_by("-id").only("progress_done", "progress_total").first())
    rules = grade_rules(grading)
    names = {c["slug"]: c["name"] for c in shipped_error_taxonomy().categories}
    grades = summary["grades"]
    ci = summary["mean_gain_ci"]
    rates = summary["pass_rate"]
    return render(request, "corpora/aed/dashboard.html", {
        "project": project,
        "summary": summary,
        "regrading": regrading,
        "mean_gain": signed(summary["mean_gain"]),
        "mean_gain_ci": f"[{signed(ci[0])}, {signed(ci[1])}]" if ci else "",
        "pass_rate_c": percent(summary["pass_rate"]["C"]),
        "pass_rate_r": percent(summary["pass_rate"]["R"]),
        "grade_rows": [{"grade": g, "label": grade_label(g), "n": n,
                        "rule": dict(rules).get(g, gettext("No rule applies yet."))} for g, n in grades.items()],
        "category_rows": [{"slug": slug_, "name": names.get(slug_, ""), "n": n}
                          for slug_, n in summary["categories"].items()],
        "breakdowns": [{"field": BREAKDOWN_FIELDS.get(field, field.replace("_", " ")), "rows": [
            {"name": name, **row, "mean_gain": signed(row["mean_gain"])} for name, row in groups.items()]}
            for field, groups in summary["breakdowns"].items()],
        "grade_rules": rules,
        "grading": grading,
        "grading_text": describe_grading(grading),
        "evidence_choices": GradingEvidence.choices,
        "max_pairs": MAX_REPLAY_PAIRS,
        "grade_chart": bar_chart([grade_label(g) for g in grades], list(grades.values()),
                                 title=gettext("Cases by grade")),
        "category_chart": bar_chart(list(summary["categories"]), list(summary["categories"].values()),
                                    title=gettext("Cases by error category")),
        # No pair replayed yet: no chart (the page says how to get one).
        "arm_chart": bar_chart([gettext("C (corrected)"), gettext("R (retry)")], [rates["C"], rates["R"]],
                               title=gettext("Pooled pass rate by arm"), value_format=lambda v: f"{v:.0%}")
        if rates["C"] is not None or rates["R"] is not None else None,
    })


@login_required
@require_POST
def update_grading(request, slug: str):
    """Save the project's grading rules (which replay grades a case, grade A's minimum pairs and level)."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    try:
        services.update_grading(project=project, user=request.user, **read(GradingSerializer, request.POST))
    except PlatformError as exc:
        show_error(request, exc)
    else:
        messages.success(request, gettext("Grading rules saved: %(rules)s.") % {
            "rules": describe_grading(selectors.grading_of(project))})
    return redirect("aed-dashboard", slug=slug)
