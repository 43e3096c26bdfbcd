"""Role helpers that every selector, view and API view goes through.

The rule: a user sees a project only through a Membership (superusers see all,
as admin). An API token can narrow that further to some projects and to
read-only methods. Another project's objects are a 404, never a 403, so that
their existence does not leak.
"""

from collections.abc import Iterable

from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404
from django.utils.translation import gettext, gettext_lazy
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from .models import ROLE_IN_TEXT, ApiToken, Membership, Project, Role

ALL_ROLES = frozenset(Role)
# Who may do what. Workflows add their own sets next to these.
CAN_MANAGE_PROJECT = frozenset({Role.ADMIN})
CAN_RUN_JOBS = frozenset({Role.ADMIN, Role.CURATOR})
CAN_SEE_JOBS = frozenset({Role.ADMIN, Role.CURATOR})
CAN_READ_EXPORTS = frozenset({Role.ADMIN, Role.CURATOR, Role.TRAINER})
CAN_CREATE_EXPORTS = frozenset({Role.ADMIN, Role.CURATOR})  # and trainers where the project lets them (export_creators)
CAN_DELETE_EXPORTS = frozenset({Role.ADMIN})
# onPanda annotation
CAN_ANNOTATE = frozenset({Role.ADMIN, Role.CURATOR, Role.ANNOTATOR})
CAN_CURATE = frozenset({Role.ADMIN, Role.CURATOR})  # import, rollouts, queue state, reassign, review, metrics


def role_in(user, project: Project) -> Role | None:
    """The user's role in the project, or None if they are not a member."""
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return Role.ADMIN
    role = Membership.objects.filter(user=user, project=project).values_list("role", flat=True).first()
    return Role(role) if role else None


def visible_projects(user, *, roles: Iterable[Role] | None = None, token: ApiToken | None = None) -> QuerySet[Project]:
    """Projects the user may see (optionally only those where they hold one of `roles`)."""
    if not user.is_authenticated or not user.is_active:
        return Project.objects.none()
    projects = Project.objects.all()
    if not user.is_superuser:
        memberships = Membership.objects.filter(user=user)
        if roles is not None:
            memberships = memberships.filter(role__in=list(roles))
        projects = projects.filter(pk__in=memberships.values("project_id"))
    if isinstance(token, ApiToken) and (scoped := token_project_ids(token)):
        projects = projects.filter(pk__in=scoped)
    return projects


def token_project_ids(token: ApiToken) -> list[int]:
    """The projects a token is limited to (empty: not limited). Read once per token object (per request).

    A token from API authentication knows whether it is limited at all (`is_scoped`, read with it):
    an unlimited one, the common case, costs no query here."""
    if not hasattr(token, "_scoped_project_ids"):
        scoped = getattr(token, "is_scoped", True)
        token._scoped_project_ids = list(token.projects.values_list("pk", flat=True)) if scoped else []
    return token._scoped_project_ids


def require_role(user, project: Project, roles: Iterable[Role], *, token: ApiToken | None = None) -> Role:
    """Return the user's role if it is one of `roles`.

    Not a member (or outside the token's scope): Http404. A member with another role: PermissionDenied.
    """
    if not visible_projects(user, token=token).filter(pk=project.pk).exists():
        raise Http404(gettext("No such project."))
    return _role_among(user, project, roles)


def project_for(user, slug: str, roles: Iterable[Role], *, token: ApiToken | None = None,
                related: Iterable[str] = ()) -> tuple[Project, Role]:
    """Look up a project by slug for a user who must hold one of `roles` there.

    One query for the project and the user's role in it: this is on the path of nearly every API call.
    `related` one-to-one relations of the project (e.g. its settings) are joined into that query."""
    member_role = Membership.objects.filter(user_id=user.pk, project=OuterRef("pk")).values("role")[:1]
    project = (visible_projects(user, token=token).filter(slug=slug).select_related(*related)
               .annotate(member_role=Subquery(member_role)).first())
    if project is None:
        raise Http404(gettext("No such project."))
    role = Role.ADMIN if user.is_superuser else Role(project.member_role)  # visible, so a member
    return project, _allowed(role, project, roles)


def _role_among(user, project: Project, roles: Iterable[Role]) -> Role:
    return _allowed(role_in(user, project), project, roles)


def _allowed(role: Role | None, project: Project, roles: Iterable[Role]) -> Role:
    if role not in set(roles):
        raise PermissionDenied(gettext("Your role (%(role)s) cannot do this in project %(project)s.")
                               % {"role": ROLE_IN_TEXT[Role(role)] if role in Role.values else gettext("none"),
                                  "project": project.slug})
    return role


def export_creators(project: Project) -> frozenset[Role]:
    """Who may create the project's exports: CAN_CREATE_EXPORTS, and its trainers where the project lets them."""
    return CAN_CREATE_EXPORTS | ({Role.TRAINER} if project.trainers_create_exports else frozenset())


def require_export_creator(role: Role | None, project: Project) -> Role:
    """`role` if it may create the project's exports, else PermissionDenied saying who may."""
    if role not in export_creators(project):
        raise PermissionDenied(gettext("Your role (%(role)s) cannot create exports in project %(project)s: its admins "
                                       "and curators can, and its trainers once an admin lets them.")
                               % {"role": ROLE_IN_TEXT[Role(role)] if role in Role.values else gettext("none"),
                                  "project": project.slug})
    return role


def request_token(request) -> ApiToken | None:
    """The API token a request was authenticated with, if any."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


class IsAuthenticatedWithTokenScope(BasePermission):
    """Authenticated, and a read-only token may only use safe methods."""

    message = gettext_lazy("This API token is read-only.")

    def has_permission(self, request: Request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        token = request_token(request)
        return not (token and token.read_only and request.method not in SAFE_METHODS)
