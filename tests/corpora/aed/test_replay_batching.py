"""AED replays play their runs side by side: each round, the policy steps of every run still going reach the
backend as one `rollouts` call (scripted double), and at temperature 0 a run played in the batch is the run
played alone (the real CPU model)."""

import pytest

from corpora.aed import runners, services
from corpora.aed.models import ReplayRun

from ...doubles import RecordingProgress

pytestmark = pytest.mark.django_db


def replay_of(calc_trace, members, **kwargs):
    """A replay of the correction of the calc trace's error step 1 (17 * 32 instead of 17 * 23)."""
    curator = members["curator"]
    case = services.open_case(trace=calc_trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "category": "plan-error", "diagnosis": "17 * 32 is wrong"})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    return services.start_replay(proposal=proposal, user=curator, publish=False, **kwargs)


def test_every_round_of_a_replay_is_one_backend_call_with_both_arms_of_every_pair(calc_trace, members,
                                                                                  scripted_policy):
    replay = replay_of(calc_trace, members, pairs=3, seed=10, retry="original", options={"max_steps": 4})
    # Both arms execute step 1 themselves (the correction, the original error), so every run asks the policy
    # for step 2 in round 1; the runs that calculated on ask for step 3 in round 2.
    policy = scripted_policy(["answer 346", "calc 544 - 198",  # pair 0: C passes, R recovers (see round 2)
                              "answer 346", "answer 499",      # pair 1: C passes, R fails
                              "calc 346 + 0", "answer 1",      # pair 2: C calculates on, R fails
                              "answer 346", "answer 346"])     # round 2: pair 0's R and pair 2's C pass
    services.run_replay(replay=replay, progress=RecordingProgress())
    # The two arms of a pair draw the same seed at the same step, side by side in one call.
    assert policy.rounds == [[10002, 10002, 11002, 11002, 12002, 12002], [10003, 12003]]
    replay.refresh_from_db()
    assert (replay.n11, replay.n10, replay.n01, replay.n00) == (1, 2, 0, 0)
    assert ReplayRun.objects.get(replay=replay, pair=2, arm="C").steps[-1]["action"] == "answer 346"


def test_the_recovery_runs_of_a_replay_share_each_round_too(calc_trace, members, scripted_policy):
    replay = replay_of(calc_trace, members, pairs=3, seed=0, mode="recovery", options={"max_steps": 4})
    policy = scripted_policy(["calc 544 - 198", "answer 0", "answer 0", "answer 346"])
    services.run_replay(replay=replay, progress=RecordingProgress())
    assert policy.rounds == [[2, 1002, 2002], [3]]
    replay.refresh_from_db()
    assert replay.stats == {"runs": 3, "recovered": 1, "recovery_rate": pytest.approx(1 / 3)}


@pytest.mark.model
def test_at_temperature_0_a_batched_replay_plays_each_arm_as_it_plays_alone(calc_trace, members, local_backend,
                                                                           monkeypatch):
    replay = replay_of(calc_trace, members, pairs=2, seed=5,
                       options={"max_steps": 3, "max_tokens": 8, "temperature": 0.0})
    calls = []
    rollouts = local_backend.rollouts

    def recording(prompts, **kwargs):
        calls.append(prompts)
        return rollouts(prompts, **kwargs)

    monkeypatch.setattr(local_backend, "rollouts", recording)
    services.run_replay(replay=replay, progress=RecordingProgress())
    assert len(calls[0]) == 4  # round 1: both arms of both pairs
    batched = {(run.pair, run.arm): run for run in ReplayRun.objects.filter(replay=replay)}
    calls.clear()
    for (pair, arm), run in sorted(batched.items()):
        alone = runners.run_arm(runner="builtin", trace=calc_trace, error_step=1, arm=arm,
                                corrected_action="calc 391 - 45", seed=run.seed, options=replay.options)
        assert (alone.passed, alone.score, alone.steps) == (run.passed, run.score, run.steps), (pair, arm)
    assert calls and all(len(prompts) == 1 for prompts in calls)
    # And as the path before batching played it: each policy step a single `generate` call.
    for (prompt,), step in zip(calls, (s for key in sorted(batched) for s in batched[key].steps
                                       if s["origin"] == "policy"), strict=True):
        [generation] = local_backend.generate([prompt], max_tokens=8, temperature=0.0, seed=0)
        assert generation.text == step["content"]
