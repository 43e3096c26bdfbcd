"""The project page's jobs, as jobs/project_jobs.html shows them: accounts' page includes the fragment and never
imports jobs (accounts stands below jobs, whose every row belongs to a project)."""

from django import template

from dataplatform.accounts.permissions import CAN_RUN_JOBS, CAN_SEE_JOBS
from dataplatform.pagination import parse_id

from ..registry import get_kind
from ..selectors import latest_jobs

register = template.Library()

DEMO_KIND = "demo.sample_continuations"  # the one job the project page offers to start


@register.simple_tag(takes_context=True)
def project_jobs(context, project, role) -> dict:
    """What the fragment shows to `role`: the demo job's kind to start (roles that run jobs) and the latest jobs
    with the cursor of older ones (roles that see jobs); `jobs` is None for a role that sees none."""
    found = {"demo_kind": get_kind(DEMO_KIND) if role in CAN_RUN_JOBS else None, "jobs": None, "older_than": None}
    if role in CAN_SEE_JOBS:
        before = parse_id(context.request.GET.get("before"))
        found["jobs"], found["older_than"] = latest_jobs(context.request.user, project, before=before)
    return found
