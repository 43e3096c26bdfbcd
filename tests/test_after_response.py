"""Work left for after the response (dataplatform/after_response.py): API token bookkeeping runs once the
client has the whole response, and its failure is logged without failing the request."""

import logging
import threading

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from rest_framework.test import APIClient

from dataplatform.accounts import services as account_services
from dataplatform.accounts.models import ApiToken
from dataplatform.audit.models import Action, AuditEvent
from tests.asgi_scope import get_scope
from tests.threads import in_new_thread


@pytest.mark.django_db(transaction=True)  # the app answers from its own threads and connections
def test_token_use_is_noted_only_after_the_client_has_the_whole_response(members, monkeypatch):
    from dataplatform.asgi import application

    token, secret = account_services.issue_token(user=members["trainer"], name="t")
    body_received, noted = threading.Event(), []
    note = account_services.note_token_use

    def note_once_the_body_is_out(**kwargs):
        noted.append(body_received.wait(timeout=10))  # False: it ran while the client still waited
        note(**kwargs)

    monkeypatch.setattr(account_services, "note_token_use", note_once_the_body_is_out)

    async def request():
        communicator = ApplicationCommunicator(application, get_scope("/api/v1/projects/", secret=secret, client_ip="192.0.2.7"))
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await communicator.receive_output(timeout=5)
        body = await communicator.receive_output(timeout=5)  # arrives while the bookkeeping still waits
        body_received.set()
        await communicator.wait(timeout=15)
        return start, body

    start, body = in_new_thread(async_to_sync(request))
    assert start["status"] == 200 and not body.get("more_body") and b'"slug":"alpha"' in body["body"]
    assert noted == [True]
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    assert AuditEvent.objects.get(action=Action.TOKEN_USED).client_ip == "192.0.2.7"


@pytest.mark.django_db
def test_failed_bookkeeping_is_logged_without_the_token_and_the_answer_stands(members, monkeypatch, caplog):
    token, secret = account_services.issue_token(user=members["trainer"], name="t")

    def broken(**kwargs):
        raise RuntimeError("the tally is broken")

    monkeypatch.setattr(account_services, "note_token_use", broken)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    with caplog.at_level(logging.ERROR, logger="dataplatform.after_response"):
        response = client.get("/api/v1/projects/")
    assert response.status_code == 200
    failures = [record for record in caplog.records if "after the response failed" in record.getMessage()]
    assert len(failures) == 1 and "broken" in failures[0].getMessage()
    logged = caplog.text + "".join(str(record.exc_info) for record in failures)
    assert secret not in logged and token.prefix not in logged
