"""`tallies.count`: count a project's kept figures that were never counted (a project made before the tally
existed), on a worker, where no statement timeout applies; queued for every such project after migrate (apps.py)."""

import logging

from django.db.models import Count, Q
from django.utils.translation import gettext_lazy

from dataplatform.accounts.models import Project
from dataplatform.errors import Unavailable
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.registry import JobKind, NoParams, register
from dataplatform.jobs.services import JobQueueFull, enqueue_job

from . import services
from .models import TallyStart
from .registry import defined

logger = logging.getLogger(__name__)
COUNT_KIND = "tallies.count"


def run_count(job, progress) -> dict:
    names = services.uncounted(job.project_id)
    progress.set_total(len(names))
    for done, name in enumerate(names, 1):
        services.count_now(job.project_id, name)  # a tally counted meanwhile (a first read) is left as it is
        progress.report(done, message=name, force=True)
    return {"counted": names}


register(JobKind(
    name=COUNT_KIND,
    label=gettext_lazy("Count kept figures"),
    description=gettext_lazy("Counts the figures a project's pages show (states, metrics, agreement) once, from "
                             "its tables; from then on every change keeps them."),
    params_serializer=NoParams,
    run=run_count,
))


def queue_counts() -> list[Job]:
    """Queue a `tallies.count` job for every project with a tally never counted and no such job waiting or
    running. A project made since tallies exist has every one counted from birth (`start_new_project`)."""
    names = [tally.name for tally in defined()]
    complete = (TallyStart.objects.filter(name__in=names).values("project_id")
                .annotate(n=Count("id")).filter(n=len(names)).values("project_id"))
    pending = Job.objects.filter(kind=COUNT_KIND, state__in=[JobState.QUEUED, JobState.RUNNING]).values("project_id")
    queued = []
    for project in Project.objects.exclude(Q(pk__in=complete) | Q(pk__in=pending)).order_by("pk"):
        try:
            queued.append(enqueue_job(project=project, kind=COUNT_KIND, params={}, user=None))
        except (JobQueueFull, Unavailable) as exc:  # the first read counts it instead: nothing is lost
            logger.warning("Could not queue the count of %s's kept figures: %s", project.slug, exc)
    return queued
