"""Trace records of the builtin AED environments (calc-v1, kv-v1) for the tests, made by running actions
through them."""

from corpora.aed import calc_env, kv_env


def _record(env, actions: list[str], **fields) -> dict:
    steps, passed = [], False
    for index, action in enumerate(actions):
        if env.done:
            raise ValueError(f"action {index} comes after the episode ended")
        observation, _, result = env.step(action)
        steps.append({"index": index, "role": "assistant", "content": action, "action": action,
                      "observation": observation})
        passed = bool(result)
    return {"harness": "builtin", "outcome": {"passed": passed}, "steps": steps, **fields}


def make_demo_trace(expression: str, actions: list[str], *, trace_id: str, policy_model: str = "",
                    max_steps: int = calc_env.DEFAULT_MAX_STEPS) -> dict:
    """A calc-v1 trace record in the AED import shape."""
    return _record(calc_env.CalcEnv({"expression": expression}, max_steps=max_steps), actions, trace_id=trace_id,
                   task_id=f"calc:{expression}", environment=calc_env.ENVIRONMENT, policy_model=policy_model,
                   meta={"task": {"expression": expression}})


def make_kv_trace(initial: dict, goal: dict, actions: list[str], *, trace_id: str, policy_model: str = "",
                  max_steps: int = kv_env.DEFAULT_MAX_STEPS) -> dict:
    """A kv-v1 trace record in the AED import shape."""
    task = {"initial": initial, "goal": goal}
    return _record(kv_env.KvEnv(task, max_steps=max_steps), actions, trace_id=trace_id, task_id=f"kv:{trace_id}",
                   environment=kv_env.ENVIRONMENT, policy_model=policy_model, meta={"task": task})
