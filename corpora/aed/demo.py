"""AED's part of the demo project (dataplatform/demo/).

Four calc-v1 failure traces written for the demo (demo_data/traces.jsonl: each step run through calc_env, so
every observation is the environment's own), imported as an upload is. The first is curated as a curator would
on its page: a case opened, the first decisive error step marked (step 1 adds 45 where the task subtracts it),
a category, a diagnosis with its evidence, the case submitted, and a corrected action proposed and replayed
(an `aed.replay` job: pairs on the builtin runner, the embedded model as the policy), which grades the case.
The other three are left for the newcomer to curate.
"""

from pathlib import Path

from dataplatform.accounts.models import Project
from dataplatform.demo.parts import DemoPart
from dataplatform.jobs.models import Job, JobState

from . import importers, services
from .models import Case, CaseStatus, EvidenceCheck, Replay, ReplayRun, Trace

TRACES = Path(__file__).parent / "demo_data" / "traces.jsonl"
CURATED = "demo-calc-sign"
DIAGNOSIS = {
    "error_step": 1,
    "category": "requirement-misread",
    "diagnosis": "The task subtracts 45 from 17 * 23, but step 1 adds it: every later step works from 436 "
                 "instead of 346, so the answer is wrong.",
    "evidence": [{"step": 1, "quote": "calc 391 + 45"}, {"step": 2, "quote": "answer 436"}],
    "evidence_check": EvidenceCheck.SUPPORTED,
}
CORRECTED_ACTION = "calc 391 - 45"
# Two pairs: enough to show both arms side by side within the demo's two minutes (the four runs go through
# the model together); a grade of A needs six, which the curator can replay with the form.
PAIRS = 2
# The replay form's defaults, but four steps (the corrected step 1, then an answer) and 16 tokens a step (an
# action is one short line): the replay then takes about 30 s on 2 cores.
OPTIONS = {"max_steps": 4, "temperature": 0.7, "max_tokens": 16}


def _curated_case(trace: Trace, user) -> Case:
    case = services.open_case(trace=trace, curator=user)
    if case.status == CaseStatus.SUBMITTED:
        return case
    case = services.update_case(case=case, version=case.version, actor=user, changes=DIAGNOSIS)
    return services.submit_case(case=case, version=case.version, actor=user)


def prepare(*, project: Project, user) -> list[Job]:
    with TRACES.open("rb") as lines:
        report = importers.import_traces(project=project, lines=lines, file=TRACES.name, user=user)
    if report.errors:
        raise ValueError(f"The demo's {TRACES.name} does not import: {report.errors[:3]}")
    case = _curated_case(Trace.objects.get(project=project, trace_id=CURATED), user)
    proposal = case.proposals.order_by("id").first() or services.add_proposal(
        case=case, actor=user, corrected_action=CORRECTED_ACTION,
        rationale="Subtract 45, as the task says; the answer is then 346.")
    replay = Replay.objects.filter(proposal=proposal).select_related("job").order_by("-id").first()
    if replay is not None and _finished(replay):
        return []
    if replay is not None and replay.job is not None and replay.job.state in (JobState.QUEUED, JobState.RUNNING):
        return [replay.job]  # queued by an earlier bootstrap: the seed job runs it
    return [services.start_replay(proposal=proposal, pairs=PAIRS, options=OPTIONS, user=user,
                                   publish=False).job]


def _finished(replay: Replay) -> bool:
    return ReplayRun.objects.filter(replay=replay).count() >= 2 * replay.pairs


def _demo_replay(project: Project) -> Replay | None:
    return (Replay.objects.filter(proposal__case__trace__project=project, proposal__case__trace__trace_id=CURATED)
            .order_by("-id").first())


def summary(project: Project) -> str:
    replay = _demo_replay(project)
    runs = ReplayRun.objects.filter(replay=replay).count() if replay else 0
    return (f"{Trace.objects.filter(project=project).count()} traces, "
            f"{Case.objects.filter(trace__project=project, status=CaseStatus.SUBMITTED).count()} curated, "
            f"{runs} of {2 * replay.pairs if replay else 0} replay runs")


def ready(project: Project) -> bool:
    replay = _demo_replay(project)
    return replay is not None and _finished(replay)


PART = DemoPart(name="AED", prepare=prepare, summary=summary, ready=ready)
