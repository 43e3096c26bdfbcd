"""API token secrets never reach a log record (at DEBUG, every logger) nor the audit log."""

import io
import logging

import pytest
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from dataplatform.accounts import services
from dataplatform.audit.models import AuditEvent
from tests.exports.conftest import _exports_in_tmp, run_export  # noqa: F401  (fixtures)


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def every_log_record(caplog):
    """Every logger at DEBUG, SQL included; a handler on the root and on each logger that does not propagate."""
    collector = Collect()
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)] + [logging.root]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
        if lg is logging.root or not lg.propagate:
            lg.addHandler(collector)
    caplog.set_level(logging.DEBUG)
    connection.force_debug_cursor = True  # django.db.backends logs every query with its parameters
    yield collector
    connection.force_debug_cursor = False
    for lg, level, disabled in saved:
        lg.setLevel(level)
        lg.disabled = disabled
        lg.removeHandler(collector)


def rendered(record: logging.LogRecord) -> str:
    return " ".join([record.getMessage(), repr(record.args), record.exc_text or "", repr(record.__dict__)])


def assert_nowhere(secrets, collector, caplog):
    texts = [rendered(r) for r in collector.records + caplog.records]
    assert len(texts) > 20 and any("Unauthorized" in t for t in texts)  # the capture did capture
    for secret in secrets:
        assert not [t for t in texts if secret in t]
        for event in AuditEvent.objects.all():
            assert secret not in repr((event.detail, event.target_id, event.target_type, event.actor_name))


@pytest.mark.django_db(transaction=True)
def test_token_secrets_never_reach_the_logs(every_log_record, caplog, members, live_server, run_export,  # noqa: F811
                                            settings):
    settings.TOKEN_FAILURE_LIMIT = 2
    browser = APIClient()
    browser.force_login(members["curator"])
    created = browser.post("/api/v1/tokens/", {"name": "made over the API"}, format="json").json()["secret"]
    page = browser.post("/tokens/", {"name": "made on the page"})
    made_on_page = page.context["new_secret"]
    read_only_token, read_only = services.issue_token(user=members["curator"], name="ro", read_only=True)
    revoked_token, revoked = services.issue_token(user=members["curator"], name="old")
    services.revoke_token(token=revoked_token)
    expired_token, expired = services.issue_token(user=members["curator"], name="expired", expires_in_days=1)
    expired_token.expires_at = expired_token.created_at
    expired_token.save(update_fields=["expires_at"])
    unknown = "dp_" + "Z" * 43

    def call(secret, method="get", url="/api/v1/projects/", ip="127.0.0.1"):
        client = APIClient(REMOTE_ADDR=ip)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return getattr(client, method)(url, {}, format="json").status_code

    assert call(created) == 200
    assert call(read_only, "post", "/api/v1/projects/alpha/jobs/") == 403
    assert call(expired, ip="192.0.2.200") == 401  # not counted towards the lock-out below
    assert call(revoked, ip="192.0.2.200") == 401
    assert call(unknown, ip="192.0.2.200") == 401
    assert call(made_on_page, ip="192.0.2.200") == 429  # locked out: the message names no token

    export = run_export(filters={"n": 20})
    _, trainer_secret = services.issue_token(user=members["trainer"], name="pull", read_only=True)
    out = io.StringIO()
    call_command("pull", f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/", "--token", trainer_secret,
                 "--out", str(settings.DATA_DIR / "pulled"), stdout=out, stderr=out)
    assert "Pulled export" in out.getvalue() and trainer_secret not in out.getvalue()

    assert_nowhere([created, made_on_page, read_only, revoked, expired, unknown, trainer_secret], every_log_record,
                   caplog)
    # The pull's own HTTP logging (the stand-alone script's: each request's URL and status) was on.
    assert any(r.name == "dataplatform_pull" for r in every_log_record.records)
