"""Brute-force protection on the log-in pages and API token authentication, with the real cache."""

import random
import re
import time

import pytest
from django.core.cache.backends.redis import RedisCache
from rest_framework.test import APIClient

from dataplatform.accounts import limiter, services
from dataplatform.audit.models import Action, AuditEvent
from tests.conftest import api_client_for
from tests.net import closed_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def ip():
    """A fresh address per test (198.18.0.0/15 is reserved for tests), so counters never leak between tests."""
    return f"198.{random.randint(18, 19)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


@pytest.fixture(autouse=True)
def low_limits(settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    settings.LOGIN_IP_FAILURE_LIMIT = 5
    settings.TOKEN_FAILURE_LIMIT = 3
    settings.AUTH_FAILURE_WINDOW_SECONDS = 60


def log_in(client, ip, username, password="wrong-password"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_login_locks_a_client_out_after_failures_and_says_when_to_retry(client, members, ip):
    for _ in range(3):
        response = log_in(client, ip, "curator")
        assert response.status_code == 200 and "did not match" in response.content.decode()
    # Even the right password is refused now, without being checked.
    response = log_in(client, ip, "curator", "pw-for-tests-only")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many failed log-in attempts" in response.content.decode()
    assert "Try again in 1 minute" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_other_addresses_are_not_locked_out(client, members, ip):
    for _ in range(4):
        log_in(client, ip, "curator")
    response = log_in(client, "192.0.2.77", "curator", "pw-for-tests-only")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(members["curator"].pk)


def test_lock_out_does_not_reveal_whether_the_username_exists(client, members, ip):
    for username in ("curator", "nobody-by-this-name"):
        for _ in range(3):
            log_in(client, ip, username)
    known, unknown = log_in(client, ip, "curator"), log_in(client, ip, "nobody-by-this-name")
    assert known.status_code == unknown.status_code == 429
    alerts = [re.findall(r'role="alert">(.*?)</p>', r.content.decode()) for r in (known, unknown)]
    assert alerts[0] == alerts[1] and "Too many failed log-in attempts" in alerts[0][0]


def test_many_usernames_from_one_address_lock_the_address(client, members, ip):
    for username in ("a1", "a2", "a3", "a4", "a5"):
        assert log_in(client, ip, username).status_code == 200
    assert log_in(client, ip, "curator", "pw-for-tests-only").status_code == 429


def test_usernames_are_counted_case_insensitively(client, members, ip):
    for username in ("Curator", "CURATOR", "curator"):
        log_in(client, ip, username)
    assert log_in(client, ip, "curator", "pw-for-tests-only").status_code == 429


def test_admin_login_page_is_protected_too(client, members, ip):
    for _ in range(3):
        client.post("/admin/login/", {"username": "admin", "password": "nope"}, REMOTE_ADDR=ip)
    response = client.post("/admin/login/", {"username": "admin", "password": "nope"}, REMOTE_ADDR=ip)
    assert "Too many failed log-in attempts" in response.content.decode()


def test_a_lock_out_is_one_audit_event_without_the_username(client, members, ip):
    for _ in range(6):
        log_in(client, ip, "my-password-typed-in-the-wrong-box")
    events = AuditEvent.objects.filter(action=Action.LOCKED_OUT, client_ip=ip)
    assert [e.detail["scope"] for e in events] == ["login-user-ip"]
    assert "my-password" not in str(events[0].detail)


def test_the_window_ends():
    limit = limiter.Limit("test-window", 2, 1)
    subject = f"subject-{random.random()}"
    assert limiter.record_failure(limit, subject) == 1
    assert limiter.record_failure(limit, subject) == 2
    assert limiter.retry_after(limit, subject) == 1
    time.sleep(1.2)
    assert limiter.retry_after(limit, subject) is None
    assert limiter.record_failure(limit, subject) == 1  # a new window


def test_a_limit_of_zero_switches_it_off():
    limit = limiter.Limit("test-off", 0, 60)
    for _ in range(5):
        limiter.record_failure(limit, "x")
    assert limiter.retry_after(limit, "x") is None


def test_counters_are_shared_between_processes_through_redis(settings):
    """Two cache clients (as two web processes would have) see one counter, and it expires with its window."""
    location = "redis://127.0.0.1:6379/13"
    prefix = f"limiter-test-{random.random()}"
    first, second = (RedisCache(location, {"KEY_PREFIX": prefix}) for _ in range(2))
    limit = limiter.Limit("test-redis", 3, 30)
    try:
        for cache_client, expected in ((first, 1), (second, 2), (first, 3)):
            limiter.cache = cache_client
            assert limiter.record_failure(limit, "10.0.0.1") == expected
        limiter.cache = second
        assert 25 <= limiter.retry_after(limit, "10.0.0.1") <= 30
        count_key = limiter._keys(limit, "10.0.0.1")[0]
        assert 0 < second._cache.get_client(second.make_and_validate_key(count_key)).ttl(
            second.make_and_validate_key(count_key)) <= 30
    finally:
        from django.core.cache import cache

        limiter.forget(limit, "10.0.0.1")
        limiter.cache = cache


# --- API tokens ---------------------------------------------------------------------------------

def api(ip, secret):
    client = APIClient(REMOTE_ADDR=ip)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def test_token_failures_lock_the_address_out_with_429(members, ip):
    _, good = services.issue_token(user=members["trainer"], name="t")
    wrong = "dp_" + "A" * 43
    for _ in range(3):
        assert api(ip, wrong).get("/api/v1/projects/").status_code == 401
    response = api(ip, good).get("/api/v1/projects/")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "Too many failed API token attempts" in response.json()["detail"]
    # Another address with the good token is not affected.
    assert api("192.0.2.78", good).get("/api/v1/projects/").status_code == 200


def test_revoked_tokens_count_as_failures(members, ip):
    token, secret = services.issue_token(user=members["trainer"], name="t")
    services.revoke_token(token=token)
    statuses = [api(ip, secret).get("/api/v1/projects/").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]


def test_malformed_tokens_are_refused_without_counting(members, ip):
    _, good = services.issue_token(user=members["trainer"], name="t")
    for _ in range(5):
        assert api(ip, "not-a-real-token").get("/api/v1/projects/").status_code == 401
    assert api(ip, good).get("/api/v1/projects/").status_code == 200


def test_a_read_only_token_writing_is_not_an_authentication_failure(members, ip):
    _, secret = services.issue_token(user=members["curator"], name="t", read_only=True)
    for _ in range(4):
        assert api(ip, secret).post("/api/v1/projects/alpha/jobs/", {}, format="json").status_code == 403
    assert api(ip, secret).get("/api/v1/projects/").status_code == 200


@pytest.mark.django_db
def test_an_unreachable_cache_turns_the_limits_off_instead_of_failing_every_log_in(members, settings):
    """Redis restarting must not make every token request a 500: the request is served, uncounted."""
    dead = closed_port()
    # Django rebuilds its cache handlers when CACHES changes (and again when the fixture restores it).
    settings.CACHES = {"default": {"BACKEND": "dataplatform.cache.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{dead}/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5}}}
    good = api_client_for(members["curator"])
    assert good.get("/api/v1/projects/").status_code == 200
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token dp_" + "x" * 43)
    assert bad.get("/api/v1/projects/").status_code == 401
    assert limiter.retry_after(limiter.token_limit(), "127.0.0.1") is None
