"""The ATD page: import the prompt pool, score it with the ancestor, watch q's histogram and the
near-tie count move live with epsilon, freeze selections and ask the teacher for one bit each.

Curators and admins (CAN_CURATE) only: annotators and trainers get 403, outsiders 404. Writes go
through `corpora.atd.services` / `importers`, reads through `corpora.atd.selectors` (the counts are
done by the database). Prompt and candidate text is rendered auto-escaped, never marked safe.
"""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_GET, require_POST

from dataplatform.accounts.permissions import CAN_CURATE, project_for
from dataplatform.charts import bar_chart
from dataplatform.errors import PlatformError, show_error
from dataplatform.imports import page_import
from dataplatform.inputs import read
from dataplatform.pagination import keyset_page, parse_id

from . import importers, selectors, services
from .api import parse_bias_threshold, parse_epsilon
from .inputs import AtdScoringRunCreateSerializer, AtdSelectionCreateSerializer, AtdTeacherCreateSerializer
from .models import ScoringMethod, ScoringRun, TeacherMode

DEFAULT_EPSILON = 0.02
MAX_RUNS_SHOWN = 20
SELECTIONS_PER_PAGE = 20  # newest first, by keyset ("Next page" for older ones)
SAMPLE_SIZE = 5  # kept prompts shown under the live count


def _project(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    return project


def _last_user_text(messages_) -> str:
    for message in reversed(messages_ or []):
        if isinstance(message, dict) and message.get("role", "user") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


def _tie_rule(query) -> tuple[float, float, bool]:
    """(epsilon, bias threshold, include biased) from the live count's query (ValueError: one out of range)."""
    return (parse_epsilon(query.get("epsilon", DEFAULT_EPSILON)),
            parse_bias_threshold(query.get("bias_threshold", selectors.DEFAULT_BIAS_THRESHOLD)),
            bool(query.get("include_biased")))


def _tie_context(run: ScoringRun, epsilon: float, bias_threshold: float = selectors.DEFAULT_BIAS_THRESHOLD,
                 include_biased: bool = False) -> dict:
    threshold = None if include_biased else bias_threshold
    scored = selectors.scored_count(run)
    kept = selectors.kept_count(run, epsilon, threshold)
    sample = selectors.near_tie_sample(run, epsilon, SAMPLE_SIZE, threshold)
    return {"run": run, "epsilon": epsilon, "bias_threshold": bias_threshold, "include_biased": include_biased,
            "scored": scored, "kept": kept, "fraction": f"{kept / scored:.1%}" if scored else "—",
            "biased": selectors.biased_count(run, epsilon, bias_threshold),
            "sample": [{"score": s, "prompt": s.prompt, "text": _last_user_text(s.prompt.messages)} for s in sample]}


@login_required
@require_GET
def overview(request, slug: str):
    return _render_overview(request, _project(request, slug))


def _render_overview(request, project, *, import_report=None):
    runs = selectors.runs_visible_to(request.user, project)
    shown = list(runs[:MAX_RUNS_SHOWN])
    run = None
    if run_id := parse_id(request.GET.get("run")):
        run = runs.filter(pk=run_id).first()
    run = run or (shown[0] if shown else None)
    try:
        rule = _tie_rule(request.GET)
    except ValueError:
        rule = (DEFAULT_EPSILON, selectors.DEFAULT_BIAS_THRESHOLD, False)
    shown_value = request.GET.get("histogram", "q")
    shown_value = shown_value if shown_value in selectors.HISTOGRAM_VALUES else "q"
    chart = None
    if run is not None:
        bins = selectors.q_histogram(run, value=shown_value)
        chart = bar_chart([f"{b['lo']:.2f}–{b['hi']:.2f}" for b in bins], [b["count"] for b in bins],
                          title=gettext("%(value)s under scoring run %(id)s") % {
                              "value": selectors.HISTOGRAM_VALUES[shown_value], "id": run.pk})
    selections = []
    selections_page = keyset_page(request, selectors.selections_with_teacher_runs(request.user, project),
                                  size=SELECTIONS_PER_PAGE)
    shown_selections = selections_page.rows
    counts = selectors.teacher_counts_of([t for selection in shown_selections for t in selection.teacher_runs.all()])
    for selection in shown_selections:
        teachers = [{"run": t, "counts": counts[t.pk]} for t in selection.teacher_runs.all()]
        modes = [(mode, TeacherMode(mode).label) for mode in services.teacher_modes(selection)]
        selections.append({"selection": selection, "teachers": teachers, "modes": modes})
    return render(request, "corpora/atd/overview.html", {
        "project": project,
        "import_report": import_report,
        "counts": selectors.pool_counts(request.user, project),
        "runs": shown,
        "run": run,
        "methods": ScoringMethod.choices,
        "chart": chart,
        "tie": _tie_context(run, *rule) if run is not None else None,
        "histogram_values": selectors.HISTOGRAM_VALUES,
        "shown_value": shown_value,
        "selections": selections,
        "selections_page": selections_page,
        "default_name": "near-ties",
        "teacher_endpoints": settings.ATD_TEACHER_ENDPOINTS,
    })


@login_required
@require_POST
def import_file(request, slug: str):
    project = _project(request, slug)
    result = page_import(request, importers.import_prompts, project=project, user=request.user)
    if result is None:
        messages.error(request, gettext("Choose a JSONL file of prompts."))
        return redirect("atd-overview", slug=slug)
    return _render_overview(request, project, import_report=result)


def _back(slug: str, run_id=None, epsilon=None):
    url = reverse("atd-overview", args=[slug])
    params = [f"run={int(run_id)}"] if run_id else []
    if epsilon is not None:
        params.append(f"epsilon={epsilon:g}")
    return redirect(url + ("?" + "&".join(params) if params else ""))


@login_required
@require_POST
def score(request, slug: str):
    project = _project(request, slug)
    try:
        run = services.start_scoring(project=project, user=request.user,
                                     **read(AtdScoringRunCreateSerializer, request.POST))
    except PlatformError as exc:
        show_error(request, exc)
        return _back(slug)
    messages.success(request, gettext("Scoring run %(id)s started.") % {"id": run.pk})
    return _back(slug, run.pk)


@login_required
@require_GET
def tie_counts(request, slug: str, run_id: int):
    """The live near-tie count (htmx partial): kept prompts and fraction at ?epsilon=, plus a sample."""
    project = _project(request, slug)
    run = selectors.run_for(request.user, project, run_id)
    try:
        rule = _tie_rule(request.GET)
    except ValueError as exc:
        return render(request, "corpora/atd/_tie_counts.html", {"error": str(exc)}, status=400)
    return render(request, "corpora/atd/_tie_counts.html", _tie_context(run, *rule))


@login_required
@require_POST
def freeze(request, slug: str):
    project = _project(request, slug)
    try:
        data = read(AtdSelectionCreateSerializer, request.POST)
    except PlatformError as exc:  # back to the newest run, with the message
        show_error(request, exc)
        return _back(slug)
    run = selectors.runs_visible_to(request.user, project).filter(pk=data.pop("run")).first()
    if run is None:
        raise Http404("No such scoring run.")
    try:
        selection = services.freeze_selection(run=run, user=request.user, **data)
    except PlatformError as exc:
        show_error(request, exc)
        return _back(slug, run.pk)
    values = {"name": selection.name, "version": selection.version, "size": selection.size,
              "epsilon": f"{selection.epsilon:g}", "left_out": selection.excluded_biased,
              "threshold": f"{selection.bias_threshold:g}"}
    if selection.excluded_biased:
        froze = ngettext("Froze %(name)s v%(version)s: %(size)s prompt with |q − 0.5| ≤ %(epsilon)s, %(left_out)s "
                         "position-biased left out (bias > %(threshold)s).",
                         "Froze %(name)s v%(version)s: %(size)s prompts with |q − 0.5| ≤ %(epsilon)s, %(left_out)s "
                         "position-biased left out (bias > %(threshold)s).", selection.size)
    else:
        froze = ngettext("Froze %(name)s v%(version)s: %(size)s prompt with |q − 0.5| ≤ %(epsilon)s.",
                         "Froze %(name)s v%(version)s: %(size)s prompts with |q − 0.5| ≤ %(epsilon)s.", selection.size)
    messages.success(request, froze % values)
    return _back(slug, run.pk, selection.epsilon)


@login_required
@require_POST
def teacher(request, slug: str, selection_id: int):
    project = _project(request, slug)
    selection = selectors.selection_for(request.user, project, selection_id)
    try:
        run = services.start_teacher(selection=selection, user=request.user,
                                     **read(AtdTeacherCreateSerializer, request.POST))
    except PlatformError as exc:
        show_error(request, exc)
        return _back(slug, selection.run_id)
    messages.success(request, gettext("Teacher run %(id)s started on %(name)s v%(version)s.") % {
        "id": run.pk, "name": selection.name, "version": selection.version})
    return _back(slug, selection.run_id)
