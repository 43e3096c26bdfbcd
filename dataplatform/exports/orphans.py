"""The periodic sweep of export files no export can serve (every worker's beat, settings EXPORTS_ORPHAN_SWEEP_SECONDS).

A failed run removes its files itself, and a retry removes what an earlier attempt left; but while the store is down
neither can, so a job that fails for good during an outage, or a delete whose file removal failed after its commit,
leaves files behind. The sweep removes, on each export storage, the folders `exports/<project>/<id>` that belong to
no export, or to a failed or cancelled export written to that storage. It leaves alone the files of a running,
queued or finished export, and those on a storage its export is not on (a move in progress; `manage.py move_exports`
removes a stopped move's leftovers).
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from dataplatform.jobs.models import JobState

from .models import Export
from .storage import as_store_error, delete_prefix, export_storage_aliases, storage_named

logger = logging.getLogger(__name__)
ROOT = "exports"
GIVEN_UP = (JobState.FAILED, JobState.CANCELLED)


def sweep_orphans() -> dict:
    """Remove the orphaned export folders on every export storage. Returns the folders removed by storage, and the
    storages that could not be swept now (down, or refusing the platform: logged, tried again at the next sweep)."""
    removed: dict[str, list[str]] = {}
    unreachable: list[str] = []
    for alias in export_storage_aliases():
        try:
            if swept := _sweep(alias):
                removed[alias] = swept
        except Exception as exc:
            if as_store_error(exc, alias) is None:
                raise
            logger.warning("Export storage %s not swept now: %s: %s", alias, type(exc).__name__, exc)
            unreachable.append(alias)
    if removed:
        logger.warning("Removed the files of exports that no longer need them: %s", removed)
    return {"removed": removed, "unreachable": unreachable}


def _sweep(alias: str) -> list[str]:
    storage = storage_named(alias)
    found = [f"{ROOT}/{project}/{folder}" for project in _folders(storage, ROOT)
             for folder in _folders(storage, f"{ROOT}/{project}") if folder.isdigit()]
    removed = []
    for location in found:
        # An emptied folder stays on the filesystem: it is only counted when it held files.
        if _is_orphan(location, alias) and delete_prefix(storage, location):
            removed.append(location)
    return removed


def _folders(storage, path: str) -> list[str]:
    try:
        return storage.listdir(path)[0]
    except FileNotFoundError:  # the filesystem storage before its first export
        return []


def _is_orphan(location: str, alias: str) -> bool:
    """Read just before the folder's removal, one export at a time: a retry started since the listing keeps it."""
    # A failed export is swept only a while after it failed: a person who retries it at once is not raced.
    grace = timedelta(seconds=settings.EXPORTS_ORPHAN_GRACE_SECONDS)
    export = Export.objects.filter(location=location).values("storage", "job__state", "job__finished_at").first()
    if export is None:
        return True  # deleted (its files' removal failed after the commit), or never recorded
    finished_at = export["job__finished_at"]
    return (export["storage"] == alias and export["job__state"] in GIVEN_UP
            and (finished_at is None or finished_at < timezone.now() - grace))
