import itertools
import json

import pytest

from dataplatform.inference import Generation
from labeler import services
from labeler.models import LabelerSettings, SweTask, Trajectory


class ScriptedBackend:
    """A test double for the labeling service's unit tests: answers each stage from a script.

    `answers` maps a stage ("stage1"/"stage2") to a list of texts used in turn, one per prompt;
    the real model runs the same code in tests/labeler/test_model.py."""

    name = "scripted"
    model_id = "scripted-model"
    supports_json_schema = False

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = {stage: list(texts) for stage, texts in answers.items()}
        self.calls: list[dict] = []
        self.prompts: list[list[dict]] = []  # every chat asked, in order

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        stage = "stage2" if "_l2" in messages[-1]["content"] else "stage1"
        self.prompts.append(messages)
        return [1 if stage == "stage1" else 2]

    def generate(self, prompts, *, max_tokens, temperature, seed, json_schema=None):
        self.calls.append({"prompts": len(prompts), "max_tokens": max_tokens})
        stage = {1: "stage1", 2: "stage2"}
        return [Generation(text=self.answers[stage[p[0]]].pop(0), token_ids=[], finish_reason="stop")
                for p in prompts]


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
def scripted(monkeypatch, project):
    def install(answers):
        # The scripts answer in swe_v1's vocabulary (STAGE_ONE asks every dimension in stage one): a project that
        # has not pinned a taxonomy yet pins swe_v1 rather than starting on a new project's swe_v2, which
        # test_swe_v2.py scripts in the paper's shape.
        if not LabelerSettings.objects.filter(project=project).exists():
            services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v1"))
        backend = ScriptedBackend(answers)
        monkeypatch.setattr(services, "backend_for", lambda project: backend)
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
