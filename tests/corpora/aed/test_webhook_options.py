"""A replay's options are checked when it is scheduled (service, API, page), and again by the webhook runner
for a row stored before the check: a bad timeout or header is a 400 naming the field, never a job that fails
with a Python error or is retried as if the runner were down."""

import pytest
from django.urls import reverse

from corpora.aed import services
from corpora.aed.models import CaseEvent, Replay
from corpora.aed.runners import BadWebhookOption, webhook_call
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState

from ...conftest import api_client_for

pytestmark = pytest.mark.django_db
URL = "https://runner.internal/run"

BAD_TIMEOUTS = ["abc", 1e308, -1, 0, 301, True, None, [30], 10**400]
BAD_HEADERS = [
    ("a string", "options.headers"),
    (["Authorization", "x"], "options.headers"),
    ({"X-Count": 3}, "options.headers.X-Count"),
    ({"X-Token": None}, "options.headers.X-Token"),
    ({"X-Token": "a\r\nX-Evil: 1"}, "options.headers.X-Token"),
    ({"X-Token": "a\nb"}, "options.headers.X-Token"),
    ({"X-Token": "a\x00b"}, "options.headers.X-Token"),
    ({"X-Token": "caf\u00e9"}, "options.headers.X-Token"),  # httpx sends ASCII only
    ({"X-Token": "x" * 9000}, "options.headers.X-Token"),
    ({"X-Evil\r\nHost": "a"}, "options.headers"),
    ({"X Token": "a"}, "options.headers"),
    ({"": "a"}, "options.headers"),
    ({"X-Na\x00me": "a"}, "options.headers"),
    ({"X-A": "1", "x-a": "2"}, "options.headers.x-a"),
    ({f"X-{n}": "v" for n in range(21)}, "options.headers"),
    *[({name: "runner.internal"}, f"options.headers.{name}") for name in (
        "Host", "host", "HOST", "Connection", "Keep-Alive", "Proxy-Authorization", "proxy-connection", "TE",
        "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length")],
]


@pytest.fixture(autouse=True)
def allowed(settings):
    settings.AED_REPLAY_WEBHOOKS = [URL]


@pytest.fixture
def proposal(calc_trace, members):
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "wrong operand"})
    return services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")


def nothing_written():
    return not Replay.objects.exists() and not Job.objects.exists() and not CaseEvent.objects.filter(
        kind="replay").exists()


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_a_bad_timeout_is_refused_by_the_service_naming_the_field(proposal, members, timeout):
    with pytest.raises(services.CurationError, match="timeout must be a number of seconds from 0.1 to 300") as info:
        services.start_replay(proposal=proposal, pairs=1, runner="webhook", user=members["curator"], publish=False,
                              options={"url": URL, "timeout": timeout})
    assert info.value.field == "options.timeout" and nothing_written()


@pytest.mark.parametrize(("headers", "field"), BAD_HEADERS, ids=lambda v: repr(v)[:40])
def test_bad_headers_are_refused_by_the_service_naming_the_field(proposal, members, headers, field):
    with pytest.raises(services.CurationError) as info:
        services.start_replay(proposal=proposal, pairs=1, runner="webhook", user=members["curator"], publish=False,
                              options={"url": URL, "headers": headers})
    assert info.value.field == field and nothing_written()


def test_the_limits_are_settings(proposal, members, settings):
    settings.AED_REPLAY_WEBHOOK_MAX_TIMEOUT_SECONDS = 5
    settings.AED_REPLAY_WEBHOOK_MAX_HEADERS = 1
    settings.AED_REPLAY_WEBHOOK_MAX_HEADER_CHARS = 10
    for options, field in [({"timeout": 6}, "options.timeout"), ({"headers": {"A": "1", "B": "2"}}, "options.headers"),
                           ({"headers": {"Authorization": "x"}}, "options.headers.Authorization")]:
        with pytest.raises(services.CurationError) as info:
            services.start_replay(proposal=proposal, pairs=1, runner="webhook", user=members["curator"],
                                  publish=False, options={"url": URL, **options})
        assert info.value.field == field
    assert nothing_written()


def test_good_options_are_stored_with_values_trimmed(proposal, members):
    replay = services.start_replay(proposal=proposal, pairs=1, runner="webhook", user=members["curator"],
                                   publish=False, options={"url": URL, "timeout": 2.5, "headers": {
                                       "Authorization": " Bearer s3cret\t", "X-Tenant_1.a": "b c"}})
    assert Replay.objects.get(pk=replay.pk).options == {
        "url": URL, "timeout": 2.5, "headers": {"Authorization": "Bearer s3cret", "X-Tenant_1.a": "b c"}}


def replay_api(user, proposal, options):
    return api_client_for(user).post(f"/api/v1/aed/proposals/{proposal.pk}/replays/",
                                     {"pairs": 1, "runner": "webhook", "options": options}, format="json")


@pytest.mark.parametrize(("options", "field"), [
    ({"url": URL, "timeout": "abc"}, "options.timeout"),
    ({"url": URL, "timeout": 1e308}, "options.timeout"),
    ({"url": URL, "timeout": -1}, "options.timeout"),
    ({"url": URL, "headers": "Authorization: x"}, "options.headers"),
    ({"url": URL, "headers": {"X-Count": 1}}, "options.headers.X-Count"),
    ({"url": URL, "headers": {"X-Token": "a\r\nHost: evil"}}, "options.headers.X-Token"),
    ({"url": URL, "headers": {"Host": "evil.internal"}}, "options.headers.Host"),
    ({"url": URL, "headers": {"proxy-authorization": "x"}}, "options.headers.proxy-authorization"),
    ({"max_steps": 10**6}, "options.max_steps"),
    ({"max_steps": "6"}, "options.max_steps"),
    ({"max_tokens": 0}, "options.max_tokens"),
    ({"temperature": 1e308}, "options.temperature"),
    ({"model": ["m"]}, "options.model"),
], ids=lambda v: repr(v)[:50])
def test_the_api_answers_400_naming_the_option_and_writes_nothing(proposal, members, options, field):
    response = replay_api(members["curator"], proposal, {"url": URL, **options})
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field], response.json()
    assert nothing_written()


def test_the_api_accepts_good_webhook_options_and_hides_the_header_values(proposal, members):
    response = replay_api(members["curator"], proposal, {"url": URL, "timeout": 10, "headers": {"X-Key": "k1"}})
    assert response.status_code == 202, response.content
    assert response.json()["options"]["headers"] == {"X-Key": "(hidden)"}


def test_the_page_form_cannot_set_headers_or_a_timeout(client, proposal, members):
    """The form has no such fields: anything posted under those names is dropped, not stored."""
    client.force_login(members["curator"])
    response = client.post(reverse("aed-replay-start", args=["alpha", proposal.pk]),
                           {"pairs": "1", "runner": "webhook", "url": URL, "timeout": "abc",
                            "headers": "Host: evil"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert Replay.objects.get().options == {"url": URL, "max_steps": 6, "temperature": 0.7}


@pytest.mark.parametrize("options", [
    {"timeout": "abc"}, {"timeout": 1e308}, {"headers": "x"}, {"headers": {"X-Token": "a\r\nb"}},
    {"headers": {"Host": "evil.internal"}},
], ids=repr)
def test_a_row_stored_before_the_check_fails_its_job_once_with_the_reason(proposal, members, httpserver,
                                                                         settings, options):
    """No retry as if the runner were unreachable, no request to the runner, no Python error text."""
    url = httpserver.url_for("/run")
    settings.AED_REPLAY_WEBHOOKS = [url]
    replay = services.start_replay(proposal=proposal, pairs=2, runner="webhook", user=members["curator"],
                                   publish=False, options={"url": url})
    Replay.objects.filter(pk=replay.pk).update(options={"url": url, **options})
    job_services.execute_job(job_id=replay.job_id)  # a Transient error would be raised here, for Celery to retry
    job = Job.objects.get(pk=replay.job_id)
    assert job.state == JobState.FAILED and job.attempts == 1
    assert job.error.startswith("BadWebhookOption: ") and ("timeout must be" in job.error or "header" in job.error)
    assert httpserver.log == [] and not replay.runs.exists()


def test_the_runner_check_returns_what_is_sent():
    call = webhook_call({"url": URL + "/", "headers": {"Authorization": "Bearer x "}, "timeout": 1})
    assert (call.url, call.headers, call.timeout) == (URL, {"Authorization": "Bearer x"}, 1.0)
    assert webhook_call({"url": URL}).timeout == 30.0 and webhook_call({"url": URL}).headers == {}
    with pytest.raises(BadWebhookOption, match="Host is a connection or routing header"):
        webhook_call({"url": URL, "headers": {"Host": "x"}})
