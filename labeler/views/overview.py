"""The SWE Labeler's overview page: curators import tasks and trajectories, pin a taxonomy version,
change the settings, run auto-labeling and filter the task list, and see the trajectories; reviewers see
their claims."""

import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for
from dataplatform.errors import PlatformError, Refused, show_error
from dataplatform.imports import WHOLE, field_label, page_import
from dataplatform.inputs import InvalidInput, form_data, validated
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job
from dataplatform.pagination import capped_count, keyset_page
from dataplatform.status import render_html
from dataplatform.yamlfile import YamlFileError

from .. import figures, importers, selectors, services
from ..models import LabelOrigin, LabelStatus, SourceKind, SweTask, Trajectory, TrajectoryL1Mode
from ..serializers import ImportKindSerializer, SettingsSerializer, TaxonomyUploadSerializer
from .review import with_data

AUTOLABEL_KIND = "labeler.autolabel"
PAGE_SIZE = 50
MATCHING_CAP = 1_000  # a filtered count stops here ("more than 1,000"): counting costs as many rows
# The labels a field filter walks before it leaves a rare value to the planner: a value on one task in ten fills the
# count's "more than 1,000" within it, a value on one in two hundred the first page.
FIELD_WALK_BUDGET = 10_000
MAX_TAXONOMY_PROBLEMS_SHOWN = 20
IMPORTERS = {SourceKind.TASKS: importers.import_tasks, SourceKind.TRAJECTORIES: importers.import_trajectories}


@login_required
def overview(request, slug: str):
    project, role = project_for(request.user, slug, CAN_ANNOTATE)
    return _render_overview(request, project, role)


def _render_overview(request, project, role, *, import_report=None):
    context = {"project": project, "claims": selectors.my_claims(request.user, project)[:50],
               "trajectory_claims": selectors.my_trajectory_claims(request.user, project)[:50],
               "import_report": import_report}
    if role in CAN_CURATE:
        context |= _curator_context(request, project)
    return render(request, "labeler/overview.html", context)


def _curator_context(request, project) -> dict:
    settings = services.settings_for(project)
    taxonomy = settings.taxonomy
    tasks = selectors.tasks_visible_to(request.user, project)
    trajectories = selectors.trajectories_visible_to(request.user, project)
    counts = figures.state_counts(project.pk, taxonomy.pk)
    trajectory_counts = figures.state_counts(project.pk, taxonomy.pk, trajectories=True)
    trajectory_state = request.GET.get("tstate", "").strip()
    trajectory_state = trajectory_state if trajectory_state in selectors.REVIEW_STATES else ""
    listed_trajectories = selectors.filter_by_state(trajectories, taxonomy, trajectory_state, annotate=False)
    trajectory_page = keyset_page(request, listed_trajectories.only("id", "trajectory_id", "instance_id", "model",
                                                                    "task_id"),
                                  size=PAGE_SIZE, descending=False, param="tafter", project_id=project.pk,
                                  ids=_state_page(project, Trajectory, taxonomy, trajectory_state))
    selectors.review_state_of(trajectory_page.rows, taxonomy)
    filters = {key: request.GET.get(key, "").strip() for key in ("state", "field", "value", "q")}
    try:
        listed = selectors.filter_tasks(tasks, taxonomy, state=filters["state"], field=filters["field"],
                                        value=filters["value"], search=filters["q"], annotate=False)
    except Refused as exc:  # the page still lists the tasks, unfiltered, with the message
        messages.error(request, str(exc))
        listed, filters["field"] = tasks, ""
    # With a state alone, the page is found from the labels in that state (_state_page); with a field's value alone,
    # by a short walk of the project's labels when the value is common (_field_page); with no filter, on the
    # project's (project, id) index. A rare value or a search is left to the planner, which weighs their indexes
    # (GIN, trigram) against a walk of the project.
    by_field = bool(filters["field"] and filters["value"])
    walk = (selectors.field_walk(project, taxonomy, filters["field"], filters["value"], after=None,
                                 budget=FIELD_WALK_BUDGET)
            if by_field and not filters["state"] and not filters["q"] else None)
    plain = not by_field and not filters["q"]
    page = keyset_page(request, listed, size=PAGE_SIZE, descending=False, project_id=project.pk if plain else None,
                       ids=(_state_page(project, SweTask, taxonomy, filters["state"]) if plain
                            else _field_page(project, taxonomy, filters, walk)))
    selectors.review_state_of(page.rows, taxonomy)
    failed = [task.pk for task in page.rows if task.has_error]
    errors = {task_id: render_html(i18n, error) for task_id, error, i18n in selectors.project_labels(project).filter(
        task_id__in=failed, taxonomy=taxonomy, origin=LabelOrigin.MODEL, status=LabelStatus.ERROR,
    ).values_list("task_id", "error", "error_i18n")} if failed else {}
    return {
        "curator": True,
        "counts": counts,
        "trajectory_counts": trajectory_counts,
        "trajectory_page": trajectory_page,
        "trajectory_matching": trajectory_counts["states"][trajectory_state],
        "trajectory_state": trajectory_state,
        "settings": settings,
        "taxonomy": taxonomy,
        "taxonomy_counts": taxonomy.definition.counts(),
        "taxonomies": selectors.taxonomies_visible_to(request.user),
        "trajectory_l1_modes": TrajectoryL1Mode.choices,
        "jobs": Job.objects.filter(project=project, kind=AUTOLABEL_KIND).order_by("-id")[:3],
        "page": page,
        "matching": _matching(listed, counts, filters, walk),
        "rows": [{"task": task, "error": errors.get(task.pk, "")} for task in page.rows],
        "filters": filters,
        "states": selectors.REVIEW_STATES,
        "fields": taxonomy.definition.fields(),
        "source_kinds": SourceKind.choices,
    }


def _state_page(project, model, taxonomy, state: str):
    """A list's page of one review state found from the labels that make it (selectors.state_page_ids), or None
    for no state or one no label makes (unlabeled): the page walks the items."""
    if state not in selectors.STATE_LABELS:
        return None
    return functools.partial(selectors.state_page_ids, project, model, taxonomy, state)


def _field_page(project, taxonomy, filters: dict, walk: selectors.FieldWalk | None):
    """A page of a field's value alone from a walk of the project's labels (`walk`: the first one, from the first
    task), or None, where the value is too rare for the walk to fill the page: the planner finds it."""
    if walk is None:
        return None

    def ids(start: int | None, n: int) -> list[int] | None:
        found = walk if start is None else selectors.field_walk(
            project, taxonomy, filters["field"], filters["value"], after=start, budget=FIELD_WALK_BUDGET)
        return found.ids[:n] if len(found.ids) >= n or found.complete else None
    return ids


def _matching(listed, counts: dict, filters: dict, walk: selectors.FieldWalk | None) -> dict:
    """How many tasks the filters match: from the kept counts for a review state alone, from the field walk where
    it says (it reached the end, or found more than MATCHING_CAP), else counted up to MATCHING_CAP ("more than
    1,000"), never the whole project on every page."""
    if not (filters["field"] and filters["value"]) and not filters["q"]:
        state = filters["state"] if filters["state"] in selectors.REVIEW_STATES else ""
        return {"n": counts["states"][state], "more": False}
    if walk is not None and (walk.complete or len(walk.ids) > MATCHING_CAP):
        return {"n": min(len(walk.ids), MATCHING_CAP), "more": len(walk.ids) > MATCHING_CAP}
    n, more = capped_count(listed, cap=MATCHING_CAP)
    return {"n": n, "more": more}


@login_required
@require_POST
def import_file(request, slug: str):
    project, role = project_for(request.user, slug, CAN_CURATE)
    try:
        kind = validated(ImportKindSerializer(data=request.POST))["kind"]
    except InvalidInput as exc:
        show_error(request, exc)
        return redirect("labeler-overview", slug=slug)
    result = page_import(request, IMPORTERS[kind], project=project, user=request.user)
    if result is None:
        messages.error(request, gettext("Choose what to import and a JSONL file."))
        return redirect("labeler-overview", slug=slug)
    return _render_overview(request, project, role, import_report=result)


@login_required
@require_POST
def pin_taxonomy(request, slug: str):
    """The pin form: the settings with only the taxonomy version in it."""
    return _save_settings(request, slug)


@login_required
@require_POST
def update_settings(request, slug: str):
    return _save_settings(request, slug)


def _save_settings(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    try:
        changes = validated(SettingsSerializer(data=request.POST, partial=True, context={"user": request.user}))
    except InvalidInput as exc:
        show_error(request, exc)
        return redirect("labeler-overview", slug=slug)
    services.update_settings(project=project, **changes)
    if "taxonomy" in changes:
        messages.success(request, with_data(gettext("Pinned taxonomy %(taxonomy)s. Existing labels keep their version."),
                                            taxonomy=changes["taxonomy"]))
    if set(changes) - {"taxonomy"}:
        messages.success(request, gettext("Settings saved."))
    return redirect("labeler-overview", slug=slug)


def _taxonomy_problem(error: dict) -> str:
    """One problem of an uploaded taxonomy: the file name and the field path as they are (marked translate="no"),
    the message the interface's, in the request's language (as an import's line errors)."""
    field = (escape(field_label(error["field"])) if error["field"] in WHOLE
             else format_html('<span translate="no">{}</span>', error["field"]))
    return mark_safe(escape(gettext("%(file)s, line %(line)s, %(field)s: %(message)s"))  # noqa: S308 - escaped
                     % {"file": format_html('<span translate="no">{}</span>', error["file"]), "line": error["line"],
                        "field": field, "message": escape(error["message"])})


@login_required
@require_POST
def upload_taxonomy(request, slug: str):
    """A taxonomy file of this platform's format, or the published definition files (or their zip), stored as a
    version and pinned unless unticked."""
    project, _ = project_for(request.user, slug, CAN_CURATE)
    try:
        upload = validated(TaxonomyUploadSerializer(data=form_data(request)))
        if "files" in upload:
            taxonomy = services.load_upstream_taxonomy(files=upload["files"], name=upload["name"],
                                                       version=upload["version"], user=request.user)
        else:
            taxonomy = services.load_taxonomy(text=upload["text"], filename=upload["filename"], user=request.user)
    except YamlFileError as exc:
        for error in exc.errors[:MAX_TAXONOMY_PROBLEMS_SHOWN]:
            messages.error(request, _taxonomy_problem(error))
        return redirect("labeler-overview", slug=slug)
    except InvalidInput as exc:
        show_error(request, exc)
        return redirect("labeler-overview", slug=slug)
    counts = taxonomy.definition.counts()
    messages.success(request, with_data(gettext("Loaded taxonomy %(taxonomy)s: %(families)s families, %(tags)s tags."),
                                        taxonomy=taxonomy, families=counts["families"], tags=counts["tags"]))
    if upload["pin"]:
        services.update_settings(project=project, taxonomy=taxonomy)
        messages.success(request, with_data(gettext("Pinned taxonomy %(taxonomy)s. Existing labels keep their version."),
                                            taxonomy=taxonomy))
    return redirect("labeler-overview", slug=slug)


@login_required
@require_POST
def start_autolabel(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CURATE)
    try:  # the job kind's parameters (job_kinds.AutolabelParams) are this form's input
        job = job_services.enqueue_job(project=project, kind=AUTOLABEL_KIND, params=request.POST, user=request.user)
    except PlatformError as exc:
        show_error(request, exc)
    else:
        messages.success(request, gettext("Job %(job)s is auto-labeling the trajectories.") % {"job": job.pk}
                         if job.params["subjects"] == services.TRAJECTORIES
                         else gettext("Job %(job)s is auto-labeling the tasks.") % {"job": job.pk})
    return redirect("labeler-overview", slug=slug)
