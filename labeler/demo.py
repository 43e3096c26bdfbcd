"""The SWE Labeler's part of the demo project (dataplatform/demo/).

24 SWE-bench-style tasks written for the demo (demo_data/tasks.jsonl: small made-up repositories, each with an
issue, a patch, a test patch and the repository's description), imported as an upload is, and labeled by
`labeler.autolabel` jobs, the job *Run auto-labeling* starts: the first LABELED_FIRST within the demo's two
minutes, the rest in the background once the demo is ready.

The project pins a small taxonomy (demo_data/swe_demo.yaml: 10 families, 20 tags, no dimensions), loaded as a
curator loads one, rather than swe_v2, a new project's default (the paper's structure): its stage-one prompt is
~2,800 tokens against ~600 and asks five fields against two, so the CPU model spends ~4x the CPU time on a task
(measured on these tasks: 103 s against 24 s of CPU for one, on a busy machine; about a minute a task on 2 quiet
cores). The demo's two tasks would double its wait, and the other 22 keep its one worker busy for ~20 minutes,
ahead of the first job a newcomer starts. The taxonomy's title says so on the overview page; pin swe_v2 for real
work.
"""

from pathlib import Path

from dataplatform.accounts.models import Project
from dataplatform.demo.parts import DemoPart, register, unfinished_job
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import Job

from . import importers, services
from .models import Label, LabelOrigin, SweTask

DATA = Path(__file__).parent / "demo_data"
TASKS = DATA / "tasks.jsonl"
TAXONOMY = DATA / "swe_demo.yaml"
TAXONOMY_NAME = "swe-demo"  # its name inside
# Both stages of a task fit in it (a rationale of at most 160 characters before each field).
MAX_TOKENS = 160
# Auto-labeling costs the CPU model about 12 s a task on 2 cores (two stages of ~600 prompt tokens and ~120
# constrained answer tokens each), so the demo's two minutes hold LABELED_FIRST tasks, in one batch; once the
# demo is ready, a second job labels the rest in the background (about 4 minutes).
LABELED_FIRST = 2
BATCH_SIZE = 8


def prepare(*, project: Project, user) -> list[Job]:
    with TASKS.open("rb") as lines:
        report = importers.import_tasks(project=project, lines=lines, file=TASKS.name, user=user)
    if report.errors:
        raise ValueError(f"The demo's {TASKS.name} does not import: {report.errors[:3]}")
    if report.created:  # the first import only: later the project's settings are the user's
        taxonomy = services.load_taxonomy(text=TAXONOMY.read_text(encoding="utf-8"), filename=TAXONOMY.name,
                                          user=user)
        services.update_settings(project=project, taxonomy=taxonomy, max_tokens=MAX_TOKENS, batch_size=BATCH_SIZE)
    if _model_labels(project).count() >= LABELED_FIRST:
        return []
    job = unfinished_job(project, "labeler.autolabel") or job_services.enqueue_job(
        project=project, kind="labeler.autolabel", params={"limit": LABELED_FIRST}, user=user, publish=False)
    return [job]


def later(*, project: Project, user) -> list[Job]:
    """The other tasks, labeled in the background once the demo is ready (the job *Run auto-labeling* starts)."""
    if not services.to_autolabel(project, services.settings_for(project).taxonomy).exists():
        return []
    if unfinished_job(project, "labeler.autolabel") is not None:
        return []
    return [job_services.enqueue_job(project=project, kind="labeler.autolabel", params={}, user=user)]


def _model_labels(project: Project):
    return Label.objects.filter(project=project, task__isnull=False, origin=LabelOrigin.MODEL,
                                taxonomy=services.settings_for(project).taxonomy)


def summary(project: Project) -> str:
    taxonomy = services.settings_for(project).taxonomy
    why = " (the demo's small taxonomy, for the CPU model's sake: new projects start on swe_v2)" if (
        taxonomy.name == TAXONOMY_NAME) else ""
    return (f"{SweTask.objects.filter(project=project).count()} tasks, "
            f"{_model_labels(project).count()} labeled by the model under {taxonomy}{why}")


def ready(project: Project) -> bool:
    tasks = SweTask.objects.filter(project=project).count()
    return tasks > 0 and _model_labels(project).count() >= min(tasks, LABELED_FIRST)


register(DemoPart(name="SWE Labeler", prepare=prepare, summary=summary, ready=ready, later=later, order=1))
