"""The demo project that `make run` fills: sample data in every workflow, its model work done by jobs.

Each app contributes a part from its own `demo.py` (found at start-up like `job_kinds.py`) with
`register(DemoPart(...))`; the platform never imports the apps. `manage.py bootstrap_demo` calls `prepare_demo`:

1. each part imports its sample data (files under `<app>/demo_data/`) through the app's own importers and
   services, as a user's upload and clicks would (imports skip what they already hold, by source hash), and
   returns the jobs its model work still needs, created with `enqueue_job(publish=False)`: each has its own
   row and page with a progress bar (onPanda's rollouts, the SWE auto-labeler, an AED replay, ATD scoring);
2. one `demo.seed` job is queued. The worker runs those jobs one after the other (`execute_job`, the same
   path a worker takes), then each part's `finish` (ATD freezes its selection once scoring is done), logs
   "Demo ready: ... N s after bootstrap_demo started", and queues each part's `later` jobs (the SWE
   auto-labeler's remaining tasks), which fill the pages further in the background.

Idempotent: a demo.seed job that is queued, running or succeeded means nothing is queued again; after a failed
one, a rerun queues only the work that is still missing.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps
from django.db import transaction
from django.utils.module_loading import autodiscover_modules
from rest_framework import serializers

from dataplatform.accounts.models import Project
from dataplatform.apiutils import MAX_ID
from dataplatform.errors import Transient
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.registry import JobKind
from dataplatform.jobs.registry import register as register_kind

logger = logging.getLogger(__name__)

SEED_KIND = "demo.seed"


@dataclass(frozen=True)
class DemoPart:
    name: str  # the workflow, as the pages name it ("onPanda", "SWE Labeler", "AED", "ATD")
    # prepare(project=, user=) -> the jobs its model work still needs, created and not sent (none when done)
    prepare: Callable[..., list[Job]]
    # summary(project) -> one line of what the project holds in this workflow
    summary: Callable[[Project], str]
    # ready(project) -> whether the workflow shows data with the model's output
    ready: Callable[[Project], bool]
    # finish(project=, user=) -> a line about what it did, after every demo job ran (None: nothing to do)
    finish: Callable[..., str] | None = None
    # later(project=, user=) -> jobs queued (sent to the workers) once the demo is ready: more of the same work,
    # too slow for the demo's two minutes, that fills the pages further in the background
    later: Callable[..., list[Job]] | None = None
    # The seed job runs the parts' jobs by this, then in INSTALLED_APPS order: the slow ones last, so that the
    # pages fill fast.
    order: int = 0


_PARTS: dict[str, DemoPart] = {}


def register(part: DemoPart) -> DemoPart:
    if _PARTS.get(part.name, part) is not part:
        raise ValueError(f"Demo part {part.name!r} is registered twice.")
    _PARTS[part.name] = part
    return part


def _app_index(part: DemoPart) -> int:
    """The position in INSTALLED_APPS of the app whose module registered `part`."""
    module = part.prepare.__module__
    names = [config.name for config in apps.get_app_configs()]
    return next((index for index, name in enumerate(names) if module == name or module.startswith(name + ".")),
                len(names))


def parts() -> list[DemoPart]:
    """Every app's part, in the order of INSTALLED_APPS (onPanda, SWE Labeler, AED, ATD), whichever module
    happened to be imported first; an app's own parts in the order it registers them."""
    autodiscover_modules("demo")  # imports each app's demo.py once (then it is in sys.modules)
    return sorted(_PARTS.values(), key=_app_index)


@dataclass
class Prepared:
    seed: Job  # the demo.seed job: the one just queued, or the one found
    queued: bool  # False: an earlier bootstrap's seed job is queued, running or done, and nothing was queued
    jobs: list[Job]


def unfinished_job(project: Project, kind: str) -> Job | None:
    """The project's latest job of `kind` that is queued or running: one an earlier bootstrap created and whose
    seed job did not get to run it. A part hands it back rather than creating a second one."""
    return (Job.objects.filter(project=project, kind=kind, state__in=[JobState.QUEUED, JobState.RUNNING])
            .order_by("-id").first())


def seed_job_of(project: Project) -> Job | None:
    """The demo project's latest demo.seed job."""
    return Job.objects.filter(project=project, kind=SEED_KIND).order_by("-id").first()


def seed_jobs_filling(projects) -> dict[int, Job]:
    """project id -> its latest demo.seed job while that has not succeeded: the home page shows its progress,
    so a newcomer sees the sample data arrive."""
    latest = {}
    for job in Job.objects.filter(project__in=projects, kind=SEED_KIND).order_by("id"):
        latest[job.project_id] = job
    return {project_id: job for project_id, job in latest.items() if job.state != JobState.SUCCEEDED}


def prepare_demo(*, project: Project, user, started_at: float, since: str = "bootstrap_demo") -> Prepared:
    """Import every part's sample data and queue one demo.seed job to run their model work (see the module
    docstring). `started_at` (a Unix time) is what the worker's "Demo ready" line counts from, and `since` names
    it: when bootstrap_demo, or `make run`, started."""
    found = seed_job_of(project)
    if found is not None and found.state in (JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED):
        return Prepared(seed=found, queued=False, jobs=list(Job.objects.filter(pk__in=found.params.get("jobs", []))))
    jobs: list[Job] = []
    with transaction.atomic():
        for part in sorted(parts(), key=lambda part: part.order):
            jobs += part.prepare(project=project, user=user)
        seed = job_services.enqueue_job(project=project, kind=SEED_KIND, user=user,
                                        params={"started_at": started_at, "since": since,
                                                "jobs": [job.pk for job in jobs]})
    return Prepared(seed=seed, queued=True, jobs=jobs)


def summary_lines(project: Project) -> list[str]:
    return [f"{part.name}: {part.summary(project)}" for part in parts()]


# --- the demo.seed job kind ----------------------------------------------------------------------------

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
        progress.report(n, message=job_services.Status(
            job_services.gettext_noop("Running job %(job)s (%(kind)s), %(n)s of %(total)s"), job=str(child.pk),
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
    progress.report(len(ids), message=job_services.Status(job_services.gettext_noop("Finishing")), force=True)
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


register_kind(JobKind(
    name=SEED_KIND,
    label="Fill the demo project",
    description="Runs the demo's model jobs one after the other (onPanda rollouts, SWE auto-labeling, an AED "
                "replay, ATD scoring), then freezes the ATD selection; queued by `manage.py bootstrap_demo`.",
    params_serializer=SeedParams,
    run=run_seed,
))
