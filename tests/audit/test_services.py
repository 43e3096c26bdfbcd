"""Audit events recorded by the services and the Django admin."""

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import Membership
from dataplatform.audit import services
from dataplatform.audit.models import Action, AuditEvent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def actions():
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


def test_project_and_membership_changes_are_recorded(members):
    boss = members["admin"]
    project = account_services.create_project(slug="gamma", name="Gamma", admin=boss, actor=boss, client_ip="10.1.2.3")
    newcomer = UserFactory(username="newcomer")
    account_services.set_membership(project=project, user=newcomer, role="annotator", actor=boss)
    account_services.set_membership(project=project, user=newcomer, role="annotator", actor=boss)  # no change
    account_services.set_membership(project=project, user=newcomer, role="curator", actor=boss)
    account_services.remove_membership(project=project, user=newcomer, actor=boss)
    events = list(AuditEvent.objects.filter(project=project).order_by("id"))
    assert [e.action for e in events] == [Action.PROJECT_CREATED, Action.MEMBERSHIP_SET, Action.MEMBERSHIP_SET,
                                         Action.MEMBERSHIP_SET, Action.MEMBERSHIP_REMOVED]
    assert events[0].client_ip == "10.1.2.3" and events[0].actor_name == "admin"
    assert events[3].detail == {"user": "newcomer", "role": "curator", "previous_role": "annotator"}


def test_token_create_and_revoke_are_recorded_without_the_secret(members):
    token, secret = account_services.issue_token(user=members["trainer"], name="cluster", read_only=True)
    account_services.revoke_token(token=token, actor=members["admin"])
    created, revoked = AuditEvent.objects.filter(target_id=str(token.pk)).order_by("id")
    assert (created.action, created.actor_name, created.detail["read_only"]) == (Action.TOKEN_CREATED, "trainer", True)
    assert (revoked.action, revoked.actor_name) == (Action.TOKEN_REVOKED, "admin")
    assert secret not in str(created.detail) + str(revoked.detail)


def test_secret_looking_detail_is_never_stored():
    event = services.record(action=Action.TOKEN_CREATED, client_ip="not an ip", detail={
        "secret": "x", "nested": {"Password": "hunter2", "note": "token dp_" + "a" * 43 + " leaked"}, "n": 3})
    assert event.detail == {"secret": "[redacted]", "n": 3,
                            "nested": {"Password": "[redacted]", "note": "token dp_[redacted] leaked"}}
    assert event.client_ip is None


def test_token_use_is_one_row_per_hour_with_a_request_count(members):
    token, secret = account_services.issue_token(user=members["trainer"], name="t")
    client = APIClient(REMOTE_ADDR="192.0.2.10")
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    for _ in range(5):
        assert client.get("/api/v1/projects/").status_code == 200
    used = AuditEvent.objects.get(action=Action.TOKEN_USED)
    assert used.detail["requests"] == 1 and used.client_ip == "192.0.2.10" and used.actor_name == "trainer"
    # The count reaches the row at most once a minute; pretend the minute has passed.
    count_key = next(k for k in _token_use_keys(token))
    cache.delete(f"{count_key}:flushed")
    client.get("/api/v1/projects/")
    used.refresh_from_db()
    assert used.detail["requests"] == 6
    # A cache that lost everything continues the hour's row instead of starting a second one.
    cache.delete_many([count_key, f"{count_key}:event", f"{count_key}:flushed"])
    client.get("/api/v1/projects/")
    assert AuditEvent.objects.filter(action=Action.TOKEN_USED).count() == 1
    used.refresh_from_db()
    assert used.detail["requests"] == 7


def test_expired_token_refusals_are_one_row_per_hour_even_if_the_cache_forgets(members):
    token, _ = account_services.issue_token(user=members["trainer"], name="old", expires_in_days=1)
    for _ in range(3):
        services.record_expired_token_use(token=token, client_ip="192.0.2.11")
    hour = next(_token_use_keys(token)).rsplit(":", 1)[1]
    cache.delete(f"audit:token-expired:{token.pk}-{token.digest[:12]}:{hour}")
    services.record_expired_token_use(token=token, client_ip="192.0.2.11")
    refused = AuditEvent.objects.get(action=Action.TOKEN_EXPIRED_USED)
    assert (refused.target_id, refused.actor_name, refused.client_ip) == (str(token.pk), "trainer", "192.0.2.11")
    assert refused.detail["expired_at"] == token.expires_at.isoformat()


def _token_use_keys(token):
    import time

    hour = int(time.time() // 3600)
    yield f"audit:token-use:{token.pk}-{token.digest[:12]}:{hour}"


def test_django_admin_changes_are_recorded(client, members, project):
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(root)
    one, two, three = (Membership.objects.get(project=project, user=members[r]) for r in ("annotator", "trainer",
                                                                                          "curator"))
    response = client.post(f"/admin/accounts/membership/{one.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    # "Delete selected" on several rows: Django bulk-creates their LogEntries, which sends no signal.
    response = client.post("/admin/accounts/membership/", {"action": "delete_selected", "post": "yes",
                                                          "_selected_action": [two.pk, three.pk]})
    assert response.status_code == 302
    deleted = AuditEvent.objects.filter(action=Action.ADMIN_DELETED).order_by("id")
    assert [(e.target_type, e.target_id, e.actor_name) for e in deleted] == [
        ("accounts.membership", str(one.pk), "root"), ("accounts.membership", str(two.pk), "root"),
        ("accounts.membership", str(three.pk), "root")]
    assert deleted[0].project == project and deleted[1].project == project
    assert deleted[1].client_ip == "127.0.0.1"
