import json

import pytest

from corpora.aed import runners
from corpora.aed.importers import import_traces
from corpora.aed.models import Trace
from dataplatform.inference import Generation

from ..calc_traces import make_demo_trace


@pytest.fixture
def calc_trace(project):
    """A failed calc-v1 trace: step 1 multiplies the wrong numbers, the agent then answers wrongly."""
    record = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"],
                             trace_id="calc-demo-1", policy_model="toy")
    report = import_traces(project=project, lines=[json.dumps(record)], file="demo.jsonl")
    assert report.ok, report.errors
    return Trace.objects.get(project=project, trace_id="calc-demo-1")


class ScriptedPolicy:
    """A unit-test double for the policy backend: answers each generate call from a list, in turn."""

    model_id = "scripted-policy"
    supports_json_schema = False

    def __init__(self, texts):
        self.texts = list(texts)
        self.seeds = []

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        return [1]

    def generate(self, prompts, *, max_tokens, temperature, seed, json_schema=None, choice=None):
        self.seeds.append(seed)
        return [Generation(text=self.texts.pop(0) if self.texts else "answer 0", token_ids=[], finish_reason="stop")
                for _ in prompts]


@pytest.fixture
def scripted_policy(monkeypatch):
    def install(texts):
        policy = ScriptedPolicy(texts)
        monkeypatch.setattr(runners, "backend_for_model", lambda name: policy)
        return policy
    return install
