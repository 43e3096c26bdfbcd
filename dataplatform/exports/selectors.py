"""Reads of exports, scoped to the requesting user (and their token's projects)."""

import django_filters
from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext, gettext_lazy

from dataplatform.accounts.models import ApiToken, Membership, Project
from dataplatform.accounts.permissions import CAN_CREATE_EXPORTS, CAN_READ_EXPORTS, visible_projects
from dataplatform.jobs.models import JobState

from .models import Export


class ExportFilter(django_filters.FilterSet):
    """The exports list's filters, the API's query and the page's alike: ?kind=, ?data_version=, ?state= (repeat
    it for several states)."""

    kind = django_filters.CharFilter(help_text=gettext_lazy("a record kind, e.g. onpanda.sft"))
    data_version = django_filters.CharFilter(help_text=gettext_lazy("the data version the export read"))
    state = django_filters.MultipleChoiceFilter(field_name="job__state", choices=JobState.choices)

    class Meta:
        model = Export
        fields = ["kind", "data_version", "state"]


def exports_visible_to(user, *, token: ApiToken | None = None) -> QuerySet[Export]:
    projects = visible_projects(user, roles=CAN_READ_EXPORTS, token=token)
    return Export.objects.filter(project__in=projects).select_related("project", "job", "created_by")


def exports_of_project(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[Export]:
    return exports_visible_to(user, token=token).filter(project=project)


def export_for(user, project: Project, export_id: int, *, token: ApiToken | None = None) -> Export:
    export = exports_of_project(user, project, token=token).filter(pk=export_id).first()
    if export is None:
        raise Http404(gettext("No such export."))
    return export


def export_creator_names(project: Project) -> list[str]:
    """Usernames of the project's members who create its exports whatever its settings (admins, curators)."""
    return list(Membership.objects.filter(project=project, role__in=list(CAN_CREATE_EXPORTS))
                .order_by("role", "user__username").values_list("user__username", flat=True))


def downloadable_names(export: Export) -> set[str]:
    """The only file names a client may fetch: those the manifest lists, the card, and the manifest."""
    if not export.manifest:
        return set()
    return {shard["name"] for shard in export.manifest["shards"]} | {"manifest.json", "README.md"}
