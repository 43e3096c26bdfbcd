"""Every AED chat row states the task as the traced policy saw it (corpora/aed/exporters/rendering.py), for every
environment and trace format: a builtin environment's rules and task as its runner shows them, a conversation's
own prompt, else the task as recorded (text, or JSON), never the bare task id when the trace holds more."""

import json

import pytest

from corpora.aed import services
from corpora.aed.exporters import rendering
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, Trace

from ... import trace_fixtures
from ...calc_traces import make_demo_trace, make_kv_trace
from ...doubles import RecordingProgress
from ...exporting import chat_cell, export_rows
from .export_corpus import curate, import_all

pytestmark = pytest.mark.django_db

KV_TASK = {"initial": {"a": "1", "b": "2"}, "goal": {"a": "1", "z": "7"}}
# Step 1 deletes the key the goal keeps; the trace submits a store without it.
KV_ACTIONS = ["delete b", "delete a", "set z 7", "submit"]
CALC_ACTIONS = ["calc 17 * 23", "calc 391 + 45", "answer 436"]


def _recovery_replay(project, members, record, corrected: str, options: dict):
    """The record's case (error step 1, submitted) and a recovery replay of it on the builtin runner, the diagnosis
    given to the policy as a hint."""
    curator = members["curator"]
    [trace] = import_all(project, record).values()
    case = curate(trace, curator, error_step=1, category="plan-error", diagnosis="It lost a value the goal needs.",
                  evidence_check="supported")
    fix = services.add_proposal(case=case, actor=curator, corrected_action=corrected)
    return services.start_replay(proposal=fix, pairs=1, mode="recovery", hint=True, options=options, user=curator,
                                 publish=False)


# The stored AED kinds are read on the Arrow path on PostgreSQL, a connection of its own: committed rows only.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("record", "continuation", "options", "task"), [
    (make_kv_trace(KV_TASK["initial"], KV_TASK["goal"], KV_ACTIONS, trace_id="t3-kv-2"),
     ["set a 1", "set z 7", "submit"], {"max_steps": 7},
     'Starting store: {"a": "1", "b": "2"}\nGoal: {"a": "1", "z": "7"}'),  # the row: no goal, no rules
    (make_demo_trace("(17 * 23) - 45", CALC_ACTIONS, trace_id="t-calc"), ["calc 436 - 90", "answer 346"], {},
     "Task: compute (17 * 23) - 45"),
], ids=["kv-v1", "calc-v1"])
def test_a_builtin_trace_s_rows_show_what_its_runner_showed_the_policy(record, continuation, options, task, project,
                                                                       members, scripted_policy,
                                                                       export_storage_in_tmp):
    replay = _recovery_replay(project, members, record, continuation[0], options)
    policy = scripted_policy(list(continuation))
    services.run_replay(replay=replay, progress=RecordingProgress())
    shown = list(policy.shown)  # the replay's prompts (the export then probes the backend's chat template too)
    assert len(shown) == len(continuation)
    _, [row] = export_rows(project, members["curator"], export_storage_in_tmp, "aed.recovery",
                           filters={"min_grade": "C"}, validation_ratio=0)
    messages = chat_cell(row["messages"])
    # Before each decision the row trains, its context is exactly the chat the runner showed the policy then:
    # the rules (under the replay's step limit), the task, the steps, the error with its hint.
    turns = [index for index, message in enumerate(messages) if message["role"] == "assistant"][-len(continuation):]
    assert [messages[:turn] for turn in turns] == shown
    assert [messages[turn]["content"] for turn in turns] == continuation
    assert messages[0]["role"] == "system" and messages[1] == {"role": "user", "content": task}
    if options:  # the replay's step limit, which the policy was told
        assert messages[0]["content"].endswith(f"You have at most {options['max_steps']} actions.")


def test_the_trace_s_own_rows_use_the_environment_s_step_limit(project, members):
    """A trace does not record its run's step limit: the rows made from it (preference, repair, diagnosis) state the
    environment's default, as a replay without one runs."""
    [trace] = import_all(project, make_kv_trace(KV_TASK["initial"], KV_TASK["goal"], KV_ACTIONS,
                                                trace_id="t-kv")).values()
    prefix = rendering.prefix_messages(Case(trace=trace, error_step=1))
    assert "at most 8 actions" in prefix[0]["content"] and prefix[1]["content"].startswith("Starting store:")
    assert prefix[2:] == [{"role": "assistant", "content": "delete b"}, {"role": "user", "content": "Observation: ok"}]
    assert rendering.prefix_messages(Case(trace=trace, error_step=1), max_steps=3)[0]["content"].endswith(
        "You have at most 3 actions.")
    text = rendering.task_text(trace)
    assert text.startswith(prefix[0]["content"]) and text.endswith(f"{prefix[1]['content']}\nEnvironment: kv-v1")


# (fixture, line, the text of the task the conversation's policy was given)
FORMATS = [
    (trace_fixtures.OPENAI, 0, "slugify() keeps a trailing dash. Find where it returns."),
    (trace_fixtures.OPENAI, 1, "Say hi."),  # content parts
    (trace_fixtures.SWE_AGENT, 0, "ISSUE:\nslugify() keeps a trailing dash"),  # from its history
    (trace_fixtures.SWE_AGENT, 1, "ISSUE:\nslugify() keeps a trailing dash"),  # from its first step's query
    (trace_fixtures.SWE_AGENT_TRAJ, 0, "ISSUE:\nslugify() keeps a trailing dash"),
    (trace_fixtures.OPENHANDS, 0, "slugify() keeps a trailing dash. Fix it."),  # events
    (trace_fixtures.OPENHANDS, 1, "Fix slugify."),  # the older [action, observation] pairs
    (trace_fixtures.SWE_LABELER, 0, "Fix the empty-file behavior in parser.py"),  # AED's own `messages` shape
    (trace_fixtures.SWE_LABELER, 1, "Make the parser accept empty files."),  # json_content
]


def _imported(project, name: str, line: int) -> Trace:
    text = trace_fixtures.body(name).decode()
    lines = [text] if name.endswith(".traj") else [text.splitlines()[line]]
    report = import_traces(project=project, lines=lines, file=name)
    assert report.ok, report.errors
    return Trace.objects.get(project=project)


@pytest.mark.parametrize(("name", "line", "task"), FORMATS, ids=[f"{name}:{line}" for name, line, _ in FORMATS])
def test_a_conversation_s_prompt_is_its_task(name, line, task, project):
    trace = _imported(project, name, line)
    agent = [index for index, step in enumerate(trace.steps) if step["role"] == "assistant"]
    case = Case(trace=trace, error_step=agent[-1])  # the checkpoint before its last agent step
    prefix = rendering.prefix_messages(case)
    # The steps as they are: the policy's own prompt states the task; no line it never saw is added.
    assert prefix == [message for step in trace.steps[:agent[-1]] for message in rendering.step_messages(step)]
    assert any(message["role"] == "user" and task in message["content"] for message in prefix[:agent[0] + 1])
    assert not any(message["content"].startswith("Task:") for message in prefix)


def _trace(**fields) -> Trace:
    steps = [{"index": 0, "role": "assistant", "content": "act", "action": "act", "observation": "seen"},
             {"index": 1, "role": "assistant", "content": "again", "action": "again", "observation": None}]
    return Trace(**{"trace_id": "t", "task_id": "task-9", "environment": "", "steps": steps, "meta": {}} | fields)


@pytest.mark.parametrize(("trace", "line"), [
    (_trace(environment="other-env", meta={"task": "Sort the list."}), "Task: Sort the list.\nEnvironment: other-env"),
    (_trace(environment="other-env", meta={"task": {"goal": [3, 1], "ü": 1}}),
     'Task: {"goal": [3, 1], "ü": 1}\nEnvironment: other-env'),  # JSON: the whole task, not its id
    (_trace(environment="kv-v1", meta={"task": {"goal": {"a": "not a token"}}}),  # kv-v1 cannot run it
     'Task: {"goal": {"a": "not a token"}}\nEnvironment: kv-v1'),
    (_trace(), "Task: task-9"),  # nothing but the id
    (_trace(source_format="openhands", meta={"instruction": "Fix slugify."}), "Task: Fix slugify."),
    (_trace(steps=[{"index": 0, "role": "system", "content": "Be brief."}, *_trace().steps]), "Task: task-9"),
], ids=["text", "json", "builtin-unreadable", "id-only", "openhands-instruction", "after-system"])
def test_a_trace_that_does_not_state_its_task_starts_with_the_task_as_recorded(trace, line):
    prefix = rendering.prefix_messages(Case(trace=trace, error_step=len(trace.steps) - 1))
    lead = [message for message in prefix if message["role"] == "system"]
    assert prefix[len(lead)] == {"role": "user", "content": line}  # after the system steps, before the agent's
    assert rendering.task_text(trace) == line
    assert json.dumps(prefix[len(lead) + 1:]) == json.dumps(rendering.step_messages(trace.steps[len(lead)]))


def test_a_calc_trace_named_by_its_task_id_alone_gets_the_runner_s_opening():
    trace = _trace(environment="calc-v1", task_id="calc:(2 + 3) * 4")
    prefix = rendering.prefix_messages(Case(trace=trace, error_step=1))
    assert prefix[0]["role"] == "system" and prefix[1] == {"role": "user", "content": "Task: compute (2 + 3) * 4"}
