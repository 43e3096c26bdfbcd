"""Trace records of the calc-v1 environment for the AED tests, made by running actions through it."""

from corpora.aed.calc_env import DEFAULT_MAX_STEPS, ENVIRONMENT, CalcEnv


def make_demo_trace(expression: str, actions: list[str], *, trace_id: str, policy_model: str = "",
                    max_steps: int = DEFAULT_MAX_STEPS) -> dict:
    """A trace record in the AED import shape, made by running `actions` through the environment."""
    env = CalcEnv({"expression": expression}, max_steps=max_steps)
    steps, passed = [], False
    for index, action in enumerate(actions):
        if env.done:
            raise ValueError(f"action {index} comes after the episode ended")
        observation, _, result = env.step(action)
        steps.append({"index": index, "role": "assistant", "content": action, "action": action,
                      "observation": observation})
        passed = bool(result)
    return {"trace_id": trace_id, "task_id": f"calc:{expression}", "environment": ENVIRONMENT, "harness": "builtin",
            "policy_model": policy_model, "outcome": {"passed": passed}, "steps": steps,
            "meta": {"task": {"expression": expression}}}
