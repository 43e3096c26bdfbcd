"""AED cases graded A, B, C, D and ungraded, with replays, a recovery and a draft, written without a model: the
corpus the export tests read (here and tests/exports/test_trl_training.py)."""

import json

import pytest

from corpora.aed import services
from corpora.aed.importers import import_traces
from corpora.aed.models import ReplayRun, Trace

from ... import trace_fixtures
from ...calc_traces import make_demo_trace

# A passing corrected run of case "a" (error step 1): a note about the replayed prefix, the corrected
# action, then the policy's own answer.
RECOVERY_STEPS = [
    {"index": 0, "role": "assistant", "content": "calc 17 * 23", "action": "calc 17 * 23", "observation": "391",
     "stored_observation": "390", "origin": "prefix", "replayed": True},
    {"index": 1, "role": "assistant", "content": "calc 391 - 45", "action": "calc 391 - 45", "observation": "346",
     "origin": "corrected"},
    {"index": 2, "role": "assistant", "content": "answer 346\nThat is the result.", "action": "answer 346",
     "observation": "answer 346 is correct", "origin": "policy"},
]
# A recovery run of case "a" (arm E): the error executed again with its real observation, a step that makes no
# progress, then the one that passes.
IN_CONTEXT_STEPS = [
    {"index": 0, "role": "assistant", "content": "calc 17 * 23", "action": "calc 17 * 23", "observation": "391",
     "stored_observation": "390", "origin": "prefix", "replayed": True},
    {"index": 1, "role": "assistant", "content": "calc 391 + 45", "action": "calc 391 + 45", "observation": "436",
     "origin": "original", "score": 0.0},
    {"index": 2, "role": "assistant", "content": "calc 436 - 90", "action": "calc 436 - 90", "observation": "346",
     "origin": "policy", "score": 0.0, "progress": False},
    {"index": 3, "role": "assistant", "content": "answer 346", "action": "answer 346",
     "observation": "answer 346 is correct", "origin": "policy", "score": 1.0, "progress": True},
]
NO_PROGRESS = [{**IN_CONTEXT_STEPS[1]}, {"index": 2, "role": "assistant", "content": "answer 436", "action": "answer 436",
                                        "observation": "answer 436 is wrong", "origin": "policy", "score": 0.0,
                                        "progress": False}]


def trace_record(trace_id, expression, actions, **overrides):
    return make_demo_trace(expression, actions, trace_id=trace_id, policy_model="toy") | overrides


def import_all(project, *records):
    report = import_traces(project=project, lines=[json.dumps(r) for r in records], file=f"{records[0]['trace_id']}")
    assert report.ok, report.errors
    return {r["trace_id"]: Trace.objects.get(project=project, trace_id=r["trace_id"]) for r in records}


def curate(trace, curator, *, submit=True, **changes):
    case = services.open_case(trace=trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator, changes=changes)
    if submit:
        case = services.submit_case(case=case, version=case.version, actor=curator)
    return case


def recovery_with(proposal, user, runs, *, hint=False):
    """A recovery replay without a model: its arm-E runs written directly, (passed, steps) per run."""
    replay = services.start_replay(proposal=proposal, pairs=len(runs), mode="recovery", hint=hint, user=user,
                                   publish=False)
    for pair, (passed, steps) in enumerate(runs):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="E", seed=pair, passed=passed, steps=steps)
    return services.refresh_table(replay)


def openhands_tool_case(project, curator, *, accept_fix=False):
    """A submitted case on an OpenHands run whose error step is its edit call (step 5), replayed (the fix wins 6 of 6
    pairs) and recovered by a harness run: the edit call and its result as they happened, then the agent runs the
    tests. `accept_fix` also accepts the proposal."""
    lines = [trace_fixtures.body(trace_fixtures.OPENHANDS).splitlines()[0]]
    report = import_traces(project=project, lines=lines, file=trace_fixtures.OPENHANDS)
    assert report.ok, report.errors
    trace = Trace.objects.get(project=project)
    case = curate(trace, curator, error_step=5, category="tool-misuse", diagnosis="It edited before testing.",
                  evidence_check="supported")
    fix = services.add_proposal(case=case, actor=curator, corrected_action="Run the test first.")
    if accept_fix:
        services.set_proposal_status(proposal=fix, status="accepted", actor=curator)
    replay_with(fix, curator, [(True, False)] * 6)
    recovery = [{**trace.steps[5], "origin": "original"}, {**trace.steps[6], "origin": "original"},
                {"role": "assistant", "content": "", "origin": "policy", "progress": True, "tool_calls": [
                    {"id": "r1", "type": "function", "function": {"name": "execute_bash",
                                                                  "arguments": '{"command": "pytest -q"}'}}]},
                {"role": "tool", "tool_call_id": "r1", "name": "execute_bash", "content": "1 failed",
                 "origin": "policy"}]
    recovery_with(fix, curator, [(False, recovery)])
    return case


def replay_with(proposal, user, outcomes, steps=None, first_pair=0, replay=None):
    """A replay without a model: runs written directly, (C passed, R passed) per pair, then the table."""
    if replay is None:
        replay = services.start_replay(proposal=proposal, pairs=len(outcomes), user=user, publish=False)
    for pair, (c, r) in enumerate(outcomes, start=first_pair):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="C", seed=pair, passed=c,
                                 steps=(steps or {}).get(pair, []))
        ReplayRun.objects.create(replay=replay, pair=pair, arm="R", seed=pair, passed=r, steps=[])
    return services.refresh_table(replay)


@pytest.fixture
def corpus(project, members):
    """Submitted cases graded A, B, C, D and ungraded, and one draft, each on its own trace."""
    return build_corpus(project, members["curator"])


def build_corpus(project, curator):
    """The corpus fixture's cases in `project`, curated by `curator` (bench/kinds_data.py builds its AED data with
    it too)."""
    traces = import_all(
        project,
        # step 1 adds where it should subtract
        trace_record("t-a", "(17 * 23) - 45", ["calc 17 * 23", "calc 391 + 45", "answer 436"]),
        # step 0 adds where it should multiply: no prefix before the error
        trace_record("t-b", "(8 * 9) + 10", ["calc 8 + 9", "calc 17 + 10", "answer 27"]),
        trace_record("t-c", "(5 * 6) - 4", ["calc 5 * 6", "calc 30 + 4", "answer 34"], environment="other-env",
                     harness="swe-agent", policy_model="toy-2"),
        trace_record("t-d", "(2 * 3) + 1", ["calc 2 + 3", "answer 5"]),
        trace_record("t-u", "(4 * 4) + 4", ["calc 4 + 4", "answer 8"]),
        trace_record("t-draft", "(7 * 7) - 1", ["calc 7 + 7", "answer 14"]),
    )
    a = curate(traces["t-a"], curator, error_step=1, category="plan-error", diagnosis="It added 45 instead of "
               "subtracting it.", evidence=[{"step": 1, "quote": "436"}], evidence_check="supported")
    rejected = services.add_proposal(case=a, actor=curator, corrected_action="answer 346")
    services.set_proposal_status(proposal=rejected, status="rejected", actor=curator)
    a_fix = services.add_proposal(case=a, actor=curator, corrected_action="calc 391 - 45")
    services.set_proposal_status(proposal=a_fix, status="accepted", actor=curator)
    # pair 0: both arms fail; pairs 1-6: only the correction passes -> n10 = 6, p = 0.031 -> A
    a_replay = replay_with(a_fix, curator, [(False, False)] + [(True, False)] * 6, steps={1: RECOVERY_STEPS})
    # recovery in context: a run that gets nowhere (left out), then one that recovers
    a_recovery = recovery_with(a_fix, curator, [(False, NO_PROGRESS), (True, IN_CONTEXT_STEPS)], hint=True)

    b = curate(traces["t-b"], curator, error_step=0, category="tool-misuse", diagnosis="It added 8 and 9.",
               evidence_check="supported")
    b_fix = services.add_proposal(case=b, actor=curator, corrected_action="calc 8 * 9")
    b_accepted = services.add_proposal(case=b, actor=curator, corrected_action="calc 9 * 8")
    services.set_proposal_status(proposal=b_accepted, status="accepted", actor=curator)
    b_steps = [{"index": 0, "role": "assistant", "content": "calc 8 * 9", "action": "calc 8 * 9", "observation": "72",
                "origin": "corrected"},
               {"index": 1, "role": "assistant", "content": "", "action": "calc 72 + 10", "observation": "82",
                "origin": "policy"},
               {"index": 2, "role": "assistant", "content": "answer 82", "action": "answer 82",
                "observation": "answer 82 is correct", "origin": "policy"}]
    # pair 0 passes in both arms, pair 1 only with the correction: net gain 0.5, not significant -> B
    b_replay = replay_with(b_fix, curator, [(True, True), (True, False)], steps={0: b_steps})

    c = curate(traces["t-c"], curator, error_step=1, category="ignored-observation", diagnosis="It added 4.",
               evidence_check="supported")
    c_fix = services.add_proposal(case=c, actor=curator, corrected_action="calc 30 - 4")
    d = curate(traces["t-d"], curator, error_step=0, category="plan-error", diagnosis="It added.",
               evidence_check="contradicted")
    u = curate(traces["t-u"], curator, error_step=0, category="plan-error", diagnosis="It added.")
    draft = curate(traces["t-draft"], curator, submit=False, error_step=0, category="plan-error",
                   diagnosis="It added.", evidence_check="supported")
    draft_fix = services.add_proposal(case=draft, actor=curator, corrected_action="calc 7 * 7")
    replay_with(draft_fix, curator, [(True, False)] * 6)
    return {"a": a, "b": b, "c": c, "d": d, "u": u, "draft": draft, "a_fix": a_fix, "a_replay": a_replay,
            "a_recovery": a_recovery,
            "b_fix": b_fix, "b_accepted": b_accepted, "b_replay": b_replay, "c_fix": c_fix, "traces": traces}

