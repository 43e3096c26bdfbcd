"""The seeds of bench/kinds_bench.py: each workflow's data filled through the platform's own code (the demo's parts,
importers, services and jobs), and the request that settles one of its sources, for the build-ahead hook's cost.
bench/kinds_data.py grows the seeds by SQL replication."""

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from dataplatform.accounts.models import Project

ROOT = Path(__file__).resolve().parent.parent


def _run_jobs(jobs) -> None:
    from dataplatform.jobs.models import JobState
    from dataplatform.jobs.services import execute_job

    for job in jobs:
        execute_job(job_id=job.pk)
        job.refresh_from_db()
        if job.state != JobState.SUCCEEDED:
            raise RuntimeError(f"seed job {job.pk} ({job.kind}) ended {job.state}: {job.error}")


# --- seeds: each workflow's data through its own importers, services and jobs -----------------------------

def seed_onpanda(project: Project, user, *, with_model: bool = True) -> None:
    """The onPanda app's .panda.json files (tests/fixtures/panda_app: finished sessions with corrections, tool calls,
    deleted dialogs), imported as an upload is; with the model also the demo's prompts, answered by the rollout job
    and accepted as they are by an annotator (claim, open, accept)."""
    from annotate import demo, services
    from annotate.panda_json.importer import import_panda_json

    imported = 0
    for path in sorted((ROOT / "tests" / "fixtures" / "panda_app").glob("*.panda.json")):
        report = import_panda_json(project=project, data=json.loads(path.read_text()), annotator=user, file=path.name)
        imported += bool(report.created)
    if not imported:
        raise RuntimeError("no .panda.json file imported")
    if with_model:
        _run_jobs(demo.prepare(project=project, user=user))
        while (claim := services.claim_with_session(project=project, annotator=user)) is not None:
            session = claim.session
            services.finish(session=session, version=session.version, actor=user, accept=True)


# Labels in the demo taxonomy's words (labeler/demo_data/swe_demo.yaml), domains routed to A, B, C, A, B, C, ...
_DOMAINS = [("web_backend", "http"), ("web_frontend", "forms"), ("devtools", "shell"), ("data", "sql"),
            ("media", "plots")]
HUMAN_LABELS = [{"task_type_l1": "bug-fix", "task_type_l2": ["crash" if n % 2 else "wrong-result"],
                 "domain_l1": _DOMAINS[n % 5][0], "domain_l2": [_DOMAINS[n % 5][1]]} for n in range(10)]


def seed_swe(project: Project, user, *, with_model: bool = True) -> None:
    """The demo's 24 SWE tasks and its taxonomy (labeler/demo.py), the first two labeled by the autolabel job with
    the model, one of them reviewed by a person; and the trajectory file of the importer's tests with its labels."""
    from labeler import demo, services
    from labeler.importers import import_trajectories
    from labeler.models import Label, SweTask

    jobs = demo.prepare(project=project, user=user)
    if with_model:
        _run_jobs(jobs)
    path = ROOT / "tests" / "fixtures" / "traces" / "swe_labeler_trajectories.jsonl"
    with path.open("rb") as lines:
        # The file's last line is not JSON (the importer's tests read its report): the other three import.
        import_trajectories(project=project, lines=lines, file=path.name, user=user, skip_bad_lines=True)
    label = Label.objects.filter(task__project=project, origin="model").order_by("id").first()
    if label is not None:
        review = services.start_review(item=label.task, reviewer=user)
        services.submit_label(label=review, version=review.version, actor=user)
    # A person labels ten more, across the routing categories (A, B, C: a balanced sample takes from each).
    unlabeled = SweTask.objects.filter(project=project, labels__isnull=True).order_by("id")[:len(HUMAN_LABELS)]
    for task, changes in zip(unlabeled, HUMAN_LABELS, strict=False):
        review = services.start_review(item=task, reviewer=user)
        review = services.edit_label(label=review, version=review.version, changes=changes, actor=user)
        services.submit_label(label=review, version=review.version, actor=user)


def seed_aed(project: Project, user, *, with_model: bool = True) -> None:
    """The AED export tests' corpus (cases graded A to D and ungraded, replays, recovery runs and a draft, curated
    through the services; the replays' runs written as a replay writes them, as the tests do: a replay's runs are
    the model's part), and with the model the demo's curated case replayed by the replay job."""
    from corpora.aed import demo
    from tests.corpora.aed.export_corpus import IN_CONTEXT_STEPS, build_corpus, recovery_with

    corpus = build_corpus(project, user)
    # Six more runs that recover, in a second recovery replay of case A: the corpus holds one recovery row for a
    # hundred rows of its tables, and the copies aed.recovery needs would outweigh the other kinds' tenfold.
    recovery_with(corpus["a_fix"], user, [(True, IN_CONTEXT_STEPS)] * 6)
    if with_model:
        _run_jobs(demo.prepare(project=project, user=user))


def seed_atd(project: Project, user, *, with_model: bool = True) -> None:
    """The demo's pool of twelve prompts scored by the model (corpora/atd/demo.py), its near ties frozen as a
    selection and answered by the model as the teacher (the atd.teacher job)."""
    from corpora.atd import demo, services
    from corpora.atd.models import Selection

    jobs = demo.prepare(project=project, user=user)
    if not with_model:
        return
    _run_jobs(jobs)
    demo.finish(project=project, user=user)
    selection = Selection.objects.filter(project=project).order_by("-id").first()
    _run_jobs([services.start_teacher(selection=selection, user=user, publish=False).job])


def seed_jobs(project: Project, user, *, with_model: bool = True) -> None:
    """Finished jobs: exports of the (empty) project run by their job, and one cancelled before it ran."""
    from dataplatform.exports import services as export_services
    from dataplatform.jobs.services import cancel_job

    for options in ({"kind": "platform.jobs", "format": "jsonl"}, {"kind": "platform.jobs", "format": "parquet"}):
        export = export_services.create_export(project=project, user=user, options=options)
        _run_jobs([export.job])
    export = export_services.create_export(project=project, user=user, options={"kind": "platform.jobs"})
    cancel_job(job=export.job)


# --- the requests that settle a source (where a stored kind's build_soon hook runs) ------------------------------

def submit_cases(project: Project, person, count: int) -> Iterator[Callable[[], object]]:
    """AED: `count` cases opened and filled by `person`, each handed over as its submit (the request timed)."""
    from corpora.aed import services
    from corpora.aed.models import Trace

    for trace in Trace.objects.filter(project=project).order_by("id")[:count]:
        case = services.open_case(trace=trace, curator=person)
        case = services.update_case(case=case, version=case.version, actor=person, changes={
            "error_step": 0, "category": "plan-error", "diagnosis": "The first step already goes wrong."})
        yield lambda case=case: services.submit_case(case=case, version=case.version, actor=person)


def submit_reviews(project: Project, person, count: int) -> Iterator[Callable[[], object]]:
    """SWE: `count` tasks labeled by `person`, each handed over as the label's submit (the request timed)."""
    from labeler import services
    from labeler.models import SweTask

    for n, task in enumerate(SweTask.objects.filter(project=project).order_by("id")[:count]):
        label = services.start_review(item=task, reviewer=person)
        label = services.edit_label(label=label, version=label.version, changes=HUMAN_LABELS[n % len(HUMAN_LABELS)],
                                    actor=person)
        yield lambda label=label: services.submit_label(label=label, version=label.version, actor=person)
