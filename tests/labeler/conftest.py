import itertools
import json

import pytest

from labeler import services
from labeler.models import LabelerSettings, SweTask, Trajectory

from ..doubles import ScriptedBackend

STAGE_ONE = {"task_type_l1": "bug-fix", "domain_l1": "web_backend", "code_language": "python",
             "task_spec_type": "specific", "dependency_context": "codebase", "scope": "single-function",
             "cognitive_complexity": "low", "time_estimate": "15min-1h"}
STAGE_TWO = {"task_type_l2": ["logic-error"], "domain_l2": ["rest-api"]}


def answer(values: dict) -> str:
    return "Here you go:\n```json\n" + json.dumps({k: {"value": v, "rationale": f"because {k}"}
                                                  for k, v in values.items()}) + "\n```"


@pytest.fixture
def make_tasks(project):
    def make(n: int, target=None):
        return [SweTask.objects.create(project=target or project, instance_id=f"org__repo-{i}",
                                       repo="org/repo", problem_statement=f"Bug number {i}: the API returns 500",
                                       patch="diff --git a/app/views.py b/app/views.py\n+fixed\n",
                                       source_sha256=f"{i:064d}") for i in range(n)]
    return make


@pytest.fixture
def scripted(use_backend, project):
    def install(answers):
        # The scripts answer in swe_v1's vocabulary (STAGE_ONE asks every dimension in stage one): a project that
        # has not pinned a taxonomy yet pins swe_v1 rather than starting on a new project's swe_v2, which
        # test_swe_v2.py scripts in the paper's shape.
        if not LabelerSettings.objects.filter(project=project).exists():
            services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v1"))
        backend = ScriptedBackend(answers)
        use_backend(backend)
        return backend
    return install


# An agent's trajectory in the stored conversation shape: a request, a read, an edit, a test run.
TRAJECTORY_MESSAGES = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "The /users endpoint returns 500 when the list is empty; fix it."},
    {"role": "assistant", "content": "Let me read the view.", "reasoning": "private chain of thought",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file",
                                                                  "arguments": '{"path": "app/views.py"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "read_file", "content": "def users(): return rows[0]"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'}}]},
    {"role": "tool", "tool_call_id": "c2", "name": "bash", "content": "1 failed, 3 passed"},
    {"role": "assistant", "content": "Fixed the empty case in app/views.py."},
]


@pytest.fixture
def make_trajectories(project):
    numbers = itertools.count()

    def make(n: int, *, task=None, target=None, extra=None, messages=None):
        made = []
        for _ in range(n):
            i = next(numbers)
            made.append(Trajectory.objects.create(
                project=target or project, task=task, trajectory_id=f"run-{i}",
                instance_id=task.instance_id if task else f"run-{i}", model="agent-model",
                messages=messages or TRAJECTORY_MESSAGES, extra=extra or {}, source_sha256=f"{i + 500:064d}"))
        return made
    return make
