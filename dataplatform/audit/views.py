"""The audit log page: the same rows and filters as the API, for superusers and project admins."""

from datetime import UTC, datetime, time
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from dataplatform.accounts.models import Role
from dataplatform.accounts.permissions import visible_projects
from dataplatform.pagination import parse_id

from . import selectors
from .models import Action

PAGE_SIZE = 50


@login_required
def audit_log(request):
    events = selectors.events_for_user(request.user)  # PermissionDenied (403) for non-admins
    params = {key: (request.GET.get(key) or "").strip() for key in ("action", "actor", "project", "since")}
    since = _parse_since(params["since"])
    events = selectors.filter_events(
        events, request.user, action=params["action"] if params["action"] in Action.values else "",
        actor=params["actor"], project=params["project"], since=since,
        before_id=parse_id(request.GET.get("before")),
    )
    page = list(events.order_by("-id")[: PAGE_SIZE + 1])
    query = urlencode({key: value for key, value in params.items() if value})
    return render(request, "audit/audit_log.html", {
        "events": page[:PAGE_SIZE],
        "older_than": page[PAGE_SIZE - 1].pk if len(page) > PAGE_SIZE else None,
        "params": params,
        "query": query,
        "actions": Action.choices,
        "projects": visible_projects(request.user, roles=[Role.ADMIN]).order_by("name"),
    })


def _parse_since(text: str) -> datetime | None:
    """A date (midnight UTC) or a datetime (UTC if it names no zone); anything else is ignored."""
    try:
        moment = parse_datetime(text)
        if moment is None and (day := parse_date(text)):
            moment = datetime.combine(day, time.min, tzinfo=UTC)
    except ValueError:
        return None
    if moment is not None and timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    return moment
