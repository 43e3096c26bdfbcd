"""AED test data the page, service and browser tests share: demo traces imported, cases curated, replays recorded."""

import json

from corpora.aed import services
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, Proposal, Replay, ReplayRun, Trace
from dataplatform.jobs.models import Job, JobState

from ...calc_traces import make_demo_trace

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"
HX = {"HTTP_HX_REQUEST": "true"}
ACTIONS = ["calc 17 * 23", "calc 391 - 54", "answer 337"]  # the goal is 346: step 1 subtracts the wrong number


def add_traces(project, *records):
    report = import_traces(project=project, lines=[json.dumps(r) for r in records])
    assert report.ok, report.as_dict()
    return [Trace.objects.get(project=project, trace_id=r["trace_id"]) for r in records]


def demo(trace_id: str = "t-1", **fields) -> dict:
    return {**make_demo_trace("(17*23)-45", ACTIONS, trace_id=trace_id, policy_model="policy-a"), **fields}


def edit(case, actor, **changes):
    return services.update_case(case=case, version=case.version, actor=actor, changes=changes)


def complete(case: Case, curator) -> Case:
    return services.update_case(case=case, version=case.version, actor=curator, changes={
        "error_step": 1, "category": "tool-misuse", "diagnosis": "Subtracted 54 instead of 45."})


def replay_with(proposal: Proposal, user, outcomes: list[tuple[bool, bool]]) -> Replay:
    """A replay whose runs are already recorded: (C passed, R passed) per pair; its job succeeded."""
    replay = services.start_replay(proposal=proposal, pairs=len(outcomes), user=user, publish=False)
    for pair, (c, r) in enumerate(outcomes):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="C", seed=pair, passed=c)
        ReplayRun.objects.create(replay=replay, pair=pair, arm="R", seed=pair, passed=r)
    Job.objects.filter(pk=replay.job_id).update(state=JobState.SUCCEEDED, progress_done=2 * len(outcomes),
                                                progress_total=2 * len(outcomes))
    return services.refresh_table(replay)
