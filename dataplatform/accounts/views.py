"""HTML views for projects and personal API tokens. Thin: they call selectors and services."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dataplatform.audit.selectors import can_read_audit
from dataplatform.client_address import client_ip
from dataplatform.jobs.registry import get_kind
from dataplatform.jobs.selectors import jobs_of_project
from dataplatform.pagination import parse_id

from . import selectors, services
from .forms import ThrottledAuthenticationForm
from .permissions import ALL_ROLES, CAN_ANNOTATE, CAN_READ_EXPORTS, CAN_RUN_JOBS, CAN_SEE_JOBS, project_for

RECENT_JOBS = 20
# Lifetimes the token page offers, as GitHub and GitLab do: form value -> days (None: never expires).
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


@login_required
def project_list(request):
    return render(request, "accounts/project_list.html", {
        "projects": selectors.projects_for_user(request.user), "can_read_audit": can_read_audit(request.user),
    })


@login_required
def project_detail(request, slug: str):
    project, role = project_for(request.user, slug, ALL_ROLES)
    context = {
        "project": project, "role": role, "members": selectors.members_of(project),
        "can_read_exports": role in CAN_READ_EXPORTS,
        "can_annotate": role in CAN_ANNOTATE,
    }
    if role in CAN_SEE_JOBS:
        jobs = jobs_of_project(request.user, project)
        if before := parse_id(request.GET.get("before")):
            jobs = jobs.filter(pk__lt=before)
        page = list(jobs.order_by("-id")[: RECENT_JOBS + 1])
        context["jobs"] = page[:RECENT_JOBS]
        context["older_than"] = page[RECENT_JOBS - 1].pk if len(page) > RECENT_JOBS else None
    if role in CAN_RUN_JOBS:
        context["demo_kind"] = get_kind("demo.sample_continuations")
    return render(request, "accounts/project_detail.html", context)


@login_required
def token_list(request):
    """The user's own API tokens. A new secret is shown exactly once, right after creation."""
    new_secret = None
    if request.method == "POST":
        name = (request.POST.get("name") or "").strip()[:100]
        lifetime = request.POST.get("expires_in_days", DEFAULT_TOKEN_LIFETIME)
        if not name:
            messages.error(request, "Give the token a name, e.g. the machine or trainer it is for.")
        elif lifetime not in TOKEN_LIFETIMES:
            messages.error(request, "Choose when the token expires: in 30, 90 or 365 days, or never.")
        else:
            project_slugs = request.POST.getlist("projects")
            projects = list(selectors.projects_for_user(request.user).filter(slug__in=project_slugs))
            token, new_secret = services.issue_token(
                user=request.user, name=name, read_only=bool(request.POST.get("read_only")), projects=projects,
                expires_in_days=TOKEN_LIFETIMES[lifetime], client_ip=client_ip(request),
            )
            expiry = f"It expires on {token.expires_at:%Y-%m-%d}." if token.expires_at else "It never expires."
            messages.success(request, f"Token '{token.name}' created. {expiry} "
                                      "Copy it now: it will not be shown again.")
    response = render(request, "accounts/token_list.html", {
        "tokens": selectors.tokens_for_user(request.user),
        "projects": selectors.projects_for_user(request.user),
        "new_secret": new_secret,
        "lifetimes": [(value, f"In {days} days" if days else "Never") for value, days in TOKEN_LIFETIMES.items()],
        "default_lifetime": DEFAULT_TOKEN_LIFETIME,
    })
    response["Cache-Control"] = "no-store"  # the page may carry a secret
    return response


@login_required
@require_POST
def token_revoke(request, token_id: int):
    token = get_object_or_404(selectors.tokens_for_user(request.user), pk=token_id)
    services.revoke_token(token=token, actor=request.user, client_ip=client_ip(request))
    messages.success(request, f"Token '{token.name}' revoked.")
    return redirect("token-list")
