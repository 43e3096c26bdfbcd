"""HTML views for projects, their members and personal API tokens. Thin: they call selectors and services."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from dataplatform import inputs
from dataplatform.audit.selectors import can_read_audit
from dataplatform.client_address import client_ip
from dataplatform.errors import PlatformError, show_error

from . import selectors, services
from .forms import ThrottledAuthenticationForm
from .inputs import (
    MemberCreateSerializer,
    MemberUpdateSerializer,
    ProjectCreateSerializer,
    ProjectLicenseSerializer,
    ProjectSettingsSerializer,
    TokenCreateSerializer,
)
from .models import ROLE_IN_TEXT, Role
from .permissions import (
    ALL_ROLES,
    CAN_ANNOTATE,
    CAN_CURATE,
    CAN_MANAGE_PROJECT,
    CAN_READ_EXPORTS,
    CAN_SEE_JOBS,
    project_for,
)

# Lifetimes the token page offers, as GitHub and GitLab do: form value -> days (None: never expires). The API
# takes any number of days in range (inputs.TokenCreateSerializer reads both).
TOKEN_LIFETIMES = {"30": 30, "90": 90, "365": 365, "never": None}
DEFAULT_TOKEN_LIFETIME = "90"


class LoginView(auth_views.LoginView):
    """Django's log-in view with brute-force protection: a locked-out client gets 429 and Retry-After."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.retry_after:
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after)
        return response


# The first real action of each workflow, linked from the home page: (label, page, roles that may take it).
FIRST_ACTIONS = (
    (gettext_lazy("Correct your first response"), "annotate-queue", CAN_ANNOTATE),
    (gettext_lazy("Review a label"), "labeler-overview", CAN_ANNOTATE),
    (gettext_lazy("Curate a failure"), "aed-overview", CAN_CURATE),
    (gettext_lazy("Filter near-ties"), "atd-overview", CAN_CURATE),
    (gettext_lazy("Pull an export"), "export-list", CAN_READ_EXPORTS),
)


def _role_label(role: str) -> str:
    """A role's name in the page's language (the value itself when it is not a role)."""
    return Role(role).label if role in Role.values else role


def _role_in_text(role: str) -> str:
    """A role's name inside a sentence, in the page's language."""
    return ROLE_IN_TEXT[Role(role)] if role in Role.values else role


def _acting_role(project, user) -> str | None:
    return project.my_role or (Role.ADMIN if user.is_superuser else None)  # a superuser is every project's admin


def _first_actions(project, user) -> list[tuple[str, str]]:
    role = _acting_role(project, user)
    return [(label, reverse(page, args=[project.slug])) for label, page, roles in FIRST_ACTIONS if role in roles]


@login_required
def project_list(request, *, status: int = 200, create: dict | None = None):
    """The home page: what each workflow does, the user's projects with the first action of each workflow their
    role allows, and for a superuser the new-project form (`create`: a refused form's error and values)."""
    projects = list(selectors.projects_for_user(request.user))
    for project in projects:
        project.first_actions = _first_actions(project, request.user)
        project.role_label = _role_label(project.my_role)
        # The demo's progress (a fragment of dataplatform/demo) is its seed job's page and progress bar, which only
        # those who see jobs may open: shown to an annotator or a trainer, its link and every poll of the bar were
        # 404s (console errors).
        project.sees_jobs = _acting_role(project, request.user) in CAN_SEE_JOBS
    return render(request, "accounts/project_list.html", {
        "projects": projects, "can_read_audit": can_read_audit(request.user),
        "can_create_projects": request.user.is_superuser, "suggested_licenses": SUGGESTED_LICENSES,
        "create": create or {},
    }, status=status)


@login_required
@require_POST
def project_create(request):
    """A site admin (superuser) makes a project and becomes its first admin."""
    if not request.user.is_superuser:
        raise PermissionDenied(_("Only site admins (superusers) can create projects."))
    try:
        project = services.create_project(**inputs.read(ProjectCreateSerializer, request.POST), admin=request.user,
                                          actor=request.user, client_ip=client_ip(request))
    except PlatformError as error:  # the form again, with what was typed
        return project_list(request, status=error.status,
                            create={**request.POST.dict(), "error": inputs.refusal_text(error)})
    messages.success(request, _("Created %(project)s. Add its members below.") % {"project": project.name})
    return redirect("project-detail", slug=project.slug)


# License ids the project page suggests (the Hugging Face Hub's; any other id may be typed).
SUGGESTED_LICENSES = ["apache-2.0", "mit", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc0-1.0", "odc-by",
                      "openrail", "other"]


@login_required
def project_detail(request, slug: str):
    project, role = project_for(request.user, slug, ALL_ROLES)
    return _project_page(request, project, role)


def _project_page(request, project, role, *, status: int = 200, **form_state):
    """The project page. A refused members or license form is shown again, its error beside it, with
    `form_state`: add_error, member_error/error_member or license_error, and `typed`, the form's fields.
    Its jobs are a fragment of the jobs package (jobs/project_jobs.html), which reads them itself."""
    context = {
        "project": project, "role": role, "members": selectors.members_of(project),
        "can_read_exports": role in CAN_READ_EXPORTS,
        "can_annotate": role in CAN_ANNOTATE,
        "can_manage": role in CAN_MANAGE_PROJECT,
        "roles": Role.choices, "role_label": _role_label(role), "suggested_licenses": SUGGESTED_LICENSES,
        "license_value": project.license, **form_state,
    }
    return render(request, "accounts/project_detail.html", context, status=status)


@login_required
@require_POST
def member_add(request, slug: str):
    project, role = project_for(request.user, slug, CAN_MANAGE_PROJECT)
    try:
        member = inputs.read(MemberCreateSerializer, request.POST)
        services.add_member(project=project, **member, actor=request.user, client_ip=client_ip(request))
    except PlatformError as error:  # the form again, with what was typed
        return _project_page(request, project, role, status=error.status, add_error=inputs.refusal_text(error),
                             typed=request.POST)
    messages.success(request, _("Added %(username)s as %(role)s.") % {"username": member["username"],
                                                                      "role": _role_in_text(member["role"])})
    return redirect("project-detail", slug=slug)


@login_required
@require_POST
def member_role(request, slug: str, username: str):
    project, role = project_for(request.user, slug, CAN_MANAGE_PROJECT)
    member = selectors.member_of(project, username)
    try:
        new_role = inputs.read(MemberUpdateSerializer, request.POST)["role"]
        services.change_member_role(project=project, user=member.user, role=new_role, actor=request.user,
                                    client_ip=client_ip(request))
    except PlatformError as error:
        return _project_page(request, project, role, status=error.status, member_error=inputs.refusal_text(error),
                             error_member=username)
    messages.success(request, _("%(username)s is now %(role)s.") % {"username": username, "role": _role_in_text(new_role)})
    return redirect("project-detail", slug=slug)


@login_required
@require_POST
def member_remove(request, slug: str, username: str):
    project, role = project_for(request.user, slug, CAN_MANAGE_PROJECT)
    member = selectors.member_of(project, username)
    try:
        services.remove_member(project=project, user=member.user, actor=request.user, client_ip=client_ip(request))
    except PlatformError as error:
        return _project_page(request, project, role, status=error.status, member_error=inputs.refusal_text(error),
                             error_member=username)
    messages.success(request, _("Removed %(username)s from %(project)s.") % {"username": username, "project": project.name})
    if member.user == request.user and not request.user.is_superuser:
        return redirect("project-list")  # no longer a member: the project page would be a 404
    return redirect("project-detail", slug=slug)


@login_required
@require_POST
def project_license(request, slug: str):
    project, role = project_for(request.user, slug, CAN_MANAGE_PROJECT)
    try:
        services.set_project_license(project=project, **inputs.read(ProjectLicenseSerializer, request.POST),
                                     actor=request.user, client_ip=client_ip(request))
    except PlatformError as error:  # the form again, with what was typed
        return _project_page(request, project, role, status=error.status,
                             license_error=inputs.refusal_text(error), typed=request.POST)
    messages.success(request, _("License set to %(license)s.") % {"license": project.license} if project.license
                     else _("License cleared."))
    return redirect("project-detail", slug=slug)


@login_required
@require_POST
def project_settings(request, slug: str):
    project, role = project_for(request.user, slug, CAN_MANAGE_PROJECT)
    try:
        services.update_project_settings(project=project, changes=inputs.read(ProjectSettingsSerializer, request.POST),
                                         actor=request.user, client_ip=client_ip(request))
    except PlatformError as error:  # the form again, its error beside it
        return _project_page(request, project, role, status=error.status, settings_error=inputs.refusal_text(error))
    messages.success(request, _("Trainers of this project can now create exports.") if project.trainers_create_exports
                     else _("Only curators and admins of this project create exports now."))
    return redirect("project-detail", slug=slug)


@login_required
def token_list(request):
    """The user's own API tokens. A new secret is shown exactly once, right after creation."""
    new_secret, status = None, 200
    if request.method == "POST":
        try:
            token, new_secret = services.issue_token(
                user=request.user, client_ip=client_ip(request),
                **inputs.read(TokenCreateSerializer, request.POST, user=request.user))
        except PlatformError as error:
            show_error(request, error)
            status = error.status
        else:
            expiry = (_("It expires on %(date)s.") % {"date": f"{token.expires_at:%Y-%m-%d}"} if token.expires_at
                      else _("It never expires."))
            messages.success(request, _("Token '%(name)s' created. %(expiry)s Copy it now: it will not be shown again.")
                             % {"name": token.name, "expiry": expiry})
    response = render(request, "accounts/token_list.html", {
        "tokens": selectors.tokens_for_user(request.user),
        "projects": selectors.projects_for_user(request.user),
        "new_secret": new_secret,
        "lifetimes": [(value, ngettext("In %(days)d day", "In %(days)d days", days) % {"days": days} if days
                       else _("Never")) for value, days in TOKEN_LIFETIMES.items()],
        "default_lifetime": DEFAULT_TOKEN_LIFETIME,
    }, status=status)
    response["Cache-Control"] = "no-store"  # the page may carry a secret
    return response


@login_required
@require_POST
def token_revoke(request, token_id: int):
    token = get_object_or_404(selectors.tokens_for_user(request.user), pk=token_id)
    services.revoke_token(token=token, actor=request.user, client_ip=client_ip(request))
    messages.success(request, _("Token '%(name)s' revoked.") % {"name": token.name})
    return redirect("token-list")
