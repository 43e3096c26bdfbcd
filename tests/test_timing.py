"""The Server-Timing header: present on every response, sync and async, and it measures the app."""

import re
import time

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from django.test import AsyncClient, RequestFactory

from dataplatform.timing import server_timing_middleware

from .conftest import api_client_for
from .threads import in_new_thread

HEADER = re.compile(r"^app;dur=(\d+\.\d)$")


def _duration_ms(response) -> float:
    match = HEADER.match(response["Server-Timing"])
    assert match, response["Server-Timing"]
    return float(match.group(1))


def test_sync_chain_times_the_view():
    def slow_view(request):
        time.sleep(0.05)
        return HttpResponse("ok")

    response = server_timing_middleware(slow_view)(RequestFactory().get("/"))
    assert 50.0 <= _duration_ms(response) < 5_000


def test_async_chain_times_the_view():
    async def slow_view(request):
        time.sleep(0.03)  # blocking on purpose: it must be counted whatever the view does
        return HttpResponse("ok")

    middleware = server_timing_middleware(slow_view)
    response = in_new_thread(async_to_sync(middleware), RequestFactory().get("/"))
    assert 30.0 <= _duration_ms(response) < 5_000


@pytest.mark.django_db
def test_api_and_error_responses_carry_it(members, project):
    client = api_client_for(members["annotator"])
    assert _duration_ms(client.get(f"/api/v1/projects/{project.slug}/annotate/queue/")) >= 0  # refused: 403
    assert _duration_ms(client.get("/api/v1/no-such-route/")) >= 0  # the JSON 404


@pytest.mark.django_db
def test_present_under_asgi(members):
    async def fetch():
        return await AsyncClient().get("/accounts/login/")

    response = in_new_thread(async_to_sync(fetch))
    assert response.status_code == 200
    assert _duration_ms(response) > 0
