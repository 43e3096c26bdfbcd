"""Runs of the model server's capability check (dataplatform/inference/capabilities.py) from the system page and its
API. It makes a handful of model calls (a second or two), so it runs when someone asks, one run at a time, and its
last report is kept in the cache that every web process shares, for the page to show until the next run."""

from django.core.cache import cache
from django.utils.translation import gettext as _

from dataplatform.errors import Conflict
from dataplatform.inference import backend_for
from dataplatform.inference.capabilities import CapabilityReport, capability_report

from .selectors import REPORT_KEY

RUNNING_KEY = "system:capabilities:running"
# The most a run may take before another may start (a run whose process died leaves its mark this long at most).
RUN_SECONDS = 300


class CheckRunning(Conflict):
    """A check is running already: its report appears when it ends."""


def run_capability_check() -> CapabilityReport:
    """Check the platform's default backend now and keep the report (selectors.last_capability_report reads it).
    Outside any database transaction: the probes are model calls."""
    if not cache.add(RUNNING_KEY, True, timeout=RUN_SECONDS):
        raise CheckRunning(_("A check of the model server is running already; its report appears here when it ends."))
    try:
        report = capability_report(backend_for(None, model=""))
        cache.set(REPORT_KEY, report.as_json(), timeout=None)
    finally:
        cache.delete(RUNNING_KEY)
    return report
