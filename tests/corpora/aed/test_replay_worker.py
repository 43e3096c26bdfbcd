"""A two-arm replay of a calc-v1 correction on a live Celery worker, with the real CPU model as policy,
surviving a SIGKILLed worker."""

import time

import pytest

from corpora.aed import services
from corpora.aed.models import ReplayRun
from dataplatform.jobs.models import JobState

from ...worker import QUICK_REAPER, wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True)]


def test_builtin_replay_on_the_worker_fills_the_table_even_when_the_worker_is_killed(calc_trace, members,
                                                                                      start_worker):
    """The replay runs on a live worker with the real model; the worker is SIGKILLed after the first
    run is saved, and a new worker's reaper queues the job again: it resumes without redoing a run."""
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "17 * 32 is wrong"})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    first = start_worker(**QUICK_REAPER)
    # Two pairs, at most 3 steps in all (the step before the error step, the corrected or resampled one, one
    # more), 12 tokens a step: a few short batched generations on 2 cores. The runs go side by side: the arms C
    # ask the policy once and end with the first round, the arms R ask twice (unless they answer at once), so
    # the kill lands in round 2.
    replay = services.start_replay(proposal=proposal, pairs=2, seed=3, user=curator,
                                   options={"max_steps": 3, "max_tokens": 12, "temperature": 0.7})
    runs = ReplayRun.objects.filter(replay=replay)
    deadline = time.monotonic() + 240
    while not runs.exists():
        assert time.monotonic() < deadline, first.log()
        time.sleep(0.05)
    first.kill()
    before = dict(runs.values_list("pk", "steps"))
    assert 1 <= len(before) < 4, "the kill must land mid-replay"

    second = start_worker(**QUICK_REAPER)
    job, _ = wait_for_terminal(replay.job_id, second, timeout=240)
    assert job.state == JobState.SUCCEEDED and job.attempts == 2, f"{job.error}\n{second.log()}"
    assert all(ReplayRun.objects.get(pk=pk).steps == steps for pk, steps in before.items())  # kept, not redone
    replay.refresh_from_db()
    assert sorted(runs.values_list("pair", "arm")) == [(0, "C"), (0, "R"), (1, "C"), (1, "R")]
    assert replay.n11 + replay.n10 + replay.n01 + replay.n00 == 2 and replay.stats["pairs"] == 2
    for run in runs:
        assert isinstance(run.passed, bool) and run.seed == 3 + run.pair
        actions = [step for step in run.steps if step.get("origin") != "prefix"]
        assert actions and actions[0]["origin"] == ("corrected" if run.arm == "C" else "policy")
    # Arm C starts from the corrected action, whose observation the environment computed.
    first_c = next(s for s in runs.get(pair=0, arm="C").steps if s.get("origin") == "corrected")
    assert first_c["action"] == "calc 391 - 45" and first_c["observation"] == "346"
