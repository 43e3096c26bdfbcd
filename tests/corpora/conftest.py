import json

import pytest

from corpora.aed.importers import import_traces
from corpora.aed.models import Trace

from ..calc_traces import make_demo_trace
from ..doubles import ScriptedPolicy


@pytest.fixture
def calc_trace(project):
    """A failed calc-v1 trace: step 1 multiplies the wrong numbers, the agent then answers wrongly."""
    record = make_demo_trace("(17 * 23) - 45", ["calc 17 * 23", "calc 17 * 32", "answer 499"],
                             trace_id="calc-demo-1", policy_model="toy")
    report = import_traces(project=project, lines=[json.dumps(record)], file="demo.jsonl")
    assert report.ok, report.errors
    return Trace.objects.get(project=project, trace_id="calc-demo-1")


@pytest.fixture
def scripted_policy(use_backend):
    def install(texts):
        policy = ScriptedPolicy(texts)
        use_backend(policy)
        return policy
    return install
