"""The demo's parts: each app registers one from its own `demo.py` (see the package's docstring), and
`prepare_demo` imports their sample data and queues the `demo.seed` job (job_kinds.py) that runs their model work."""


from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps
from django.db import transaction
from django.db.models import Max
from django.utils.module_loading import autodiscover_modules

from dataplatform.accounts.models import Project
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job, JobState

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
    latest_ids = (Job.objects.filter(project__in=projects, kind=SEED_KIND).order_by()
                  .values("project_id").annotate(latest=Max("id")).values("latest"))
    return {job.project_id: job for job in Job.objects.filter(pk__in=latest_ids).exclude(state=JobState.SUCCEEDED)}


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
