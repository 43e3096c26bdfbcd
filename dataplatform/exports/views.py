"""HTML pages for exports: create one, watch it (htmx), download it, copy a load snippet."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from dataplatform.accounts.permissions import CAN_CREATE_EXPORTS, CAN_READ_EXPORTS, project_for
from dataplatform.client_address import client_ip
from dataplatform.errors import PlatformError, show_error
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
    project, role = project_for(request.user, slug, CAN_READ_EXPORTS)
    exports = selectors.exports_of_project(request.user, project)
    if before := parse_id(request.GET.get("before")):
        exports = exports.filter(pk__lt=before)
    page = list(exports.order_by("-id")[: PAGE_SIZE + 1])
    return render(request, "exports/export_list.html", {
        "project": project,
        "exports": page[:PAGE_SIZE],
        "older_than": page[PAGE_SIZE - 1].pk if len(page) > PAGE_SIZE else None,
        "can_create": role in CAN_CREATE_EXPORTS,
        "kinds": [(kind, _described(kind)) for kind in all_kinds()],
        "formats": ExportFormat.choices,
    })


@login_required
@require_POST
def export_create(request, slug: str):
    project, _ = project_for(request.user, slug, CAN_CREATE_EXPORTS)
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
