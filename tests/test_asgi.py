"""The ASGI entry point warms each server process up before it serves (dataplatform/asgi.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from tests.asgi_scope import get_scope
from tests.net import closed_port
from tests.threads import in_new_thread

ROOT = Path(__file__).resolve().parent.parent
REPORT = """
import gc, json, sys
import dataplatform.asgi
from django.conf import settings
from django.urls import get_resolver
from dataplatform.accounts.services import _active_token_query
from dataplatform.inference import get_backend

def patterns(resolver):
    for pattern in resolver.url_patterns:
        yield pattern
        if hasattr(pattern, "url_patterns"):
            yield from patterns(pattern)

backend = get_backend()
print(json.dumps({"views": "annotate.api" in sys.modules and "dataplatform.exports.api" in sys.modules,
                  "tokenizer": type(backend.__dict__.get("_tokenizer")).__name__,
                  "model_loaded": getattr(backend, "model_loaded", False),
                  "cache_backend": settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[0] in sys.modules,
                  "url_regexes_compiled": all("regex" in p.pattern.__dict__ for p in patterns(get_resolver())),
                  "token_query_built": _active_token_query.cache_info().currsize == 1,
                  "frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}))
"""


def _import_asgi(env: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", REPORT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=os.environ | env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.model
def test_vllm_process_loads_the_views_and_the_tokenizer_copy_at_start(local_backend):
    from dataplatform.inference.local import converted_dir

    report = _import_asgi({"MODEL_BACKEND": "vllm", "VLLM_BASE_URL": f"http://127.0.0.1:{closed_port()}",
                           "MODEL_NAME": "served", "VLLM_TOKENIZER_DIR": str(converted_dir(local_backend.data_dir))})
    assert report["views"] is True
    assert report["tokenizer"] not in ("NoneType", "")  # a real tokenizer, loaded without reaching the server


@pytest.mark.model
def test_local_process_loads_the_views_and_the_model_at_start(local_backend):
    report = _import_asgi({"MODEL_BACKEND": "local", "DATA_DIR": str(local_backend.data_dir)})
    assert report["views"] is True
    assert report["model_loaded"] is True  # not in the first annotator's request


def test_process_pays_its_one_off_costs_at_start_and_freezes_them_out_of_garbage_collection():
    # Redis as the cache (only imported here, not reached): redis-py's import was 57 ms of a first request.
    report = _import_asgi({"MODEL_BACKEND": "vllm", "VLLM_BASE_URL": f"http://127.0.0.1:{closed_port()}",
                           "REDIS_URL": f"redis://127.0.0.1:{closed_port()}/0"})
    assert report["cache_backend"] and report["url_regexes_compiled"] and report["token_query_built"]
    # What the start made stays out of every later collection: only what came after it is tracked.
    assert report["frozen"] > 50 * report["tracked"], report


async def _answer(application, scope: dict) -> tuple[dict, dict]:
    from asgiref.testing import ApplicationCommunicator

    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(timeout=30)
    body = await communicator.receive_output(timeout=30)
    await communicator.wait(timeout=30)  # response.close: request_finished, the after-response work
    return start, body


@pytest.mark.django_db
def test_middleware_url_resolution_and_view_run_in_one_thread_trip(monkeypatch):
    """Django's own handler resolves the URL on the event loop between the middleware's thread and the
    view's; ours runs the whole chain in the request's one thread (dataplatform.asgi)."""
    import threading

    from django.core.handlers.base import BaseHandler

    from dataplatform.asgi import application

    resolved_in, resolve = [], BaseHandler.resolve_request

    def recording_resolve(handler, request):
        resolved_in.append(threading.current_thread())
        return resolve(handler, request)

    monkeypatch.setattr(BaseHandler, "resolve_request", recording_resolve)

    async def get_login_page():
        return threading.current_thread(), *await _answer(application, get_scope("/accounts/login/"))

    loop_thread, start, body = in_new_thread(async_to_sync(get_login_page))
    assert start["status"] == 200 and b"<form" in body["body"]
    assert len(resolved_in) == 1 and resolved_in[0] is not loop_thread


@pytest.mark.django_db(transaction=True)  # the app answers from its own thread and connection
def test_requests_reuse_an_idle_thread_and_each_hands_its_database_connection_back(members, monkeypatch):
    """One thread per request at a time, as Django's handler gives, but taken from the earlier requests'
    idle threads instead of a new one each time; and the request's pooled connection goes back at its end."""
    import threading

    from django.db import connection

    from dataplatform.accounts import services as account_services
    from dataplatform.asgi import OneThreadTripASGIHandler

    application = OneThreadTripASGIHandler()
    _, secret = account_services.issue_token(user=members["trainer"], name="t")
    views_ran_in, view = [], account_services.authenticate_token

    def recording(**kwargs):
        views_ran_in.append(threading.current_thread())
        return view(**kwargs)

    monkeypatch.setattr(account_services, "authenticate_token", recording)
    scope = get_scope("/api/v1/projects/", secret=secret)

    async def three_requests():
        return [await _answer(application, scope) for _ in range(3)]

    answers = in_new_thread(async_to_sync(three_requests))
    assert [start["status"] for start, _ in answers] == [200, 200, 200]
    assert len(views_ran_in) == 3 and len(set(views_ran_in)) == 1  # with Django's handler: 3 threads
    assert views_ran_in[0] is not threading.current_thread()
    (idle,) = application._threads._idle
    held = idle.submit(lambda: connection.connection).result(timeout=10)
    if connection.vendor == "postgresql":
        # That thread holds no connection between requests: request_finished handed it back to the pool.
        assert held is None
    else:
        # SQLite has no pool: the thread may keep its connection for its next request (CONN_MAX_AGE), but in no
        # transaction, so that it holds no lock on the file between requests.
        assert held is None or not held.in_transaction


def test_request_threads_keep_only_so_many_idle():
    from dataplatform.asgi import RequestThreads

    threads = RequestThreads(keep=2)
    taken = [threads.take() for _ in range(3)]
    assert len(set(taken)) == 3  # busy ones are never shared
    for executor in taken:
        threads.give_back(executor)
    assert threads._idle == taken[:2]
    assert taken[2]._shutdown  # the third is let go
    assert threads.take() is taken[1]
