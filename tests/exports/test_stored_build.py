"""Building stored rows ahead of exports: build_soon after a settle, the worker's task, the sweep."""

import pytest
from django.db import transaction

from dataplatform.exports import stored, tasks
from dataplatform.exports.models import StoredRow
from dataplatform.jobs.models import Job

from .stored_kind import STORED_JOBS, STORED_TOKENS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(settings, monkeypatch):
    """The builds build_soon sends to the workers (the broker is not what these tests are about)."""
    from django.core.cache import cache

    settings.EXPORTS_BUILD_AHEAD = True
    cache.clear()
    calls = []
    monkeypatch.setattr(tasks.build_stored_rows, "apply_async", lambda **kwargs: calls.append(kwargs))
    return calls


def test_settles_in_one_burst_send_one_build_after_commit(project, sent, settings):
    with transaction.atomic():
        for _ in range(3):
            stored.build_soon(project.pk)
        assert sent == []  # nothing before the commit: the worker would not see the settled rows
    assert sent == [{"args": [project.pk], "countdown": settings.EXPORTS_BUILD_DEBOUNCE_SECONDS}]
    stored.build_soon(project.pk)
    assert len(sent) == 1  # within the debounce: the build already sent covers it
    tasks.build_stored_rows(project.pk)  # the build starts: a settle from now on asks for its own
    stored.build_soon(project.pk)
    assert len(sent) == 2


def test_no_build_is_sent_when_the_transaction_rolls_back(project, sent):
    with pytest.raises(RuntimeError), transaction.atomic():
        stored.build_soon(project.pk)
        raise RuntimeError("the settle failed")
    assert sent == []


def test_a_broker_that_cannot_be_reached_does_not_fail_the_settle(project, settings, monkeypatch):
    from django.core.cache import cache

    settings.EXPORTS_BUILD_AHEAD = True
    cache.clear()

    def unreachable(**kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(tasks.build_stored_rows, "apply_async", unreachable)
    with transaction.atomic():
        job = Job.objects.create(project=project, kind="k", params={})
        stored.build_soon(project.pk)
    assert Job.objects.filter(pk=job.pk).exists()  # committed; the sweep or the next export derives the rows


def test_build_ahead_off_sends_nothing(project, sent, settings):
    settings.EXPORTS_BUILD_AHEAD = False
    with transaction.atomic():
        stored.build_soon(project.pk)
    assert sent == []


def test_the_workers_build_derives_the_projects_rows_for_the_default_filters(project, other_project):
    mine = [Job.objects.create(project=project, kind=f"k{i}", params={"copies": 2}) for i in range(3)]
    Job.objects.create(project=other_project, kind="theirs", params={})
    assert tasks.build_stored_rows(project.pk)[STORED_JOBS.name] == 3
    assert sorted(StoredRow.objects.filter(kind=STORED_JOBS.name).values_list("source_id", flat=True)) == sorted(
        job.pk for job in mine for _ in range(2))
    assert tasks.build_stored_rows(project.pk)[STORED_JOBS.name] == 0
    assert tasks.build_stored_rows(10 ** 9) == {}  # a project deleted since


def test_the_sweep_builds_every_project_and_drops_rows_of_kinds_gone(project, other_project):
    Job.objects.create(project=project, kind="k", params={})
    Job.objects.create(project=other_project, kind="k", params={})
    StoredRow.objects.create(kind="gone.kind", version=1, project=project, source_id=1, seq=0, row={"a": 1})
    result = tasks.sweep_stored_rows()
    assert result["dropped"] == 1
    # Every stored kind of jobs derives both projects' job, but the token kind, whose sources are its own "tok-" jobs.
    job_kinds = [kind for kind in stored.stored_kinds() if kind.stored.model is Job and kind is not STORED_TOKENS]
    assert result["derived"] == 2 * len(job_kinds)
    assert StoredRow.objects.filter(kind=STORED_JOBS.name).values("project").distinct().count() == 2


def test_a_build_while_the_model_backend_is_down_waits_for_the_next_sweep_or_export(project, monkeypatch, caplog):
    from dataplatform.inference import BackendUnavailable

    def down(project):
        raise BackendUnavailable("vLLM GET /v1/models: ConnectError")

    monkeypatch.setattr(stored, "build_project", down)
    assert tasks.build_stored_rows(project.pk) == {}
    assert "not built now: vLLM GET /v1/models: ConnectError" in caplog.text
