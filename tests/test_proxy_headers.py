"""X-Forwarded-For and X-Forwarded-Proto through the real web server, started as production starts it
(`python -m dataplatform.webserver`, here with 2 worker processes and DEBUG off) on the test database.

- Default settings (no proxy): a forged X-Forwarded-For, new on every request, neither escapes the
  brute-force limits nor reaches the audit log, and `X-Forwarded-Proto: https` does not make a request
  secure.
- TRUSTED_PROXIES=127.0.0.2 (a proxy on a second loopback address): the proxy's headers give the client
  address and the scheme, and a client that connects from 127.0.0.1, past the proxy, is not believed.

Both servers also have uvicorn's own FORWARDED_ALLOW_IPS=* in their environment, as an older deployment
may still set it: it must change nothing. request.is_secure() is seen in a page's `next` link, which DRF
builds with request.build_absolute_uri: it starts with the request's scheme.
"""

import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis
from django.conf import settings
from django.db import connection

from dataplatform.accounts import services as account_services
from dataplatform.audit.models import Action, AuditEvent
from tests import worker
from tests.factories import UserFactory
from tests.net import closed_port

sys.path.insert(0, str(worker.ROOT / "bench"))  # the server runner lives with the benchmarks
import benchlib  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAILURE_LIMIT = 3  # the servers' TOKEN_FAILURE_LIMIT and LOGIN_FAILURE_LIMIT
PROXY = "127.0.0.2"
CLIENT, OTHER_CLIENT = "203.0.113.7", "203.0.113.8"  # as the proxy reports them


def start_web_server(log_dir, *, trusted_proxies: str) -> benchlib.Server:
    env = os.environ | {
        "DATABASE_URL": worker.worker_database_url(), "REDIS_URL": settings.REDIS_URL, "DATA_DIR": str(log_dir),
        "DEBUG": "0", "SECRET_KEY": "proxy-headers-" + secrets.token_hex(16), "LOG_LEVEL": "WARNING",
        "TOKEN_FAILURE_LIMIT": str(FAILURE_LIMIT), "LOGIN_FAILURE_LIMIT": str(FAILURE_LIMIT),
        "TRUSTED_PROXIES": trusted_proxies, "FORWARDED_ALLOW_IPS": "*",
        # No model: these requests need none, and a web process may build its backend at start (asgi.py).
        "MODEL_BACKEND": "vllm", "VLLM_BASE_URL": f"http://127.0.0.1:{closed_port()}", "VLLM_TOKENIZER_DIR": "",
    }
    server = benchlib.Server("asgi", log_dir, env=env, workers=2)
    try:
        server.wait_ready()
    except RuntimeError:
        server.stop()
        raise
    return server


# One server per settings variant for the whole module: each test's rows are committed
# (transaction=True), so the server sees them, and removed after the test.
@pytest.fixture(scope="module")
def direct_server(django_db_setup, tmp_path_factory):
    server = start_web_server(tmp_path_factory.mktemp("direct"), trusted_proxies="")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxied_server(django_db_setup, tmp_path_factory):
    server = start_web_server(tmp_path_factory.mktemp("proxied"), trusted_proxies=PROXY)
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_failures_counted_yet(django_db_setup):
    """The servers count failures in Redis under the test database's name (settings.CACHES), where an
    earlier test's or run's lock-out of 127.0.0.1 may still be in its window: drop those counters."""
    if not settings.REDIS_URL:
        pytest.fail("These tests need Redis: set REDIS_URL=redis://... (bin/test does).")
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = Path(str(connection.settings_dict["NAME"])).name  # as settings.CACHES derives it (a SQLite file's path)
    for key in client.scan_iter(match=f"{prefix}:*:authlimit:*"):
        client.delete(key)
    client.close()


def through_proxy() -> httpx.Client:
    """A client connecting from the trusted proxy's address."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=PROXY))


def wrong_token() -> str:
    """Shaped like a real secret (malformed ones are not counted), but nobody's."""
    return "dp_" + secrets.token_urlsafe(32)


def forged_address(n: int) -> str:
    return f"198.51.100.{n + 1}"


def token_statuses(client: httpx.Client, server: benchlib.Server, forwarded_for: list[str]) -> list[int]:
    """The answers to one request with a wrong token per X-Forwarded-For value."""
    return [client.get(f"{server.base_url}/api/v1/projects/", headers={
        "Authorization": f"Token {wrong_token()}", "X-Forwarded-For": value}).status_code for value in forwarded_for]


def locked_out_address() -> str:
    return AuditEvent.objects.get(action=Action.LOCKED_OUT).client_ip


def log_in(server: benchlib.Server, username: str, password: str, *, forwarded_for: str) -> httpx.Response:
    """Post the log-in form as a browser does, with its CSRF token and cookie. The cookie goes by hand:
    with DEBUG off it is Secure, and httpx sends Secure cookies over https only."""
    form = httpx.get(f"{server.base_url}/accounts/login/")
    csrf_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    return httpx.post(f"{server.base_url}/accounts/login/",
                      data={"username": username, "password": password, "csrfmiddlewaretoken": csrf_token},
                      headers={"Cookie": f"csrftoken={form.cookies['csrftoken']}", "X-Forwarded-For": forwarded_for})


def next_link_scheme(client: httpx.Client, server: benchlib.Server, *, forwarded_proto: str) -> str:
    """The scheme of the audit log's `next` link, read by a superuser with a page size of 1 (issuing their
    two tokens wrote two events, so there is a next page)."""
    user = UserFactory(is_superuser=True, is_staff=True)
    account_services.issue_token(user=user, name="another")
    _, secret = account_services.issue_token(user=user, name="reader")
    page = client.get(f"{server.base_url}/api/v1/audit/?page_size=1",
                      headers={"Authorization": f"Token {secret}", "X-Forwarded-Proto": forwarded_proto})
    assert page.status_code == 200, page.text
    wait_for_the_token_use_to_be_recorded(user)
    return page.json()["next"].split("://")[0]


def wait_for_the_token_use_to_be_recorded(user, timeout: float = 10.0) -> None:
    """The server records a token's use after its response has gone out (after_response.py). The test's
    teardown empties every table with one TRUNCATE, which deadlocks with that write if it is still going
    (PostgreSQL then cancels the TRUNCATE and the teardown fails): wait for it."""
    deadline = time.monotonic() + timeout
    while not AuditEvent.objects.filter(action=Action.TOKEN_USED, actor=user).exists():
        assert time.monotonic() < deadline, "the server never recorded the token's use"
        time.sleep(0.02)


# --- default settings: nothing in front, proxy headers ignored ------------------------------------

def test_a_forged_forwarded_for_does_not_escape_the_token_limit(direct_server):
    with httpx.Client() as client:
        statuses = token_statuses(client, direct_server, [forged_address(n) for n in range(FAILURE_LIMIT + 2)])

    assert statuses == [401] * FAILURE_LIMIT + [429, 429], direct_server.log_tail()
    assert locked_out_address() == "127.0.0.1"


def test_a_forged_forwarded_for_does_not_escape_the_login_limit(direct_server, settings):
    # The server checks passwords with Django's default hashers; the tests' fast MD5 one is not among them.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = UserFactory(password="the-right-password")
    for n in range(FAILURE_LIMIT):
        response = log_in(direct_server, user.username, "a-wrong-password", forwarded_for=forged_address(n))
        assert response.status_code == 200 and "did not match" in response.text, direct_server.log_tail()

    response = log_in(direct_server, user.username, "the-right-password", forwarded_for=forged_address(FAILURE_LIMIT))

    assert response.status_code == 429 and "Too many failed log-in attempts" in response.text
    assert "sessionid" not in response.cookies
    assert locked_out_address() == "127.0.0.1"


def test_a_forged_forwarded_proto_does_not_make_a_request_secure(direct_server):
    with httpx.Client() as client:
        assert next_link_scheme(client, direct_server, forwarded_proto="https") == "http"


# --- TRUSTED_PROXIES=127.0.0.2 ----------------------------------------------------------------------

def test_behind_the_trusted_proxy_the_limits_count_each_client_by_its_own_address(proxied_server):
    # As nginx sends it ($proxy_add_x_forwarded_for): what the client claimed, then the address it came from.
    with through_proxy() as proxy:
        locked = token_statuses(proxy, proxied_server, [f"{forged_address(n)}, {CLIENT}"
                                                        for n in range(FAILURE_LIMIT + 1)])
        other = token_statuses(proxy, proxied_server, [OTHER_CLIENT])

    assert locked == [401] * FAILURE_LIMIT + [429], proxied_server.log_tail()
    assert other == [401]
    assert locked_out_address() == CLIENT


def test_the_trusted_proxy_tells_the_scheme(proxied_server):
    with through_proxy() as proxy:
        assert next_link_scheme(proxy, proxied_server, forwarded_proto="https") == "https"


def test_a_client_that_connects_past_the_trusted_proxy_is_not_believed(proxied_server):
    with httpx.Client() as client:  # from 127.0.0.1, not the proxy's address
        scheme = next_link_scheme(client, proxied_server, forwarded_proto="https")
        statuses = token_statuses(client, proxied_server, [forged_address(n) for n in range(FAILURE_LIMIT + 1)])

    assert scheme == "http"
    assert statuses == [401] * FAILURE_LIMIT + [429], proxied_server.log_tail()
    assert locked_out_address() == "127.0.0.1"


def test_a_trusted_proxy_that_is_no_address_stops_the_start():
    # uvicorn would take "10.0.0.1/8" (host bits set) for a name, never match it, and say nothing.
    started = subprocess.run([sys.executable, "-m", "dataplatform.webserver", "--port", "0"], cwd=worker.ROOT,
                             env=os.environ | {"TRUSTED_PROXIES": "10.0.0.1/8"}, capture_output=True, text=True,
                             timeout=30)

    assert started.returncode != 0
    assert "TRUSTED_PROXIES: '10.0.0.1/8' is not an IP address or network." in started.stderr
