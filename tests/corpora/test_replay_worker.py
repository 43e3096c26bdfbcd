"""A two-arm replay of a calc-v1 correction on a live Celery worker, with the real CPU model as policy."""

import pytest

from corpora.aed import services
from corpora.aed.models import ReplayRun
from dataplatform.jobs.models import JobState

from ..integration.test_jobs_with_worker import wait_for_terminal

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.django_db(transaction=True)]


def test_builtin_replay_on_the_worker_fills_the_table(calc_trace, members, start_worker):
    worker = start_worker()
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "17 * 32 is wrong"})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    # Two pairs, at most 3 steps in all (2 before the error step + the corrected or resampled one, then stop),
    # 12 tokens a step: a few short generations on 2 cores.
    replay = services.start_replay(proposal=proposal, pairs=2, seed=3, user=curator,
                                   options={"max_steps": 3, "max_tokens": 12, "temperature": 0.7})
    job, _ = wait_for_terminal(replay.job_id, worker, timeout=240)
    assert job.state == JobState.SUCCEEDED, f"{job.error}\n{worker.log()}"
    replay.refresh_from_db()
    runs = ReplayRun.objects.filter(replay=replay)
    assert sorted(runs.values_list("pair", "arm")) == [(0, "C"), (0, "R"), (1, "C"), (1, "R")]
    assert replay.n11 + replay.n10 + replay.n01 + replay.n00 == 2 and replay.stats["pairs"] == 2
    for run in runs:
        assert isinstance(run.passed, bool) and run.seed == 3 + run.pair
        actions = [step for step in run.steps if step.get("origin") != "prefix"]
        assert actions and actions[0]["origin"] == ("corrected" if run.arm == "C" else "policy")
    # Arm C starts from the corrected action, whose observation the environment computed.
    first_c = next(s for s in runs.get(pair=0, arm="C").steps if s.get("origin") == "corrected")
    assert first_c["action"] == "calc 391 - 45" and first_c["observation"] == "346"
