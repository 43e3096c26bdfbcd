import pytest

from dataplatform.accounts.models import Project
from dataplatform.demo.parts import SEED_KIND, seed_jobs_filling
from dataplatform.jobs.models import Job, JobState


@pytest.mark.django_db
def test_the_home_page_reads_each_projects_latest_seed_job_only():
    """The home page's progress: a project's latest demo.seed job while it has not succeeded; older runs, other
    kinds and other projects' jobs are left out."""
    first, second, third = (Project.objects.create(slug=slug, name=slug) for slug in ("one", "two", "three"))

    def job(project, state, kind=SEED_KIND):
        return Job.objects.create(project=project, kind=kind, params={}, state=state)

    job(first, JobState.FAILED)
    running = job(first, JobState.RUNNING)
    job(first, JobState.QUEUED, kind="platform.export")
    job(second, JobState.FAILED)
    job(second, JobState.SUCCEEDED)  # a rerun that succeeded: nothing is being filled in
    queued = job(third, JobState.QUEUED)
    filling = seed_jobs_filling(Project.objects.filter(pk__in=[first.pk, second.pk]))
    assert filling == {first.pk: running}
    assert seed_jobs_filling(Project.objects.all()) == {first.pk: running, third.pk: queued}
