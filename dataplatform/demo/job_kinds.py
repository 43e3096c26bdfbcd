"""The `demo.seed` job kind: it runs the demo parts' model jobs one after the other, then each part's `finish`,
logs "Demo ready", and queues the parts' `later` jobs (see the package's docstring)."""

import logging
import time

from django.utils.translation import gettext_noop
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID
from dataplatform.errors import Transient
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.registry import JobKind, register
from dataplatform.status import Status

from .parts import SEED_KIND, parts, summary_lines

logger = logging.getLogger(__name__)


class DemoIncomplete(Exception):
    """A demo job did not succeed: the seed job fails, and the next bootstrap_demo queues what is missing."""


class SeedParams(serializers.Serializer):
    started_at = serializers.FloatField(min_value=0, help_text="when bootstrap_demo started (Unix time)")
    since = serializers.CharField(max_length=40, default="bootstrap_demo", help_text="what started then")
    jobs = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=MAX_ID), max_length=20, default=list,
                                 help_text="the demo's jobs, run in this order")


def _say(line: str) -> None:
    """One line for whoever watches the worker's output (`make run` shows it)."""
    logger.warning(line)


def run_seed(job: Job, progress) -> dict:
    ids = job.params["jobs"]
    progress.set_total(len(ids) + 1)
    ran = []
    for n, job_id in enumerate(ids):
        child = Job.objects.get(pk=job_id, project=job.project)
        progress.report(n, message=Status(
            gettext_noop("Running job %(job)s (%(kind)s), %(n)s of %(total)s"), job=str(child.pk),
            kind=child.kind, n=n + 1, total=len(ids)), force=True)
        began = time.monotonic()
        if not child.is_terminal:
            try:
                job_services.execute_job(job_id=child.pk)
            except Transient as exc:  # the seed does not wait out an outage: a rerun of bootstrap_demo retries
                job_services.fail_job(job_id=child.pk, error=str(exc))
        child.refresh_from_db()
        seconds = round(time.monotonic() - began, 1)
        ran.append({"job": child.pk, "kind": child.kind, "state": child.state, "seconds": seconds})
        _say(f"Demo: job {child.pk} ({child.kind}) {child.state} in {seconds} s"
             f"{': ' + child.error[:300] if child.error else ''}")
    progress.report(len(ids), message=Status(gettext_noop("Finishing")), force=True)
    failed = [run for run in ran if run["state"] != JobState.SUCCEEDED]
    if failed:
        raise DemoIncomplete("Demo job(s) did not succeed: " + ", ".join(f"{run['job']} ({run['kind']}, {run['state']})"
                                                                       for run in failed)
                             + ". Run `manage.py bootstrap_demo` again to queue what is missing.")
    finished = []
    for part in parts():
        if part.finish is not None:
            finished.append(f"{part.name}: {part.finish(project=job.project, user=job.created_by)}")
    missing = [part.name for part in parts() if not part.ready(job.project)]
    if missing:
        raise DemoIncomplete(f"The demo jobs ran but {', '.join(missing)} still show(s) no model output.")
    after = round(time.time() - job.params["started_at"], 1)
    took = ", ".join(f"{run['kind']} {run['seconds']} s" for run in ran)
    since = job.params.get("since", "bootstrap_demo")
    _say(f"Demo ready: data in all {len(parts())} workflows, {after} s after {since} started ({took}).")
    for line in finished:
        _say(f"Demo: {line}")
    later = [queued for part in parts() if part.later is not None
             for queued in part.later(project=job.project, user=job.created_by)]
    for queued in later:
        _say(f"Demo: queued job {queued.pk} ({queued.kind}) to go on in the background")
    return {"ready_after_seconds": after, "since": since, "jobs": ran, "finished": finished,
            "later": [queued.pk for queued in later], "summary": summary_lines(job.project)}


register(JobKind(
    name=SEED_KIND,
    label="Fill the demo project",
    description="Runs the demo's model jobs one after the other (onPanda rollouts, SWE auto-labeling, an AED "
                "replay, ATD scoring), then freezes the ATD selection; queued by `manage.py bootstrap_demo`.",
    params_serializer=SeedParams,
    run=run_seed,
))
