"""calc-v1: a small, deterministic text environment whose success is checked by code.

Task convention: a trace's task is `meta["task"] = {"expression": "(17 * 23) - 45"}`; without it,
a `task_id` of the form `calc:<expression>` (e.g. `calc:(17*23)-45`) is used. The goal is the exact
integer value of the expression, evaluated with `ast` over integers, + - * //, unary minus and
parentheses only (never `eval`).

Actions, one per step (the first non-empty line of the agent's text):
- `calc A OP B`: A and B integers, OP one of + - * //; the observation is the integer result.
- `answer N`: ends the episode; it passes iff N equals the goal.
Anything else gets an `error: ...` observation and still counts as a step. The state is only the
step count and the done flag, so replaying a trace's prefix actions rebuilds it exactly. Reaching
`max_steps` without an answer ends the episode as failed.
"""

import ast
import operator
import re

ENVIRONMENT = "calc-v1"
DEFAULT_MAX_STEPS = 6
MAX_EXPRESSION_CHARS = 200
UNKNOWN_ACTION = 'error: unknown action; use "calc A OP B" or "answer N"'

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}
_AST_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}
_INT = r"-?\d{1,30}"
_CALC = re.compile(rf"calc\s+({_INT})\s*(//|[-+*])\s*({_INT})", re.IGNORECASE)
_ANSWER = re.compile(rf"answer\s+({_INT})", re.IGNORECASE)


class CalcTaskError(ValueError):
    """The task is missing or its expression is not plain integer arithmetic."""


def evaluate(expression: str) -> int:
    """The exact integer value of `expression`; names, calls, floats and other operators are rejected."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalcTaskError("the task needs a non-empty expression")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalcTaskError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalcTaskError(f"not an arithmetic expression: {expression!r}") from exc

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _AST_OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.FloorDiv) and right == 0:
                raise CalcTaskError(f"division by zero in {expression!r}")
            return _AST_OPS[type(node.op)](left, right)
        raise CalcTaskError(f"only integers, + - * // and parentheses are allowed, not {type(node).__name__}")

    return value(tree.body)


def task_for_trace(trace) -> dict:
    """`meta["task"]` if it has an expression, else the one in a `calc:<expression>` task_id."""
    task = (getattr(trace, "meta", None) or {}).get("task")
    if isinstance(task, dict) and task.get("expression"):
        return task
    task_id = getattr(trace, "task_id", "") or ""
    if task_id.startswith("calc:") and task_id[5:].strip():
        return {"expression": task_id[5:].strip()}
    raise CalcTaskError('a calc-v1 trace needs meta["task"]["expression"] or a task_id "calc:<expression>"')


def action_line(text: str) -> str:
    """The action in an agent's text: its first non-empty line, stripped."""
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


class CalcEnv:
    def __init__(self, task: dict, *, max_steps: int = DEFAULT_MAX_STEPS):
        self.expression = task.get("expression", "") if isinstance(task, dict) else ""
        self.goal = evaluate(self.expression)
        self.max_steps = max_steps
        self.steps = 0
        self.done = False

    def step(self, action_text: str) -> tuple[str, bool, bool | None]:
        """(observation, done, passed); passed is None until the episode ends."""
        if self.done:
            raise RuntimeError("the episode is over")
        self.steps += 1
        action = action_line(action_text)
        passed = None
        if match := _ANSWER.fullmatch(action):
            given = int(match.group(1))
            passed = given == self.goal
            observation = f"answer {given} is {'correct' if passed else 'wrong'}"
        elif match := _CALC.fullmatch(action):
            a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
            observation = "error: division by zero" if op == "//" and b == 0 else str(_OPS[op](a, b))
        elif (kind := (action.split(maxsplit=1) or [""])[0].lower()) in ("calc", "answer"):
            usage = "calc A OP B (integers A and B, OP one of + - * //)" if kind == "calc" else "answer N (an integer)"
            observation = f"error: malformed {kind}; use {usage}"
        else:
            observation = UNKNOWN_ACTION
        if passed is None and self.steps >= self.max_steps:
            observation += f" (step limit {self.max_steps} reached)"
            passed = False
        self.done = passed is not None
        return observation, self.done, passed


def calc_system_prompt(max_steps: int = DEFAULT_MAX_STEPS) -> str:
    return ("You solve integer arithmetic tasks with a calculator. Reply with exactly one action on one line:\n"
            "calc A OP B - computes A OP B, where A and B are integers and OP is one of + - * //\n"
            "answer N - gives the final integer answer and ends the task.\n"
            f"You have at most {max_steps} actions.")


def calc_messages(task: dict, steps: list[dict], *, max_steps: int = DEFAULT_MAX_STEPS) -> list[dict]:
    """The chat the policy sees: the rules, the task, then each prior action and its observation."""
    return [{"role": "system", "content": calc_system_prompt(max_steps)},
            {"role": "user", "content": f"Task: compute {task['expression']}"}, *history_messages(steps)]


def history_messages(steps: list[dict]) -> list[dict]:
    """Each prior action and what the agent observed after it (and the diagnosis, when a recovery shows it),
    as every builtin environment's policy sees them."""
    messages = []
    for step in steps:
        messages.append({"role": "assistant", "content": step.get("action") or ""})
        hint = f"\nHint: {step['hint']}" if step.get("hint") else ""
        messages.append({"role": "user", "content": f"Observation: {step.get('observation') or ''}{hint}"})
    return messages
