"""Celery tasks of the export engine: they only call stored.py (building stored kinds' rows ahead of exports)."""

from celery import shared_task

from dataplatform.accounts.models import Project

from . import stored


@shared_task(ignore_result=True)
def build_stored_rows(project_id: int) -> dict:
    """Derive a project's new stored rows (sent by stored.build_soon after a source settles)."""
    stored.build_started(project_id)
    project = Project.objects.filter(pk=project_id).first()
    return stored.build_project(project) if project is not None else {}


@shared_task(ignore_result=True)
def sweep_stored_rows() -> dict:
    """Build what was missed and drop the rows no export can read (every worker's beat)."""
    return stored.sweep()
