"""Reads for accounts, always scoped to the requesting user."""

from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import Http404
from django.shortcuts import get_object_or_404

from dataplatform.imports.parsers import UNSTORABLE

from .models import ApiToken, Membership, Project
from .permissions import visible_projects


def projects_for_user(user, *, token: ApiToken | None = None) -> QuerySet[Project]:
    """The user's projects, each annotated with `my_role` and `member_count`."""
    my_role = Membership.objects.filter(project=OuterRef("pk"), user=user).values("role")[:1]
    return (
        visible_projects(user, token=token)
        .annotate(my_role=Subquery(my_role), member_count=Count("memberships", distinct=True))
        .order_by("name")
    )


def tokens_for_user(user) -> QuerySet[ApiToken]:
    """A user's own tokens. Nobody lists another person's tokens."""
    return ApiToken.objects.filter(user=user).prefetch_related("projects").order_by("-created_at")


def members_of(project: Project) -> QuerySet[Membership]:
    return Membership.objects.filter(project=project).select_related("user").order_by("role", "user__username")


def member_of(project: Project, username: str) -> Membership:
    """One member of `project` (whose access the caller has checked), by username; a 404 if not a member."""
    if UNSTORABLE.search(username):  # no username holds one, and PostgreSQL refuses NUL in a query
        raise Http404
    return get_object_or_404(members_of(project), user__username=username)
