"""A job's status line in the page's language: stored as English (status_message, for the API and logs) and
as a message id with its values (status_i18n), which the job page and the progress partial render."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_noop

from dataplatform.jobs import services, tasks
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import ProgressReporter
from dataplatform.status import Status
from tests.conftest import api_client_for

from . import kinds  # noqa: F401  (registers test.count)

pytestmark = pytest.mark.django_db


def _page(client, name, job, language):
    return client.get(reverse(name, args=[job.pk]), HTTP_ACCEPT_LANGUAGE=language).content.decode()


@pytest.fixture
def running(project, members):
    return Job.objects.create(project=project, kind="test.count", params={"to": 5}, created_by=members["curator"],
                              state=JobState.RUNNING, worker="box:1", progress_total=20000)


def test_a_reported_status_is_shown_in_the_pages_language_and_stored_in_english(client, members, running):
    ProgressReporter(running).report(12345, message=Status(gettext_noop("%(rows)s rows read"), rows=12345),
                                     force=True)
    running.refresh_from_db()
    assert running.status_message == "12,345 rows read"
    assert running.status_i18n == {"text": "%(rows)s rows read", "params": {"rows": 12345}}
    client.force_login(members["curator"])
    for name in ("job-progress", "job-detail"):
        assert '<span class="muted">12,345 rows read</span>' in _page(client, name, running, "en")
        chinese = _page(client, name, running, "zh-hans")
        assert '<span class="muted">已读取 12345 行</span>' in chinese and "rows read" not in chinese
    # The API answers with the English line whatever the language asked for.
    api = api_client_for(members["curator"]).get(f"/api/v1/jobs/{running.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert api.status_code == 200 and api.json()["status_message"] == "12,345 rows read"
    assert "status_i18n" not in api.json()


def test_a_plain_string_status_replaces_a_translated_one(running):
    progress = ProgressReporter(running)
    progress.report(1, message=Status(gettext_noop("Sample %(sample)s of %(n)s"), sample=1, n=3), force=True)
    progress.report(2, message="Blocking.", force=True)
    running.refresh_from_db()
    assert (running.status_message, running.status_i18n) == ("Blocking.", None)
    with translation.override("zh-hans"):
        assert running.status_text == "Blocking."


def test_the_frameworks_own_status_lines_are_translated(client, project, members):
    job = services.enqueue_job(project=project, kind="test.count", params={"to": 2}, user=members["curator"],
                               publish=False)
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.status_message == "Done."
    client.force_login(members["curator"])
    assert '<span class="muted">Done.</span>' in _page(client, "job-progress", job, "en")
    assert '<span class="muted">完成。</span>' in _page(client, "job-progress", job, "zh-hans")

    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    services.mark_retrying(job_id=job.pk, error="x", retry_in=9.6, attempt=1, max_attempts=3)
    job.refresh_from_db()
    assert job.status_message == "Model backend unavailable (attempt 1 of 3); retrying in 10 s."
    with translation.override("zh-hans"):
        assert job.status_text == "模型后端不可用（第 1 次尝试，共 3 次）；10 秒后重试。"


def test_a_row_without_a_translated_status_shows_its_text(client, members, running):
    Job.objects.filter(pk=running.pk).update(status_message="Running (attempt 1).", status_i18n=None)
    client.force_login(members["curator"])
    for language in ("en", "zh-hans"):
        assert '<span class="muted">Running (attempt 1).</span>' in _page(client, "job-progress", running, language)


def test_a_malformed_stored_status_falls_back_to_the_english_line(running):
    running.status_message, running.status_i18n = "3 of 4 runs", {"text": "%(done)s of %(total)s runs", "params": {}}
    with translation.override("zh-hans"):
        assert running.status_text == "3 of 4 runs"


# One status line of each place that writes them: each is in its own app's catalog (bin/messages found it).
WRITTEN = [
    ("%(done)s of %(total)s items answered", {"done": 1, "total": 2}),  # annotate
    ("%(done)s of %(total)s tasks labeled (%(errors)s with errors)", {"done": 1, "total": 2, "errors": 0}),  # labeler
    ("%(done)s of %(total)s prompts scored", {"done": 1, "total": 2}),  # corpora (ATD)
    ("%(done)s of %(total)s runs", {"done": 1, "total": 2}),  # corpora (AED)
    ("the model found it contradicted", {}),  # corpora job kinds
    ("%(rows)s rows in %(shards)s shards", {"rows": 1, "shards": 2}),  # exports
    ("Sample %(sample)s of %(n)s", {"sample": 1, "n": 2}),  # inference
    ("Cancelling…", {}),  # the jobs framework
]


@pytest.mark.parametrize("text, params", WRITTEN, ids=[text for text, _ in WRITTEN])
def test_every_writer_of_status_lines_has_them_translated(text, params):
    stored = Status(text, **params).as_json()
    with translation.override("zh-hans"):
        assert gettext(text) != text
        line = Job(status_message=Status(text, **params).english(), status_i18n=stored).status_text
    assert line != Status(text, **params).english()


# --- the errors the platform writes: English in the row and the API, the page's language on pages -------------

def test_a_timed_out_job_says_why_in_the_pages_language(client, project, members, monkeypatch):
    job = services.enqueue_job(project=project, kind="test.count", params={"to": 2}, user=members["curator"],
                               publish=False)

    def hangs(job, progress):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(services, "get_kind", lambda name: SimpleNamespace(run=hangs))
    services.execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.error.startswith("Stopped after running 0 s, the time limit")
    client.force_login(members["curator"])
    chinese = _page(client, "job-detail", job, "zh-hans")
    assert "运行了 0 秒后被停止，这是单次运行的时间限制（JOB_SOFT_TIME_LIMIT_SECONDS）。" in chinese
    assert "Stopped after" not in chinese
    assert "Stopped after running 0 s, the time limit of one run" in _page(client, "job-progress", job, "en")
    api = api_client_for(members["curator"]).get(f"/api/v1/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert api.json()["error"] == job.error and "error_i18n" not in api.json()


def test_a_job_the_reaper_gives_up_on_says_why_in_the_pages_language(client, project, members, settings):
    settings.JOB_STALE_AFTER_SECONDS, settings.JOB_MAX_STALE_RUNS = 60, 3
    job = Job.objects.create(project=project, kind="test.count", params={"to": 2}, created_by=members["curator"],
                             state=JobState.RUNNING, worker="box:7", attempts=3,
                             heartbeat_at=timezone.now() - timedelta(seconds=120))
    assert services.reap_stale_jobs()["failed"] == [job.pk]
    job.refresh_from_db()
    assert job.error.startswith("The worker running it (box:7) stopped answering") and "lost 3 times" in job.error
    client.force_login(members["curator"])
    chinese = _page(client, "job-progress", job, "zh-hans")
    assert '运行它的工作进程（<span translate="no">box:7</span>）已停止响应' in chinese
    assert "它已失联 3 次，因此不再运行" in chinese and "stopped answering" not in chinese
    english = _page(client, "job-progress", job, "en")
    assert 'The worker running it (<span translate="no">box:7</span>) stopped answering' in english
    assert "It was lost 3 times, so it is not run again" in english


def test_an_outage_that_outlasts_its_retries_and_an_exceptions_text(client, project, members, settings):
    settings.JOB_MAX_RETRIES = 0
    job = services.enqueue_job(project=project, kind="test.count", params={"to": 2, "fail_with": "backend"},
                               user=members["curator"], publish=False)
    tasks.run_job.apply(args=[job.pk])
    job.refresh_from_db()
    assert job.error.endswith(" It stayed unavailable after 1 attempts.")
    broken = services.enqueue_job(project=project, kind="test.count", params={"to": 5, "fail_with": "error"},
                                  user=members["curator"], publish=False)
    services.execute_job(job_id=broken.pk)
    broken.refresh_from_db()
    assert broken.error == "ValueError: the count broke at 3" and broken.error_i18n is None
    client.force_login(members["curator"])
    chinese = _page(client, "job-progress", job, "zh-hans")
    assert f'<span translate="no">{job.error.removesuffix(" It stayed unavailable after 1 attempts.")}</span> 尝试 1 ' \
           "次后仍不可用。" in chinese
    # An exception's own text is shown as it is, marked as not the interface's.
    assert ('<pre class="error"><span translate="no">ValueError: the count broke at 3</span></pre>'
            in _page(client, "job-progress", broken, "zh-hans"))
    services.retry_job(job=job)
    job.refresh_from_db()
    assert (job.error, job.error_i18n) == ("", None)


def test_an_unreachable_broker_is_reported_in_the_callers_language(members, monkeypatch):
    """check_broker's message reaches the system page and its API: in the request's language, the URL (its
    password hidden) and the transport's own words as they are."""
    from dataplatform.celery import app
    from dataplatform.system import selectors

    def refused():
        raise OSError("Connection refused")

    monkeypatch.setattr(app, "connection_for_write", refused)
    monkeypatch.setattr(app.conf, "broker_url", "redis://:secret@127.0.0.1:1/0")
    monkeypatch.setattr(selectors, "backend_status", lambda: selectors.ServiceStatus("Model backend", True, "ok"))
    api = api_client_for(members["curator"])

    def broker(language):
        services = api.get("/api/v1/system/status/", HTTP_ACCEPT_LANGUAGE=language).json()["services"]
        return next(service for service in services if service["name"] == "Broker")  # the name stays as it is

    chinese = broker("zh-hans")
    assert not chinese["ok"] and chinese["detail"] == (
        "无法连接位于 redis://:***@127.0.0.1:1/0 的 Celery 消息代理：Connection refused。请启动 Redis（或修正 "
        "REDIS_URL），或取消设置 REDIS_URL 以使用内置的文件系统消息代理。")
    assert broker("en")["detail"] == (
        "Cannot reach the Celery broker at redis://:***@127.0.0.1:1/0: Connection refused. Start Redis (or fix "
        "REDIS_URL), or unset REDIS_URL to use the embedded filesystem broker.")
