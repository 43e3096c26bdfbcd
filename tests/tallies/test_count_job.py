"""Kept figures never counted on a web request: a project made by the service is counted from birth, and a project
made before a tally existed is counted by the `tallies.count` job queued after migrate."""

import pytest
from django.core.management.sql import emit_post_migrate_signal
from django.db import transaction
from django.db.models import Count

from dataplatform.accounts.services import create_project
from dataplatform.audit import services as audit
from dataplatform.audit.models import Action, AuditEvent
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import execute_job
from dataplatform.tallies import job_kinds, registry, selectors, services
from dataplatform.tallies.models import TallyStart
from dataplatform.tallies.registry import Figure
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

EXPORTS_CREATED = "export_created_count"


def _recount(project_id: int) -> dict[str, Figure]:
    rows = AuditEvent.objects.filter(project_id=project_id, action=Action.EXPORT_CREATED).aggregate(n=Count("id"))
    return {EXPORTS_CREATED: Figure(rows["n"])} if rows["n"] else {}


EXPORTS = registry.define("tests.count_job_exports", tables=(AuditEvent,), recount=_recount)


def record_export(project):
    with transaction.atomic():
        audit.record(action=Action.EXPORT_CREATED, project=project)
        services.add(project.pk, EXPORTS, {EXPORTS_CREATED: 1})


@pytest.fixture
def no_counting(monkeypatch):
    def refuse(project_id, name, **kwargs):
        raise AssertionError(f"{name} was counted")
    monkeypatch.setattr(services, "count_now", refuse)


def test_a_new_projects_figures_are_kept_from_birth_without_a_count(no_counting):
    project = create_project(slug="fresh", name="Fresh")
    assert set(TallyStart.objects.filter(project=project).values_list("name", flat=True)) == {
        tally.name for tally in registry.defined()}
    assert services.uncounted(project.pk) == []
    record_export(project)
    record_export(project)
    assert selectors.counts(project.pk, EXPORTS) == {EXPORTS_CREATED: 2} == {
        key: figure.count for key, figure in _recount(project.pk).items()}
    assert selectors.counts(project.pk, "annotate.queue") == {}  # a workflow's tally: all zero, not counted


def test_the_job_counts_a_projects_uncounted_tallies():
    older = ProjectFactory(slug="older")  # made without the service: as a project made before its tallies existed
    audit.record(action=Action.EXPORT_CREATED, project=older)
    TallyStart.objects.create(project=older, name="annotate.queue")  # one counted already
    job = Job.objects.create(project=older, kind=job_kinds.COUNT_KIND, params={})
    execute_job(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error
    assert "annotate.queue" not in job.result["counted"] and EXPORTS in job.result["counted"]
    assert (job.progress_done, job.progress_total) == (len(job.result["counted"]),) * 2
    assert services.uncounted(older.pk) == []
    assert selectors.counts(older.pk, EXPORTS) == {EXPORTS_CREATED: 1}


def test_migrate_queues_one_count_per_project_with_uncounted_tallies(no_counting):
    older = ProjectFactory(slug="older")
    fresh = create_project(slug="fresh", name="Fresh")
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    queued = Job.objects.filter(kind=job_kinds.COUNT_KIND)
    assert list(queued.values_list("project_id", "state")) == [(older.pk, JobState.QUEUED)]
    assert job_kinds.queue_counts() == []  # one is waiting already
    assert not queued.filter(project=fresh).exists()


def test_a_full_queue_leaves_the_count_to_the_first_read(settings, caplog):
    settings.JOB_MAX_QUEUED_PER_PROJECT = 1
    older = ProjectFactory(slug="older")
    Job.objects.create(project=older, kind="other.kind", params={}, state=JobState.QUEUED)
    assert job_kinds.queue_counts() == []
    assert "Could not queue the count of older's kept figures" in caplog.text
    audit.record(action=Action.EXPORT_CREATED, project=older)
    assert selectors.counts(older.pk, EXPORTS) == {EXPORTS_CREATED: 1}  # the first read counts
