"""What the local model's time to first token depends on besides the model: the OpenMP wait policy every
process of the platform gives torch, and the one vocabulary projection of a stream's first step."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Settings only, in a fresh process: the policy must be in the environment before anything loads torch.
SCRIPT = ("import os, sys, django; django.setup()\n"
          "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n")


def fresh_django(**env: str) -> list[str]:
    # Without the policy this test process got from its own settings: a fresh process sets it itself.
    base = {name: value for name, value in os.environ.items() if name != "OMP_WAIT_POLICY"}
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env=base | {"DJANGO_SETTINGS_MODULE": "dataplatform.settings", "DATABASE_URL": "",
                                        "REDIS_URL": ""} | env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


def test_every_process_waits_passively_and_loads_torch_only_later():
    # libgomp reads OMP_WAIT_POLICY once, when torch loads it: starting Django must not load torch.
    assert fresh_django() == ["PASSIVE", "False"]


def test_a_policy_set_by_the_operator_wins():
    assert fresh_django(OMP_WAIT_POLICY="ACTIVE") == ["ACTIVE", "False"]


@pytest.mark.model
def test_a_stream_projects_only_the_last_position_onto_the_vocabulary(local_backend):
    """The first step runs the whole prompt through the model, but only its last position's logits are
    needed: the head sees one row per step, not one per prompt token (49,152 x 576 multiply-adds each)."""
    head = local_backend.model.get_output_embeddings()
    rows = []
    hook = head.register_forward_hook(lambda module, inputs, output: rows.append(tuple(inputs[0].shape[:2])))
    try:
        prompt = local_backend.chat_prompt_ids([{"role": "user", "content": "Name a planet and one of its moons."}])
        steps = list(local_backend.stream(prompt, max_tokens=3, temperature=0.0, seed=0, top_k=5))
    finally:
        hook.remove()
    assert len(prompt) > 20 and len(steps) == 3
    assert rows == [(1, 1)] * 3
    # The same numbers as scoring the whole sequence, which projects every position.
    scored = local_backend.prompt_logprobs(prompt + [step.token_id for step in steps], top_k=5)
    for offset, step in enumerate(steps):
        assert scored[len(prompt) + offset][step.token_id] == pytest.approx(step.logprob, abs=1e-4)
