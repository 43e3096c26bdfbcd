"""The role matrix (tests/test_role_matrix.py runs it, tests/test_translations.py opens its pages): every URL
pattern × every method its view allows × every role × own/other project.

The cases are generated from the URL configuration (django.urls.get_resolver(), through every
include), so a new URL cannot go unchecked: it needs an entry in RULES below, or
test_rules_cover_every_url fails and says so. RULES names, per URL name and method, who may use it;
the expected status of each call is derived from it with the platform's rules:

- allowed: anything but 401, 403, 404, 405 or a 5xx (a 400 for a missing field is fine: the bodies
  are empty, the point is the access decision); for pages, not a redirect to the log-in page either;
- a member whose role may not: 403;
- a member for whom the object does not exist (e.g. someone else's session): 404;
- not a member, or another project's object: 404, never 403;
- no credentials: 401 on the API, a redirect to the log-in page for pages.

Each URL is called with alpha's objects ("own": the roles are members of alpha), with beta's
("other": none of them is a member of beta; a superuser sees beta as its admin) and, where a URL
names a project and an object, with alpha's slug and beta's object ("cross": a 404 for every role
that may act in alpha, the superuser too, since the object is not in the project the URL names; a
role refused in alpha gets its 403, or a 404 where the view looks the object up first).

Every request runs in a savepoint that is rolled back, so each call sees the same world.
"""

import re
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.parsers import JSONParser

from dataplatform.accounts.permissions import (
    ALL_ROLES,
    CAN_ANNOTATE,
    CAN_CREATE_EXPORTS,
    CAN_CURATE,
    CAN_DELETE_EXPORTS,
    CAN_MANAGE_PROJECT,
    CAN_READ_EXPORTS,
    CAN_RUN_JOBS,
    CAN_SEE_JOBS,
)

from .backend_guard import tests_own_transaction
from .role_matrix_world import MEMBER_ROLES, world_for_a_module

# --- what is left out, and why ----------------------------------------------------------------------

EXCLUDED = {
    "schema": "the OpenAPI document describes the API; it holds no project data",
    "swagger-ui": "the API docs page renders the schema; it holds no project data",
}
# The Django admin site is Django's own (staff only, checked by Django); only its index is checked
# here, that nobody but a superuser gets in. Its other URLs (model pages, login, jsi18n...) are left out.
ADMIN_NAMESPACE = "admin"
ADMIN_CHECKED = "admin:index"


# --- the rules ----------------------------------------------------------------------------------------

def _names(roles) -> frozenset[str]:
    return frozenset(str(role.value) if hasattr(role, "value") else str(role) for role in roles)


@dataclass(frozen=True)
class ProjectRule:
    """A URL inside a project. `allowed` roles get through; `hidden` roles are members for whom the
    object does not exist (404, not 403); other members get 403; non-members 404. `scope` is "own"
    (alpha's slug and objects), "other" (beta's) or "cross" (alpha's slug, beta's object)."""

    text: str
    allowed: frozenset[str]
    hidden: frozenset[str] = frozenset()

    def expect(self, role: str, scope: str):
        if scope == "other" and role != "superuser":
            return 404
        role = "admin" if role == "superuser" else role  # a superuser is every project's admin
        if role in self.allowed:
            # "cross": alpha's URL with beta's object. Whoever may act in alpha must not reach it.
            return 404 if scope == "cross" else ALLOWED
        if role in self.hidden or role == "outsider":
            return 404
        if scope == "cross":
            # A role refused in the project the URL names may be refused before the object is looked
            # up (403, the role alone decides) or after (404): neither tells anything about beta's object.
            return (403, 404)
        return 403


@dataclass(frozen=True)
class UserRule:
    """A URL outside any project. `allowed` roles (outsider and superuser included by name) get
    through; the others get `denied`."""

    text: str
    allowed: frozenset[str]
    denied: int = 403

    def expect(self, role: str, scope: str):
        return ALLOWED if role in self.allowed else self.denied


@dataclass(frozen=True)
class SelfRule:
    """The caller's own object (their API token): theirs is allowed, anyone else's is a 404."""

    text: str = "own object only (the caller's API token)"

    def expect(self, role: str, scope: str):
        return ALLOWED if scope == "own" else 404


ALLOWED = "allowed"
LOGIN = "redirect to log-in"
EVERYONE = frozenset([*MEMBER_ROLES, "outsider", "superuser"])


def members(permission, text: str) -> ProjectRule:
    return ProjectRule(text, _names(permission))


def visible_to(permission, text: str) -> ProjectRule:
    """An object that only `permission` roles can see: the project's other members get a 404."""
    allowed = _names(permission)
    return ProjectRule(text, allowed, _names(ALL_ROLES) - allowed)


def seen_by_then(visible, permission, text: str) -> ProjectRule:
    """The object is found for `visible` roles (404 for the rest), then the action needs `permission` (403)."""
    return ProjectRule(text, _names(permission), _names(ALL_ROLES) - _names(visible))


def owner_only(owner: str, gate, text: str) -> ProjectRule:
    """Only the object's owner (a role in alpha; beta's objects belong to beta's people). Members in
    `gate` who are not the owner get a 404 (not theirs); members outside `gate` are refused first (403)."""
    return ProjectRule(text, frozenset({owner}), _names(gate) - {owner})


ANY_MEMBER = members(ALL_ROLES, "any member")
AUTHENTICATED = UserRule("anyone logged in", EVERYONE)
PUBLIC = UserRule("anyone, also without logging in", EVERYONE | {"anonymous"})
ANNOTATOR_SESSION = owner_only("annotator", ALL_ROLES, "own object only (the annotator's own session)")
ANNOTATOR_LABEL = owner_only("annotator", ALL_ROLES, "own object only (the reviewer's own label)")
CURATOR_CASE = owner_only("curator", CAN_CURATE, "CAN_CURATE, and own object only (the curator's own case)")
SESSION_REVIEW = seen_by_then(CAN_ANNOTATE, CAN_CURATE,
                              "CAN_CURATE on a session the caller can see (annotator: own session, 403)")
AUDIT_READERS = UserRule("project admins and superusers", frozenset({"admin", "superuser"}))

CURATE = members(CAN_CURATE, "CAN_CURATE")
ANNOTATE = members(CAN_ANNOTATE, "CAN_ANNOTATE")
READ_EXPORTS = members(CAN_READ_EXPORTS, "CAN_READ_EXPORTS")
# The world's projects keep trainers_create_exports off (trainers allowed: tests/exports/test_trainer_exports.py).
CREATE_EXPORTS = members(CAN_CREATE_EXPORTS, "export_creators: CAN_CREATE_EXPORTS, trainers only where the project "
                                             "lets them")
MANAGE = members(CAN_MANAGE_PROJECT, "CAN_MANAGE_PROJECT (project admins)")

# URL name -> method -> rule (or, for a URL whose `action` kwarg picks the operation, action -> rule).
RULES = {
    # accounts, tokens, system, audit
    "project-list": {"GET": AUTHENTICATED, "POST": AUTHENTICATED},
    "project-create": {"POST": UserRule("site admins (superusers)", frozenset({"superuser"}))},
    "login": {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC},
    "logout": {"POST": PUBLIC},
    "set-language": {"GET": PUBLIC, "POST": PUBLIC},
    "javascript-catalog": {"GET": PUBLIC},
    "project-detail": {"GET": ANY_MEMBER, "POST": ANY_MEMBER},
    "token-list": {"GET": AUTHENTICATED, "POST": AUTHENTICATED},
    "token-revoke": {"POST": SelfRule()},
    "system": {"GET": AUTHENTICATED, "POST": AUTHENTICATED},
    "system-capabilities": {"POST": AUTHENTICATED},
    "audit-log": {"GET": AUDIT_READERS, "POST": AUDIT_READERS},
    "api-projects": {"GET": AUTHENTICATED},
    "api-tokens": {"GET": AUTHENTICATED, "POST": AUTHENTICATED},
    "api-token-revoke": {"POST": SelfRule()},
    "api-system-status": {"GET": AUTHENTICATED},
    "api-system-capabilities": {"GET": AUTHENTICATED, "POST": AUTHENTICATED},
    "api-audit": {"GET": AUDIT_READERS},
    # a project's members and license (admins); <username> is a member of the project whose objects are used
    "project-member-add": {"POST": MANAGE},
    "project-member-role": {"POST": MANAGE},
    "project-member-remove": {"POST": MANAGE},
    "project-license": {"POST": MANAGE},
    "project-settings": {"POST": MANAGE},
    "api-project-settings": {"GET": ANY_MEMBER, "PATCH": MANAGE},
    "api-project-members": {"GET": MANAGE, "POST": MANAGE},
    "api-project-member": {"PATCH": MANAGE, "DELETE": MANAGE},
    ADMIN_CHECKED: {"GET": "admin site", "POST": "admin site"},
    # jobs
    "job-create": {"POST": members(CAN_RUN_JOBS, "CAN_RUN_JOBS")},
    "job-detail": {m: visible_to(CAN_SEE_JOBS, "CAN_SEE_JOBS (a job is hidden from others)") for m in ("GET", "POST")},
    "job-progress": {m: visible_to(CAN_SEE_JOBS, "CAN_SEE_JOBS (a job is hidden from others)") for m in ("GET", "POST")},
    "job-cancel": {"POST": visible_to(CAN_RUN_JOBS, "CAN_RUN_JOBS (a job is hidden from others)")},
    "job-retry": {"POST": visible_to(CAN_RUN_JOBS, "CAN_RUN_JOBS (a job is hidden from others)")},
    "api-project-jobs": {"GET": members(CAN_SEE_JOBS, "CAN_SEE_JOBS"), "POST": members(CAN_RUN_JOBS, "CAN_RUN_JOBS")},
    "api-job-detail": {"GET": visible_to(CAN_SEE_JOBS, "CAN_SEE_JOBS (a job is hidden from others)")},
    "api-job-cancel": {"POST": visible_to(CAN_RUN_JOBS, "CAN_RUN_JOBS (a job is hidden from others)")},
    "api-job-retry": {"POST": visible_to(CAN_RUN_JOBS, "CAN_RUN_JOBS (a job is hidden from others)")},
    # exports
    "export-list": {"GET": READ_EXPORTS, "POST": READ_EXPORTS},
    "export-create": {"POST": CREATE_EXPORTS},
    "export-detail": {"GET": READ_EXPORTS, "POST": READ_EXPORTS},
    "export-row": {"GET": READ_EXPORTS, "POST": READ_EXPORTS},
    "api-project-exports": {"GET": READ_EXPORTS, "POST": CREATE_EXPORTS},
    "api-export": {"GET": READ_EXPORTS, "DELETE": members(CAN_DELETE_EXPORTS, "CAN_DELETE_EXPORTS")},
    "api-export-manifest": {"GET": READ_EXPORTS},
    "api-export-shard": {"GET": READ_EXPORTS},
    "api-export-kinds": {"GET": AUTHENTICATED},
    "api-export-pull-script": {"GET": PUBLIC},  # the stand-alone pull script: the repo's code, no data
    # onPanda
    "annotate-queue": {"GET": ANNOTATE, "POST": ANNOTATE},
    "annotate-claim": {"POST": ANNOTATE},
    "annotate-import": {"POST": CURATE},
    "annotate-import-panda": {"POST": CURATE},
    "annotate-rollouts": {"POST": CURATE},
    "annotate-config": {"POST": CURATE},
    "annotate-reassign": {"POST": CURATE},
    "annotate-review": {"GET": CURATE, "POST": CURATE},
    "annotate-metrics": {"GET": CURATE, "POST": CURATE},
    "annotate-workspace": {m: visible_to(CAN_ANNOTATE, "curators, and the annotator on their own session")
                           for m in ("GET", "POST")},
    "annotate-review-session": {"POST": SESSION_REVIEW},
    "api-annotate-config": {"GET": ANNOTATE, "PUT": CURATE},
    "api-annotate-import": {"POST": CURATE},
    "api-annotate-import-panda": {"POST": CURATE},
    "api-annotate-rollouts": {"POST": CURATE},
    "api-annotate-claim": {"POST": ANNOTATE},
    "api-annotate-my-items": {"GET": ANNOTATE},
    "api-annotate-queue": {"GET": CURATE},
    "api-annotate-claim-action": {"POST": {
        "release": owner_only("annotator", CAN_ANNOTATE, "CAN_ANNOTATE, and own object only (the annotator's claim)"),
        "reassign": CURATE,
    }},
    "api-session": {"GET": visible_to(CAN_ANNOTATE, "curators, and the annotator on their own session")},
    "api-session-candidates": {"GET": visible_to(CAN_ANNOTATE, "curators, and the annotator on their own session")},
    "api-session-correct": {"POST": ANNOTATOR_SESSION},
    "api-session-edit-selection": {"POST": ANNOTATOR_SESSION},
    "api-session-continue-generating": {"POST": ANNOTATOR_SESSION},
    "api-session-tool-calls": {"POST": ANNOTATOR_SESSION},
    "api-session-new-round": {"POST": ANNOTATOR_SESSION},
    "api-session-generate-new": {"POST": ANNOTATOR_SESSION},
    "api-session-edit-prompt": {"POST": ANNOTATOR_SESSION},
    "api-session-select": {"POST": ANNOTATOR_SESSION},
    "api-session-stream": {"POST": ANNOTATOR_SESSION},
    "api-session-cancel": {"POST": ANNOTATOR_SESSION},
    "api-session-undo": {"POST": ANNOTATOR_SESSION},
    "api-session-accept": {"POST": ANNOTATOR_SESSION},
    "api-session-reject": {"POST": ANNOTATOR_SESSION},
    "api-session-review": {"POST": SESSION_REVIEW},
    "api-annotate-metrics": {"GET": CURATE},
    # SWE Labeler (taxonomies are platform-wide reference data: any member of any project reads them)
    "labeler-overview": {"GET": ANNOTATE, "POST": ANNOTATE},
    "labeler-claim": {"POST": ANNOTATE},
    "labeler-import": {"POST": CURATE},
    "labeler-pin": {"POST": CURATE},
    "labeler-taxonomy-upload": {"POST": CURATE},
    "labeler-settings": {"POST": CURATE},
    "labeler-autolabel": {"POST": CURATE},
    "labeler-task": {m: members(CAN_ANNOTATE, "CAN_ANNOTATE (the annotator reviews it: their claim)")
                     for m in ("GET", "POST")},
    "labeler-skip": {"POST": ANNOTATE},
    "labeler-claim-trajectory": {"POST": ANNOTATE},
    "labeler-trajectory": {m: members(CAN_ANNOTATE, "CAN_ANNOTATE (the annotator reviews it: their claim)")
                           for m in ("GET", "POST")},
    "labeler-skip-trajectory": {"POST": ANNOTATE},
    "labeler-edit": {"POST": ANNOTATOR_LABEL},
    "labeler-accept": {"POST": ANNOTATOR_LABEL},
    "labeler-metrics": {"GET": CURATE, "POST": CURATE},
    "labeler-compare": {"POST": CURATE},
    "api-taxonomies": {"GET": AUTHENTICATED},
    "api-taxonomy": {"GET": UserRule("a member of any project", EVERYONE - {"outsider"}, denied=404)},
    "api-labeler-settings": {"GET": ANNOTATE, "PUT": CURATE},
    "api-labeler-taxonomy": {"POST": CURATE},
    "api-labeler-import": {"POST": CURATE},
    "api-labeler-autolabel": {"POST": CURATE},
    "api-labeler-tasks": {"GET": ANNOTATE},
    "api-labeler-task": {"GET": members(CAN_ANNOTATE, "CAN_ANNOTATE (the annotator reviews it: their claim)")},
    "api-labeler-claim": {"POST": ANNOTATE},
    "api-labeler-claim-action": {"POST": {
        "release": owner_only("annotator", CAN_ANNOTATE, "CAN_ANNOTATE, and own object only (the reviewer's claim)"),
    }},
    "api-labeler-trajectories": {"GET": ANNOTATE},
    "api-labeler-trajectory": {"GET": members(CAN_ANNOTATE, "CAN_ANNOTATE (the annotator reviews it: their claim)")},
    "api-labeler-trajectory-claim": {"POST": ANNOTATE},
    "api-labeler-trajectory-claim-action": {"POST": {
        "release": owner_only("annotator", CAN_ANNOTATE, "CAN_ANNOTATE, and own object only (the reviewer's claim)"),
    }},
    "api-labeler-queue": {"GET": CURATE},
    "api-labeler-metrics": {"GET": CURATE},
    "api-label": {"GET": visible_to(CAN_ANNOTATE, "curators, and the reviewer on a task they claimed"),
                  "PATCH": ANNOTATOR_LABEL},
    "api-label-submit": {"POST": ANNOTATOR_LABEL},
    # AED
    "aed-overview": {"GET": CURATE, "POST": CURATE},
    "aed-import": {"POST": CURATE},
    "aed-dashboard": {"GET": CURATE, "POST": CURATE},
    "aed-grading": {"POST": CURATE},
    "aed-trace": {"GET": CURATE, "POST": CURATE},
    "aed-case-edit": {"POST": CURATOR_CASE},
    "aed-case-submit": {"POST": CURATOR_CASE},
    "aed-case-draft": {"POST": CURATOR_CASE},
    "aed-case-check": {"POST": CURATOR_CASE},
    "aed-case-draft-status": {"GET": CURATOR_CASE, "POST": CURATOR_CASE},
    "aed-proposal-add": {"POST": CURATOR_CASE},
    "aed-proposal-status": {"POST": CURATOR_CASE},
    "aed-replay-start": {"POST": CURATOR_CASE},
    "aed-replay": {"GET": CURATE, "POST": CURATE},
    "api-aed-import": {"POST": CURATE},
    "api-aed-traces": {"GET": CURATE},
    "api-aed-trace": {"GET": CURATE},
    "api-aed-trace-case": {"POST": CURATE},
    "api-aed-summary": {"GET": CURATE},
    "api-aed-grading": {"GET": CURATE, "PUT": CURATE},
    "api-aed-case": {m: visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)") for m in ("GET", "PATCH")},
    "api-aed-case-submit": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-case-draft": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-case-check": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-proposals": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-proposal-status": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-replays": {"POST": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    "api-aed-replay": {"GET": visible_to(CAN_CURATE, "CAN_CURATE (cases are hidden from others)")},
    # ATD
    "atd-overview": {"GET": CURATE},
    "atd-import": {"POST": CURATE},
    "atd-score": {"POST": CURATE},
    "atd-tie-counts": {"GET": CURATE},
    "atd-freeze": {"POST": CURATE},
    "atd-teacher": {"POST": CURATE},
    "api-atd-import": {"POST": CURATE},
    "api-atd-prompts": {"GET": CURATE},
    "api-atd-runs": {"GET": CURATE, "POST": CURATE},
    "api-atd-run": {"GET": CURATE},
    "api-atd-tie-counts": {"GET": CURATE},
    "api-atd-selections": {"GET": CURATE, "POST": CURATE},
    "api-atd-teacher": {"POST": CURATE},
    "api-atd-teacher-run": {"GET": CURATE},
}


# --- the URL configuration, walked ------------------------------------------------------------------------

@dataclass(frozen=True)
class Endpoint:
    name: str
    route: str
    callback: object

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")

    @property
    def kwargs(self) -> list[str]:
        return re.findall(r"<(?:\w+:)?(\w+)>", self.route)


def _walk(patterns, prefix: str = "", namespace: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            yield Endpoint(f"{namespace}{pattern.name or ''}", prefix + str(pattern.pattern), pattern.callback)


def all_endpoints() -> list[Endpoint]:
    return list(_walk(get_resolver().url_patterns))


def excluded_reason(endpoint: Endpoint) -> str | None:
    if endpoint.name in EXCLUDED:
        return EXCLUDED[endpoint.name]
    if endpoint.name.startswith(f"{ADMIN_NAMESPACE}:") and endpoint.name != ADMIN_CHECKED:
        return "Django admin site internals"
    if settings.STATIC_URL and ("/" + endpoint.route).startswith(settings.STATIC_URL):
        return "static files"
    return None


def checked_endpoints() -> list[Endpoint]:
    return [endpoint for endpoint in all_endpoints() if excluded_reason(endpoint) is None]


def methods_of(callback) -> list[str]:
    """The HTTP methods a view answers: a class-based view's handlers, or a function view's
    require_http_methods list (require_POST, require_GET...); an undecorated function: GET and POST."""
    view_class = getattr(callback, "view_class", None)
    if view_class is not None:
        return [m.upper() for m in view_class.http_method_names
                if m not in ("options", "head", "trace") and hasattr(view_class, m)]
    func = callback
    while func is not None:
        code = getattr(func, "__code__", None)
        if code is not None and "request_method_list" in code.co_freevars:
            listed = func.__closure__[code.co_freevars.index("request_method_list")].cell_contents
            return sorted(m for m in listed if m != "HEAD")
        func = getattr(func, "__wrapped__", None)
    return ["GET", "POST"]


@dataclass(frozen=True)
class Case:
    endpoint: Endpoint
    method: str
    action: str | None = None  # the value of an `action` kwarg, for URLs where it picks the operation

    @property
    def id(self) -> str:
        return f"{self.endpoint.name} {self.method}" + (f" {self.action}" if self.action else "")

    def rule(self):
        rule = RULES.get(self.endpoint.name, {}).get(self.method)
        return rule[self.action] if isinstance(rule, dict) else rule

    @property
    def scopes(self) -> list[str]:
        kwargs = set(self.endpoint.kwargs) - {"action", "name", "position"}
        if not kwargs:
            return ["-"]  # a URL that names nothing: one call per role
        if "slug" in kwargs and len(kwargs) > 1:
            return ["own", "other", "cross"]
        return ["own", "other"]


def all_cases() -> list[Case]:
    cases = []
    for endpoint in checked_endpoints():
        for method in methods_of(endpoint.callback):
            rule = RULES.get(endpoint.name, {}).get(method)
            if isinstance(rule, dict):
                cases += [Case(endpoint, method, action) for action in rule]
            else:
                cases.append(Case(endpoint, method, "release" if "action" in endpoint.kwargs else None))
    return cases


CASES = all_cases()


# --- filling URLs and calling them ------------------------------------------------------------------------

def url_for(world, case: Case, role: str, scope: str) -> str:
    endpoint = case.endpoint
    # "own": alpha's slug and objects; "other": beta's; "cross": alpha's slug with beta's objects.
    slug_side = world.beta if scope == "other" else world.alpha
    object_side = world.alpha if scope == "own" else world.beta
    kwargs = {}
    for name in endpoint.kwargs:
        if name == "slug":
            kwargs[name] = slug_side.project.slug
        elif name == "action":
            kwargs[name] = case.action
        elif name == "name":
            kwargs[name] = "README.md"
        elif name == "token_id":
            kwargs[name] = world.token_ids["beta-user" if scope != "own" or role == "anonymous" else role]
        elif name == "username":  # the annotator of that side's project (tests/role_matrix_world.py names them)
            kwargs[name] = "annotator" if object_side is world.alpha else "beta-annotator"
        elif name == "claim_id" and "labeler" in endpoint.name:
            kwargs[name] = object_side.ids["review_claim_id"]
        else:
            kwargs[name] = object_side.ids[name]
    return reverse(endpoint.name, kwargs=kwargs)


# The smallest body that gets a URL past its input checks to the access decision, where an empty one
# would end in a 404 for a missing object (indistinguishable from a refusal). `side`: the objects of
# the project the URL names.
BODIES = {
    "atd-freeze": lambda side: {"run": side.ids["run_id"]},
}


def send(world, case: Case, role: str, url: str, body: dict):
    """One request as `role`, in a savepoint that is rolled back; returns the response."""
    method = case.method.lower()
    with tests_own_transaction():
        if case.endpoint.is_api:
            client = world.api_client(role)
            if method == "get":
                response = client.get(url)
            else:
                view_class = getattr(case.endpoint.callback, "view_class", None)
                parsers = getattr(view_class, "parser_classes", [])
                takes_json = any(issubclass(parser, JSONParser) for parser in parsers)
                response = getattr(client, method)(url, body, format="json" if takes_json else "multipart")
        else:
            client = world.page_client(role)
            response = client.get(url) if method == "get" else getattr(client, method)(url, body)
        # A stream (server-sent events) is never consumed, so its generator never starts: only the status
        # matters. Not response.close(): that sends request_finished, which would close the test's connection.
        transaction.set_rollback(True)
    return response


def _is_login_redirect(response, login_url: str) -> bool:
    return response.status_code == 302 and response.get("Location", "").startswith(login_url)


def check(expected, response, *, public: bool) -> bool:
    status = response.status_code
    if expected == ALLOWED:
        # Being sent to the log-in page is a refusal, except from the log-in and log-out pages themselves.
        return (status < 500 and status not in (401, 403, 404, 405, 429)
                and (public or not _is_login_redirect(response, reverse("login"))))
    if expected == LOGIN:
        return _is_login_redirect(response, reverse("login"))
    if expected == "admin login":
        return _is_login_redirect(response, reverse("admin:login"))
    return status in expected if isinstance(expected, tuple) else status == expected


def expectation(case: Case, role: str, scope: str):
    rule = case.rule()
    if rule == "admin site":  # Django's admin: a superuser gets in, everyone else is sent to its log-in
        return ALLOWED if role == "superuser" else "admin login"
    if role == "anonymous" and rule is not PUBLIC:
        return 401 if case.endpoint.is_api else LOGIN
    return rule.expect(role, scope)


# --- fixtures ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    with world_for_a_module(django_db_blocker, tmp_path_factory.mktemp("matrix-exports")) as world:
        yield world


class Vocabulary:
    """Token pieces for the workspace and candidates pages, without loading the model."""

    def token_pieces(self, ids):
        return [f"t{token_id} ".encode() for token_id in ids]


def _no_check():
    from dataplatform.inference.capabilities import CapabilityReport

    return CapabilityReport(backend="local", model="m", top_k=1, capabilities=[])


@pytest.fixture
def quiet_platform(monkeypatch, use_backend):
    """Health probes (broker, workers, model) and the model itself are not what is checked here."""
    monkeypatch.setattr("dataplatform.system.api.platform_status", lambda: [])
    monkeypatch.setattr("dataplatform.system.views.platform_status", lambda: [])
    # The model server's capability check runs model calls, and keeps its report in the cache the pages share.
    monkeypatch.setattr("dataplatform.system.services.run_capability_check", _no_check)
    worker_ok = SimpleNamespace(ok=True, detail="")
    monkeypatch.setattr("dataplatform.jobs.views.ping_workers", lambda timeout=1.0, limit=None: worker_ok)
    use_backend(Vocabulary())
