import json

import pytest

from corpora.aed import runners
from corpora.aed.importers import import_traces
from corpora.aed.models import Trace
from dataplatform.inference import TokenStep

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
    """A unit-test double for the policy backend: each prompt of each `rollouts` call gets the next text of a
    list (in a replay that is round by round: the runs still going, in (pair, arm) order). The text comes back
    as one token, then the end token, which the runner must drop; rows are yielded last first, as a real backend
    yields them in whatever order they finish. `rounds` records the seeds of every call."""

    model_id = "scripted-policy"
    supports_json_schema = False
    END = 0

    def __init__(self, texts):
        self.texts = list(texts)
        self.rounds = []
        self.pieces = ["<|end|>"]  # token id -> text; id 0 is END

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        return [1]

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        self.rounds.append(list(seeds))
        answers = []
        for _ in prompts:
            self.pieces.append(self.texts.pop(0) if self.texts else "answer 0")
            answers.append([TokenStep(token_id=len(self.pieces) - 1, logprob=-0.1),
                            TokenStep(token_id=self.END, logprob=-0.1, finish_reason="stop")])
        return reversed(list(enumerate(answers)))

    def detokenize(self, ids):
        return "".join(self.pieces[i] for i in ids)


@pytest.fixture
def scripted_policy(monkeypatch):
    def install(texts):
        policy = ScriptedPolicy(texts)
        monkeypatch.setattr(runners, "backend_for_model", lambda name: policy)
        return policy
    return install
