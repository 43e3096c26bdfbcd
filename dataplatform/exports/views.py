"""HTML pages for exports: create one, watch it (htmx), download it, copy a load snippet."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_READ_EXPORTS, export_creators, project_for, require_export_creator
from dataplatform.client_address import client_ip
from dataplatform.errors import PlatformError, show_error
from dataplatform.jobs.models import JobState
from dataplatform.pagination import parse_id
from dataplatform.registry import UnknownKind

from . import selectors, services
from .cards import load_snippets
from .models import ExportFormat
from .registry import TRL_FORMATS, all_kinds, describe_filters, get_kind

PAGE_SIZE = 25
# A filter's type (registry._filter_type) as the form's help table names it.
FILTER_TYPES = {"boolean": gettext_lazy("boolean"), "integer": gettext_lazy("integer"), "number": gettext_lazy("number"),
                "datetime": gettext_lazy("date and time"), "choice": gettext_lazy("choice"), "list": gettext_lazy("list"),
                "string": gettext_lazy("text")}


def _described(kind) -> list[dict]:
    """describe_filters(kind), each type also named in the page's language (type_label, item_type_label)."""
    described = describe_filters(kind)
    for entry in described:
        for key in ("type", "item_type"):
            if key in entry:
                entry[f"{key}_label"] = FILTER_TYPES.get(entry[key], entry[key])
    return described


@login_required
def export_list(request, slug: str):
    """The project's exports, newest first, by kind, data version and state (the API's filters), and the form that
    creates one, for whoever may (else who may)."""
    project, role = project_for(request.user, slug, CAN_READ_EXPORTS)
    query = QueryDict(mutable=True)
    for name, values in request.GET.lists():  # the form's "any" is an empty value: no filter
        if kept := [value for value in values if value.strip()]:
            query.setlist(name, kept)
    listed = selectors.ExportFilter(query, queryset=selectors.exports_of_project(request.user, project))
    exports = listed.qs if listed.is_valid() else listed.queryset.none()
    if before := parse_id(request.GET.get("before")):
        exports = exports.filter(pk__lt=before)
    page = list(exports.order_by("-id")[: PAGE_SIZE + 1])
    older = query.copy()  # the next page keeps the filters
    older["before"] = page[PAGE_SIZE - 1].pk if len(page) > PAGE_SIZE else ""
    can_create = role in export_creators(project)
    return render(request, "exports/export_list.html", {
        "project": project,
        "exports": page[:PAGE_SIZE],
        "older_query": older.urlencode() if older["before"] else None,
        "can_create": can_create,
        "creators": [] if can_create else selectors.export_creator_names(project),
        "kinds": [(kind, _described(kind)) for kind in all_kinds()],
        "formats": ExportFormat.choices,
        "states": JobState.choices,
        "list_errors": [f"{name}: {' '.join(errors)}" for name, errors in listed.errors.items()],
        "filtered": {name: query.getlist(name) if name == "state" else query.get(name, "") for name in listed.filters},
    })


@login_required
@require_POST
def export_create(request, slug: str):
    project, role = project_for(request.user, slug, CAN_READ_EXPORTS)
    require_export_creator(role, project)
    try:  # the form's fields are ExportOptions, as the API's body is
        services.create_export(project=project, user=request.user, options=request.POST, client_ip=client_ip(request))
    except PlatformError as exc:
        show_error(request, exc)
    else:
        messages.success(request, gettext("Export queued."))
    return redirect("export-list", slug=slug)


@login_required
def export_row(request, slug: str, export_id: int):
    project, _ = project_for(request.user, slug, CAN_READ_EXPORTS)
    export = selectors.export_for(request.user, project, export_id)
    return render(request, "exports/_export_row.html", {"project": project, "export": export})


@login_required
def export_detail(request, slug: str, export_id: int):
    project, _ = project_for(request.user, slug, CAN_READ_EXPORTS)
    export = selectors.export_for(request.user, project, export_id)
    export_url = request.build_absolute_uri(reverse("api-export", args=[slug, export.pk]))
    script_url = request.build_absolute_uri(reverse("api-export-pull-script"))
    return render(request, "exports/export_detail.html", {
        "project": project, "export": export, "snippets": load_snippets(export, export_url, script_url),
        "trl": _trl_format(export.kind),
    })


def _trl_format(kind_name: str):
    """The TRL format of an export's kind, if it still exists and has one."""
    try:
        trl_format = get_kind(kind_name).trl_format
    except UnknownKind:  # an export of a kind this version no longer has
        return None
    return TRL_FORMATS.get(trl_format) if trl_format else None
