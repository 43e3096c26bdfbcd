"""The AED corpus dashboard: cases by grade and by error category, the mean gain with its confidence
interval, pooled pass rates by arm, and breakdowns by environment, harness and policy model."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.charts import bar_chart

from .. import selectors, stats
from ..taxonomy import shipped_error_taxonomy
from .panels import GRADE_TEXT, percent, signed


@login_required
def dashboard(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    summary = selectors.corpus_summary(project)
    names = {c["slug"]: c["name"] for c in shipped_error_taxonomy().categories}
    grades = summary["grades"]
    ci = summary["mean_gain_ci"]
    return render(request, "corpora/aed/dashboard.html", {
        "project": project,
        "summary": summary,
        "mean_gain": signed(summary["mean_gain"]),
        "mean_gain_ci": f"[{signed(ci[0])}, {signed(ci[1])}]" if ci else "",
        "pass_rate_c": percent(summary["pass_rate"]["C"]),
        "pass_rate_r": percent(summary["pass_rate"]["R"]),
        "grade_rows": [{"grade": g, "n": n, "rule": GRADE_TEXT.get(g, "No rule applies yet.")}
                       for g, n in grades.items()],
        "category_rows": [{"slug": slug_, "name": names.get(slug_, ""), "n": n}
                          for slug_, n in summary["categories"].items()],
        "breakdowns": [{"field": field.replace("_", " "), "rows": [
            {"name": name, **row, "mean_gain": signed(row["mean_gain"])} for name, row in groups.items()]}
            for field, groups in summary["breakdowns"].items()],
        "grade_rules": stats.GRADE_RULES,
        "grade_chart": bar_chart(list(grades), list(grades.values()), title="Cases by grade"),
        "category_chart": bar_chart(list(summary["categories"]), list(summary["categories"].values()),
                                    title="Cases by error category"),
        "arm_chart": bar_chart(["C (corrected)", "R (retry)"],
                               [summary["pass_rate"]["C"], summary["pass_rate"]["R"]],
                               title="Pooled pass rate by arm", value_format=lambda v: f"{v:.0%}"),
    })
