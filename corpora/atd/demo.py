"""ATD's part of the demo project (dataplatform/demo/).

A pool of twelve prompts written for the demo (demo_data/pool.jsonl, English and Chinese), each with two
candidate answers, imported as an upload is; an `atd.score` job scores it (by the candidates' mean token
likelihood), the job *Score the pool* starts. Once it has run, `finish` freezes a selection of the near ties, as a curator does
after moving epsilon: the smallest epsilon of a few round ones that keeps at least a quarter of the pool.
"""

from pathlib import Path

from dataplatform.accounts.models import Project
from dataplatform.demo.parts import DemoPart
from dataplatform.jobs.models import Job, JobState

from . import importers, selectors, services
from .models import AtdPrompt, Score, ScoringMethod, ScoringRun, Selection

POOL = Path(__file__).parent / "demo_data" / "pool.jsonl"
SELECTION = "demo-near-ties"
EPSILONS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5)
# The embedded 135M model as a judge prefers one position so strongly that every near tie is left out as
# position-biased; the length-normalized likelihood of each candidate has no positions, and takes ~7 s here.
METHOD = ScoringMethod.LIKELIHOOD_MEAN


def _run(project: Project) -> ScoringRun | None:
    return ScoringRun.objects.filter(project=project).select_related("job").order_by("-id").first()


def _scored(run: ScoringRun) -> bool:
    return Score.objects.filter(run=run).count() >= AtdPrompt.objects.filter(project=run.project).count()


def prepare(*, project: Project, user) -> list[Job]:
    with POOL.open("rb") as lines:
        report = importers.import_prompts(project=project, lines=lines, file=POOL.name, user=user)
    if report.errors:
        raise ValueError(f"The demo's {POOL.name} does not import: {report.errors[:3]}")
    run = _run(project)
    if run is not None and _scored(run):
        return []
    if run is not None and run.job is not None and run.job.state in (JobState.QUEUED, JobState.RUNNING):
        return [run.job]  # queued by an earlier bootstrap: the seed job runs it
    return [services.start_scoring(project=project, method=METHOD, user=user, publish=False).job]


def epsilon_for(run: ScoringRun) -> float:
    """The smallest of EPSILONS that keeps at least a quarter of the pool (position-biased ties left out)."""
    wanted = max(1, AtdPrompt.objects.filter(project=run.project).count() // 4)
    return next((e for e in EPSILONS if selectors.kept_count(run, e) >= wanted), EPSILONS[-1])


def finish(*, project: Project, user) -> str:
    run = _run(project)
    found = Selection.objects.filter(project=project, name=SELECTION).order_by("-version").first()
    if found is None:
        found = services.freeze_selection(run=run, name=SELECTION, epsilon=epsilon_for(run), user=user)
    return f"selection {found.name!r} v{found.version} frozen at epsilon {found.epsilon:g}: {found.size} near ties"


def summary(project: Project) -> str:
    run = _run(project)
    scored = Score.objects.filter(run=run).count() if run else 0
    selections = Selection.objects.filter(project=project).count()
    return (f"{AtdPrompt.objects.filter(project=project).count()} prompts, {scored} scored, "
            f"{selections} frozen selection{'s' if selections != 1 else ''}")


def ready(project: Project) -> bool:
    run = _run(project)
    return run is not None and _scored(run) and Selection.objects.filter(project=project).exists()


PART = DemoPart(name="ATD", prepare=prepare, summary=summary, ready=ready, finish=finish)
