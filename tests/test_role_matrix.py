"""The role matrix (its rules and cases: tests/role_matrix.py): every URL the resolver yields has a rule, and every
URL × method × role × own/other/cross object gets the status its rule derives."""

import pytest

from . import role_matrix
from .role_matrix import (
    ADMIN_CHECKED,
    BODIES,
    CASES,
    EXCLUDED,
    PUBLIC,
    RULES,
    all_endpoints,
    check,
    checked_endpoints,
    expectation,
    methods_of,
    send,
    url_for,
)
from .role_matrix_world import ROLES

pytestmark = pytest.mark.django_db

world = role_matrix.world  # the matrix's objects, built once for this module
quiet_platform = role_matrix.quiet_platform


def test_rules_cover_every_url():
    """Every URL name and method the resolver yields has a rule, and every rule names a live URL."""
    endpoints = checked_endpoints()
    names = [endpoint.name for endpoint in endpoints]
    assert len(names) == len(set(names)), "URL names must be unique for the matrix to key its rules by them"
    missing = [f"{endpoint.name} {method}" for endpoint in endpoints for method in methods_of(endpoint.callback)
               if method not in RULES.get(endpoint.name, {})]
    assert not missing, ("Add these URLs (name and method) to RULES in tests/role_matrix.py, naming who may "
                         f"use them: {missing}")
    stale = sorted(set(RULES) - set(names))
    assert not stale, f"RULES names URLs the resolver no longer has: {stale}"
    unnamed = [endpoint.route for endpoint in endpoints if not endpoint.name]
    assert not unnamed, f"Name these URL patterns so the matrix can key them: {unnamed}"


def test_exclusions_are_still_urls():
    """The excluded names exist (a renamed schema URL must not slip out of the matrix unnoticed)."""
    names = {endpoint.name for endpoint in all_endpoints()}
    assert set(EXCLUDED) <= names
    assert ADMIN_CHECKED in names


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_access(case, world, quiet_platform, django_capture_on_commit_callbacks):
    if case.rule() is None:
        pytest.fail(f"No rule for {case.id}: add it to RULES in tests/role_matrix.py")
    world.ensure_export_files()
    wrong = []
    # Nothing is published: a job enqueued by an allowed call stays a row, and the row is rolled back.
    with django_capture_on_commit_callbacks(execute=False):
        for scope in case.scopes:
            for role in ROLES:
                url = url_for(world, case, role, scope)
                expected = expectation(case, role, scope)
                side = world.beta if scope == "other" else world.alpha
                body = BODIES[case.endpoint.name](side) if case.endpoint.name in BODIES else {}
                response = send(world, case, role, url, body)
                if not check(expected, response, public=case.rule() is PUBLIC):
                    location = response.get("Location", "")
                    wrong.append(f"  {case.method} {url} as {role} ({scope}): expected {expected}, got "
                                 f"{response.status_code}{' → ' + location if location else ''}")
    rule = case.rule()
    assert not wrong, f"{case.id} [{getattr(rule, 'text', rule)}]:\n" + "\n".join(wrong)
