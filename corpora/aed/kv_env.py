"""kv-v1: a small key-value store task environment with state, checked by code.

Task convention: a trace's task is `meta["task"] = {"initial": {key: value}, "goal": {key: value}}` (keys and
values short strings of letters, digits, `_ . -`). The store starts as `initial`; the agent must make it equal
to `goal` and then submit.

Actions, one per step (the first non-empty line of the agent's text):
- `set KEY VALUE`: stores VALUE under KEY; the observation is `ok`.
- `delete KEY`: removes KEY; `ok`, or `error: no key KEY`.
- `get KEY`: the value, or `error: no key KEY`.
- `list`: the keys, sorted, comma-separated (`(empty)` when there are none).
- `submit`: ends the episode; it passes iff the store equals the goal.
Anything else gets an `error: ...` observation and still counts as a step; reaching `max_steps` without
a submit ends the episode as failed.

Unlike calc-v1, what a step does stays done: an erroneous `delete` loses the value, so executing the original
erroneous step and then continuing (an original-action retry, or recovery with the failure in context) meets
another store than letting the policy choose the step again.
"""

import json
import re

from .calc_env import action_line, history_messages

ENVIRONMENT = "kv-v1"
DEFAULT_MAX_STEPS = 8
MAX_KEYS = 50
_TOKEN = r"[A-Za-z0-9_.\-]{1,64}"
_SET = re.compile(rf"set\s+({_TOKEN})\s+({_TOKEN})", re.IGNORECASE)
_KEYED = re.compile(rf"(delete|get)\s+({_TOKEN})", re.IGNORECASE)
_TOKEN_ONLY = re.compile(_TOKEN)
UNKNOWN_ACTION = 'error: unknown action; use "set KEY VALUE", "delete KEY", "get KEY", "list" or "submit"'


class KvTaskError(ValueError):
    """The task is missing or malformed."""


def _store(value, name: str) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > MAX_KEYS:
        raise KvTaskError(f'a kv-v1 task\'s "{name}" must be an object of at most {MAX_KEYS} keys')
    for key, item in value.items():
        if not isinstance(item, str) or not _TOKEN_ONLY.fullmatch(key) or not _TOKEN_ONLY.fullmatch(item):
            raise KvTaskError(f'"{name}": keys and values must be 1-64 letters, digits, _ . or -, not {key!r}')
    return dict(value)


def task_for_trace(trace) -> dict:
    task = (getattr(trace, "meta", None) or {}).get("task")
    if not isinstance(task, dict) or "goal" not in task:
        raise KvTaskError('a kv-v1 trace needs meta["task"] = {"initial": {...}, "goal": {...}}')
    return {"initial": _store(task.get("initial", {}), "initial"), "goal": _store(task["goal"], "goal")}


class KvEnv:
    def __init__(self, task: dict, *, max_steps: int = DEFAULT_MAX_STEPS):
        self.task = task
        self.store = dict(task["initial"])
        self.goal = dict(task["goal"])
        self.max_steps = max_steps
        self.steps = 0
        self.done = False

    def score(self) -> float:
        """How close the store is to the goal, in [0, 1]: the keys holding their goal value, over the keys of
        the goal and the store together (1 exactly when they are equal)."""
        keys = set(self.goal) | set(self.store)
        return sum(self.store.get(key) == value for key, value in self.goal.items()) / len(keys) if keys else 1.0

    def step(self, action_text: str) -> tuple[str, bool, bool | None]:
        """(observation, done, passed); passed is None until the episode ends."""
        if self.done:
            raise RuntimeError("the episode is over")
        self.steps += 1
        action = action_line(action_text)
        passed = None
        if action.lower() == "submit":
            passed = self.store == self.goal
            observation = "the store matches the goal" if passed else "the store differs from the goal"
        elif action.lower() == "list":
            observation = ", ".join(sorted(self.store)) or "(empty)"
        elif match := _SET.fullmatch(action):
            self.store[match.group(1)] = match.group(2)
            observation = "ok"
        elif match := _KEYED.fullmatch(action):
            verb, key = match.group(1).lower(), match.group(2)
            if key not in self.store:
                observation = f"error: no key {key}"
            elif verb == "delete":
                del self.store[key]
                observation = "ok"
            else:
                observation = self.store[key]
        else:
            observation = UNKNOWN_ACTION
        if passed is None and self.steps >= self.max_steps:
            observation += f" (step limit {self.max_steps} reached)"
            passed = False
        self.done = passed is not None
        return observation, self.done, passed


def kv_system_prompt(max_steps: int = DEFAULT_MAX_STEPS) -> str:
    return ("You edit a key-value store until it equals a goal. Reply with exactly one action on one line:\n"
            "set KEY VALUE - stores VALUE under KEY\n"
            "delete KEY - removes KEY\n"
            "get KEY - shows the value of KEY\n"
            "list - shows the keys\n"
            "submit - ends the task; it succeeds if the store equals the goal.\n"
            f"You have at most {max_steps} actions.")


def kv_messages(task: dict, steps: list[dict], *, max_steps: int = DEFAULT_MAX_STEPS) -> list[dict]:
    """The chat the policy sees: the rules, the task (the starting store and the goal), then each prior action
    and its observation."""
    return [{"role": "system", "content": kv_system_prompt(max_steps)},
            {"role": "user", "content": f"Starting store: {json.dumps(task['initial'], sort_keys=True)}\n"
                                        f"Goal: {json.dumps(task['goal'], sort_keys=True)}"},
            *history_messages(steps)]
