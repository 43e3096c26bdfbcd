"""Reads of exports, scoped to the requesting user (and their token's projects)."""

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_READ_EXPORTS, visible_projects

from .models import Export


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


def downloadable_names(export: Export) -> set[str]:
    """The only file names a client may fetch: those the manifest lists, the card, and the manifest."""
    if not export.manifest:
        return set()
    return {shard["name"] for shard in export.manifest["shards"]} | {"manifest.json", "README.md"}
