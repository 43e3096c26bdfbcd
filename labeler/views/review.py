"""The SWE Labeler's review pages: claiming the next task or trajectory, the task page and the trajectory page
with their keyboard-driven label editor (htmx edits, one field at a time), accepting and skipping."""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, project_for
from dataplatform.conversations.reading import read_conversation
from dataplatform.errors import PlatformError, show_error
from dataplatform.inputs import InvalidInput, validated

from .. import selectors, services, trajectory_mode
from ..models import LabelOrigin, ReviewClaimState, Trajectory
from ..serializers import EditSerializer, LabelVersionSerializer
from ..taxonomy import UNSPECIFIED


@login_required
@require_POST
def claim(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_ANNOTATE)
    return _next(request, project, services.TASKS)


@login_required
@require_POST
def claim_trajectory(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_ANNOTATE)
    return _next(request, project, services.TRAJECTORIES)


def _next(request, project, queue: str):
    claimed = services.claim_next(project=project, reviewer=request.user, queue=queue)
    if claimed is None:
        messages.info(request, gettext("Nothing left to review: no tasks with a free slot for you.") if queue == services.TASKS
                      else gettext("Nothing left to review: no trajectories with a free slot for you."))
        return redirect("labeler-overview", slug=project.slug)
    return _page_of(project, claimed.task if queue == services.TASKS else claimed.trajectory)


def _page_of(project, item):
    if isinstance(item, Trajectory):
        return redirect("labeler-trajectory", slug=project.slug, trajectory_id=item.pk)
    return redirect("labeler-task", slug=project.slug, task_id=item.pk)


def _review_context(request, project, role, item, active_claim) -> dict:
    """What both review pages show of the item's labels under the pinned taxonomy: the reviewer's own (started
    when they hold a claim, or are a curator), the model's, and for curators every label side by side."""
    taxonomy = services.settings_for(project).taxonomy
    labels = list(selectors.labels_of(request.user, item))
    if role in CAN_CURATE or active_claim is not None:
        mine = services.start_review(item=item, reviewer=request.user)
    else:  # a finished or skipped claim: the reviewer's earlier label, if any
        mine = next((label for label in labels if label.origin == LabelOrigin.HUMAN
                     and label.author_id == request.user.pk and label.taxonomy_id == taxonomy.pk), None)
    model_label = next((label for label in labels if label.origin == LabelOrigin.MODEL
                        and label.taxonomy_id == taxonomy.pk), None)
    others = [label for label in labels if label.taxonomy_id == taxonomy.pk and label.origin == LabelOrigin.HUMAN
              and (mine is None or label.pk != mine.pk)]
    shown = [label for label in [model_label, *others] if label is not None]
    return {
        "project": project,
        "taxonomy": taxonomy,
        "active_claim": active_claim,
        "model_label": model_label,
        "other_labels": shown if role in CAN_CURATE else [],
        "comparison": _comparison(taxonomy.definition, shown) if role in CAN_CURATE else [],
        "hidden_versions": sum(1 for label in labels if label.taxonomy_id != taxonomy.pk),
        **(_editor_context(mine, model_label) if mine is not None else {}),
    }


@login_required
def task_page(request, slug: str, task_id: int):
    project, role = project_for(request.user, slug, CAN_ANNOTATE)
    task = selectors.task_for(request.user, project, task_id)
    active_claim = selectors.my_claims(request.user, project).filter(task=task, state=ReviewClaimState.ACTIVE).first()
    return render(request, "labeler/task.html", {
        **_review_context(request, project, role, task, active_claim),
        "task": task,
        "patch_lines": diff_lines(task.patch),
        "test_patch_lines": diff_lines(task.test_patch),
        "trajectories": task.trajectories.count(),
        "next_url": reverse("labeler-claim", args=[project.slug]),
        "skip_url": reverse("labeler-skip", args=[project.slug, task.pk]),
    })


@login_required
def trajectory_page(request, slug: str, trajectory_id: int):
    """A trajectory in the published trajectory mode: its messages (every text escaped by the template: model and
    tool output are hostile), the summary the model was shown, and the label editor."""
    project, role = project_for(request.user, slug, CAN_ANNOTATE)
    trajectory = selectors.trajectory_for(request.user, project, trajectory_id)
    active_claim = selectors.my_trajectory_claims(request.user, project).filter(
        trajectory=trajectory, state=ReviewClaimState.ACTIVE).first()
    conversation = read_conversation(trajectory.messages, trajectory.tools).conversation
    try:
        shown_to_model = trajectory_mode.describe(trajectory, services.settings_for(project))
    except trajectory_mode.Unreadable:
        shown_to_model = ""
    task_visible = trajectory.task_id is not None and selectors.tasks_visible_to(request.user, project).filter(
        pk=trajectory.task_id).exists()
    return render(request, "labeler/trajectory.html", {
        **_review_context(request, project, role, trajectory, active_claim),
        "trajectory": trajectory,
        "messages_shown": conversation.messages if conversation is not None else [],
        "tools": conversation.tools if conversation is not None else [],
        "shown_to_model": shown_to_model,
        "task_visible": task_visible,
        "next_url": reverse("labeler-claim-trajectory", args=[project.slug]),
        "skip_url": reverse("labeler-skip-trajectory", args=[project.slug, trajectory.pk]),
    })


@login_required
@require_POST
def edit_field(request, slug: str, label_id: int):
    """htmx: set one field of the reviewer's label; answers with the re-rendered editor."""
    label = _own_label(request, slug, label_id)
    error, status, field = "", 200, ""
    try:
        edit = validated(EditSerializer(data=request.POST, context={"spec": label.taxonomy.definition}))
        field = next(iter(edit["values"]), "")
        label = services.edit_label(label=label, version=edit["version"], changes=edit["values"], actor=request.user)
    except (InvalidInput, services.LabelingError) as exc:  # shown in the editor it re-renders, with the error's status
        error, status = str(exc), exc.status
        if isinstance(exc, services.StaleLabel):
            error += " " + gettext("Your change was not saved; the editor now shows the current label.")
            label = _own_label(request, slug, label_id)
    model_label = selectors.labels_of(request.user, label.item).filter(
        taxonomy=label.taxonomy, origin=LabelOrigin.MODEL).first()
    context = {"project": label.item.project, "error": error, **_editor_context(label, model_label, focus=field)}
    return render(request, "labeler/_editor.html", context, status=status)


@login_required
@require_POST
def accept(request, slug: str, label_id: int):
    label = _own_label(request, slug, label_id)
    try:
        version = validated(LabelVersionSerializer(data=request.POST))["version"]
        services.submit_label(label=label, version=version, actor=request.user)
    except PlatformError as exc:
        show_error(request, exc)
    else:
        text = (gettext("Submitted your label of %(item)s. Press n for the next trajectory.") if label.trajectory_id
                else gettext("Submitted your label of %(item)s. Press n for the next task."))
        messages.success(request, with_data(text, item=label.item))
    return _page_of(label.item.project, label.item)


@login_required
@require_POST
def skip(request, slug: str, task_id: int):
    project, _ = project_for(request.user, slug, CAN_ANNOTATE)
    # Another project's task (or one this reviewer never claimed) does not exist here: 404, like the task page.
    task = selectors.task_for(request.user, project, task_id)
    active = selectors.my_claims(request.user, project).filter(task=task, state=ReviewClaimState.ACTIVE).first()
    return _skip(request, project, active, services.TASKS)


@login_required
@require_POST
def skip_trajectory(request, slug: str, trajectory_id: int):
    project, _ = project_for(request.user, slug, CAN_ANNOTATE)
    trajectory = selectors.trajectory_for(request.user, project, trajectory_id)
    active = selectors.my_trajectory_claims(request.user, project).filter(
        trajectory=trajectory, state=ReviewClaimState.ACTIVE).first()
    return _skip(request, project, active, services.TRAJECTORIES)


def _skip(request, project, active, queue: str):
    if active is None:
        messages.error(request, gettext("You hold no claim on this task.") if queue == services.TASKS
                       else gettext("You hold no claim on this trajectory."))
        return redirect("labeler-overview", slug=project.slug)
    services.end_review_claim(claim=active, state=ReviewClaimState.SKIPPED)
    messages.info(request, with_data(gettext("Skipped %(item)s."),
                                     item=active.task if queue == services.TASKS else active.trajectory))
    return _next(request, project, queue)


def with_data(text: str, **values) -> str:
    """A translated message with names (instance ids, file names) in it: the text escaped, each value marked
    translate="no" (the messages list shows it as HTML)."""
    return mark_safe(escape(text) % {name: format_html('<span translate="no">{}</span>', value)
                                     for name, value in values.items()})


def _own_label(request, slug: str, label_id: int):
    label = selectors.label_for_writing(request.user, label_id)
    if label.item.project.slug != slug:
        raise Http404(gettext("No such label."))
    return label


def _editor_context(label, model_label, *, focus: str = "") -> dict:
    spec = label.taxonomy.definition
    model_values = model_label.values if model_label is not None else {}
    fields = []
    for name in spec.fields():
        multi = name in spec.multi_fields()
        current = label.values.get(name, [] if multi else None)
        fields.append({
            "name": name,
            "multi": multi,
            "description": _description(spec, name),
            "description_is_data": not (multi and name[:-3] in spec.axes),
            "options": _numbered(_options(spec, name, label.values), current),
            "needs_family": multi and not label.values.get(name[:-3] + "_l1"),
            "provenance": label.provenance.get(name, ""),
            "model_value": _shown(model_values.get(name)),
            "rationale": label.rationales.get(name) or (model_label.rationales.get(name, "") if model_label else ""),
        })
    return {"label": label, "fields": fields, "focus": focus,
            "edit_url": reverse("labeler-edit", args=[label.item.project.slug, label.pk]),
            "accept_url": reverse("labeler-accept", args=[label.item.project.slug, label.pk])}


def _description(spec, name: str) -> str:
    if name.endswith("_l2") and name[:-3] in spec.axes:
        return gettext("Tick every tag of the chosen family that applies.")
    if name.endswith("_l1") and name[:-3] in spec.axes:
        return spec.data["axes"][name[:-3]]["description"]
    return spec.data["dimensions"][name].get("description", "")


def _options(spec, name: str, values: dict) -> list[dict]:
    """[{slug, name, definition}] a field may take now; an L2 offers only the tags of the chosen L1, and
    "unspecified" (the interface's own option: `interface` marks it for translation, the rest is the taxonomy's)."""
    axis = name[:-3]
    if name.endswith("_l1") and axis in spec.axes:
        return spec.data["axes"][axis]["families"]
    if name.endswith("_l2") and axis in spec.axes:
        chosen = values.get(f"{axis}_l1")
        family = next((f for f in spec.data["axes"][axis]["families"] if f["slug"] == chosen), None)
        if family is None:
            return []
        return [*family["tags"], {"slug": UNSPECIFIED, "name": gettext("Unspecified"),
                                  "definition": gettext("None of the family's tags fits."), "interface": True}]
    return spec.data["dimensions"][name]["choices"]


def _numbered(options: list[dict], current) -> list[dict]:
    chosen = set(current) if isinstance(current, list) else {current}
    return [{**option, "n": n, "checked": option["slug"] in chosen, "detail_rows": _detail_rows(option)}
            for n, option in enumerate(options, start=1)]


def _detail_rows(option: dict) -> list[tuple[str, str]]:
    """The option's other documented fields (a published file's source, signals, boundary notes...)."""
    return [(key.replace("_", " "), "; ".join(value) if isinstance(value, list) else value)
            for key, value in (option.get("details") or {}).items()]


def _shown(value) -> str:
    if value is None:
        return ""
    return ", ".join(value) if isinstance(value, list) else str(value)


def _comparison(spec, labels) -> list[dict]:
    """Rows of field → each label's value, for the read-only side-by-side view of curators."""
    return [{"name": name, "cells": [{"value": _shown(label.values.get(name)),
                                      "rationale": label.rationales.get(name, "") if label.origin == LabelOrigin.MODEL else ""}
                                     for label in labels]}
            for name in spec.fields()]


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def diff_lines(text: str) -> list[tuple[str, str]]:
    """(kind, line) for each line of a unified diff: file, hunk, added, removed, context or meta.

    Hunk headers give how many old and new lines follow, so a removed line that starts with
    "--" is never mistaken for a file header. The text itself is escaped by the template."""
    rows = []
    old = new = 0
    for line in text.splitlines():
        match = _HUNK.match(line)
        if match:
            old, new = int(match.group(1) or 1), int(match.group(2) or 1)
            rows.append(("hunk", line))
        elif old > 0 or new > 0:
            if line.startswith("+"):
                kind, new = "added", new - 1
            elif line.startswith("-"):
                kind, old = "removed", old - 1
            elif line.startswith("\\"):
                kind = "meta"
            else:
                kind, old, new = "context", old - 1, new - 1
            rows.append((kind, line))
        elif line.startswith("\\"):
            rows.append(("meta", line))
        else:
            rows.append(("file", line))
    return rows
