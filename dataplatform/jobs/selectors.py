"""Reads of jobs, scoped to what the requesting user may see."""

from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_SEE_JOBS, visible_projects
from dataplatform.pagination import after_in_project

from .models import Job


def jobs_visible_to(user, *, token: ApiToken | None = None) -> QuerySet[Job]:
    projects = visible_projects(user, roles=CAN_SEE_JOBS, token=token)
    return Job.objects.filter(project__in=projects).select_related("project", "created_by")


def jobs_of_project(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[Job]:
    return jobs_visible_to(user, token=token).filter(project=project)


def job_for(user, job_id: int, *, token: ApiToken | None = None) -> Job:
    job = jobs_visible_to(user, token=token).filter(pk=job_id).first()
    if job is None:
        raise Http404(gettext("No such job."))
    return job


def latest_jobs(user, project: Project, *, before: int | None = None, limit: int = 20) -> tuple[list[Job], int | None]:
    """The project's newest `limit` jobs the user may see (older than job `before`, when given), and the cursor
    of the next older page (None when there is none)."""
    jobs = after_in_project(jobs_of_project(user, project), project.pk, before, descending=True)
    page = list(jobs.order_by("-id")[: limit + 1])
    return page[:limit], page[limit - 1].pk if len(page) > limit else None
