"""Celery tasks of the export engine: they only call stored.py (building stored kinds' rows ahead of exports) and
orphans.py (the sweep of export files no export can serve)."""

import logging

from celery import shared_task

from dataplatform.accounts.models import Project
from dataplatform.errors import Transient

from . import orphans, stored

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def build_stored_rows(project_id: int) -> dict:
    """Derive a project's new stored rows (sent by stored.build_soon after a source settles)."""
    stored.build_started(project_id)
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return {}
    try:
        return stored.build_project(project)
    except Transient as exc:  # the model backend is down: the next sweep or export derives the rows instead
        logger.warning("Stored export rows of project %s not built now: %s", project_id, exc)
        return {}


@shared_task(ignore_result=True)
def sweep_stored_rows() -> dict:
    """Build what was missed and drop the rows no export can read (every worker's beat)."""
    try:
        return stored.sweep()
    except Transient as exc:
        logger.warning("Stored export rows not swept now: %s", exc)
        return {}


@shared_task(ignore_result=True)
def sweep_export_orphans() -> dict:
    """Remove export files no export can serve (every worker's beat; exports/orphans.py)."""
    return orphans.sweep_orphans()
