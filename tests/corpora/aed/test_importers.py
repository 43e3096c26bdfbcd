"""AED trace imports: both shapes of its own and the readers' trace formats, per-line errors, dry run, duplicates,
all or nothing."""

import hashlib
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from corpora.aed.importers import import_traces
from corpora.aed.models import Trace, TraceSource
from dataplatform.conversations.readers import read_trace
from dataplatform.imports import canonical_sha256
from tests import real_openhands
from tests import real_traces as real
from tests import trace_fixtures as traces
from tests.factories import UserFactory
from tests.trace_fixtures import OPENAI, OPENHANDS, SWE_AGENT, SWE_AGENT_TRAJ, SWE_LABELER

pytestmark = pytest.mark.django_db


def lines(*records):
    return [(r if isinstance(r, str) else json.dumps(r)).encode() + b"\n" for r in records]


def aed(trace_id="aed-1", **overrides):
    record = {
        "trace_id": trace_id, "task_id": "django__django-11099", "environment": "swe-bench-lite",
        "harness": "swe-agent", "policy_model": "qwen2.5-coder-7b",
        "outcome": {"passed": False, "score": 0.25},
        "steps": [
            {"index": 0, "role": "user", "content": "Fix UsernameValidator allowing a trailing newline."},
            {"index": 1, "role": "assistant", "content": "Let me find the validator.",
             "action": "grep -rn UsernameValidator django/", "observation": "django/contrib/auth/validators.py:9"},
            {"index": 2, "role": "assistant", "content": "Submitting.", "action": "submit", "observation": None,
             "latency_ms": 812},
        ],
        "meta": {"run": 7, "tags": ["lite"]},
    }
    return record | overrides


def trajectory(trajectory_id="traj-1", **overrides):
    record = {
        "trajectory_id": trajectory_id, "instance_id": "astropy__astropy-12907", "model": "gpt-4o",
        "scaffold": "openhands",
        "messages": [
            {"role": "system", "content": "You are a software engineer."},
            {"role": "user", "content": [{"type": "text", "text": "Fix the bug."},
                                         {"type": "image_url", "image_url": {"url": "data:,"}},
                                         {"type": "text", "text": "Run the tests."}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "resolved": False,
    }
    return record | overrides


def found(report):
    return [(e.file, e.line, e.field) for e in report.errors]


def test_aed_steps_are_stored_as_given(project):
    user = UserFactory(username="curator")
    body = lines(aed(), aed("aed-2", outcome={"passed": True}, meta=None, task_id=None))
    report = import_traces(project=project, lines=body, file="aed.jsonl", user=user)

    assert report.ok and (report.lines, report.created, report.duplicates, report.skipped) == (2, 2, 0, 0)
    trace = Trace.objects.get(trace_id="aed-1")
    assert (trace.project, trace.task_id, trace.environment, trace.harness, trace.policy_model) == (
        project, "django__django-11099", "swe-bench-lite", "swe-agent", "qwen2.5-coder-7b")
    assert (trace.passed, trace.score, trace.source_format) == (False, 0.25, "steps")
    assert trace.steps[0] == {"index": 0, "role": "user", "content": "Fix UsernameValidator allowing a trailing newline.",
                              "action": None, "observation": None}
    assert trace.steps[1]["action"] == "grep -rn UsernameValidator django/"
    assert trace.steps[2] == {"index": 2, "role": "assistant", "content": "Submitting.", "action": "submit",
                              "observation": None, "latency_ms": 812}
    assert trace.meta == {"run": 7, "tags": ["lite"]}
    assert trace.source_sha256 == canonical_sha256(aed())
    other = Trace.objects.get(trace_id="aed-2")
    assert (other.passed, other.score, other.task_id, other.meta) == (True, None, "", {})

    source = TraceSource.objects.get()
    assert (source.project, source.filename, source.rows, source.created_by) == (project, "aed.jsonl", 2, user)
    assert source.sha256 == hashlib.sha256(b"".join(body)).hexdigest()
    assert set(source.traces.all()) == set(Trace.objects.all())


def test_trajectory_becomes_one_step_per_message(project):
    record = trajectory(environment="docker", outcome={"passed": False, "score": 1, "reason": "tests failed"},
                        meta={"split": "test"})
    report = import_traces(project=project, lines=lines(record, trajectory("traj-2")))

    assert report.ok and report.created == 2 and report.file == "traces.jsonl"
    trace = Trace.objects.get(trace_id="traj-1")
    assert (trace.task_id, trace.policy_model, trace.harness, trace.environment) == (
        "astropy__astropy-12907", "gpt-4o", "openhands", "docker")
    assert (trace.passed, trace.score, trace.source_format) == (False, 1.0, "messages")
    assert [s["index"] for s in trace.steps] == [0, 1, 2, 3]
    assert trace.steps[0] == {"index": 0, "role": "system", "content": "You are a software engineer.",
                              "action": None, "observation": None}
    assert trace.steps[1]["content"] == "Fix the bug.\nRun the tests."
    assert trace.steps[1]["content_parts"] == record["messages"][1]["content"]
    assert trace.steps[2]["content"] == "" and trace.steps[2]["tool_calls"][0]["id"] == "c1"
    assert trace.steps[3] == {"index": 3, "role": "tool", "content": "ok", "action": None, "observation": None,
                              "tool_call_id": "c1"}
    assert trace.meta == {"split": "test", "resolved": False,
                          "outcome": {"passed": False, "score": 1, "reason": "tests failed"}}
    assert trace.source_sha256 == canonical_sha256(record)
    plain = Trace.objects.get(trace_id="traj-2")
    assert (plain.passed, plain.score, plain.environment, plain.meta) == (None, None, "", {"resolved": False})


def test_dry_run_reports_and_writes_nothing(project):
    report = import_traces(project=project, lines=lines(aed(), trajectory(), aed("bad", steps=[])), dry_run=True)
    assert report.dry_run and report.created == 0 and report.lines == 3
    assert found(report) == [("traces.jsonl", 3, "steps")]
    assert not Trace.objects.exists() and not TraceSource.objects.exists()

    clean = import_traces(project=project, lines=lines(aed(), trajectory()), dry_run=True)
    assert clean.ok and clean.created == 0 and not Trace.objects.exists() and not TraceSource.objects.exists()


def test_a_line_needs_steps_or_messages_but_not_both(project):
    neither = {k: v for k, v in aed().items() if k != "steps"}
    both = aed(messages=[{"role": "user", "content": "x"}])
    report = import_traces(project=project, lines=lines(aed(), neither, both))
    assert [e.as_dict() for e in report.errors] == [
        {"file": "traces.jsonl", "line": 2, "field": "steps",
         "message": "a line holds either steps (an AED trace) or messages (a trajectory); it has neither"},
        {"file": "traces.jsonl", "line": 3, "field": "steps",
         "message": "a line holds either steps (an AED trace) or messages (a trajectory), not both"}]
    assert report.created == 0 and not Trace.objects.exists()  # all or nothing


def test_wrong_types_and_step_numbering_name_the_field(project):
    steps = aed()["steps"]
    renumbered = [steps[0], steps[1] | {"index": 2}, steps[2] | {"index": 3}]
    report = import_traces(project=project, file="bad.jsonl", lines=lines(
        aed("a", outcome={"passed": "yes"}),
        aed("b", steps=renumbered),
        aed("c", steps=[steps[0], steps[1] | {"role": ""}, steps[2] | {"content": None, "action": ["ls"]}]),
        aed("", outcome={"score": True}),
        {"steps": steps, "outcome": {"passed": True}},
        aed("f", outcome=None, meta=[1], harness=5),
        aed("g", steps=[steps[0], "next"], run=1, meta={"run": 2}),
        trajectory("h", messages=[{"role": "user", "content": 3}, {"content": "hi", "action": "x"}],
                   outcome={"passed": 1}),
        trajectory(None, model="m" * 201),
    ))
    assert [(e.line, e.field, e.message) for e in report.errors] == [
        (1, "outcome.passed", "must be true or false, got 'yes'"),
        (2, "steps[1].index", "is 2, expected 1 (steps count 0, 1, 2, ... in order)"),
        (3, "steps[1].role", "must be a non-empty string"),
        (3, "steps[2].content", "must be a string"),
        (3, "steps[2].action", "must be a string or null"),
        (4, "trace_id", "is required: a non-empty string"),
        (4, "outcome.passed", "is required: true or false"),
        (4, "outcome.score", "must be a number, got True"),
        (5, "trace_id", "is required: a non-empty string"),
        (6, "harness", "must be a string"),
        (6, "outcome", "is required: an object with passed (true or false) and an optional score"),
        (6, "meta", "must be an object"),
        (7, "steps[1]", "must be an object with index, role and content"),
        (7, "run", "is also a key of meta (unknown top-level keys are kept in meta); rename one of them"),
        (8, "outcome.passed", "must be true or false, got 1"),
        (8, "messages[0].content", "must be a string, null, or a list of content-part objects"),
        (8, "messages[1].role", "must be a non-empty string"),
        (8, "messages[1].action", "'action' is a key of the normalised step; a message cannot carry it"),
        (9, "trajectory_id", "is required: a non-empty string"),
        (9, "model", "must be at most 200 characters long"),
    ]
    assert all(e.file == "bad.jsonl" for e in report.errors)
    assert report.created == 0 and not Trace.objects.exists()


def test_step_index_must_be_an_integer_and_only_the_first_mismatch_is_reported(project):
    steps = [{"index": str(n), "role": "assistant", "content": "x"} for n in range(3)]
    report = import_traces(project=project, lines=lines(aed(steps=steps)))
    assert [(e.field, e.message) for e in report.errors] == [
        ("steps[0].index", "must be the integer 0 (steps count 0, 1, 2, ... in order)")]


def test_a_long_broken_step_list_is_summarised(project):
    steps = [{"index": n, "role": "", "content": "x"} for n in range(25)]
    report = import_traces(project=project, lines=lines(aed(steps=steps)))
    assert [e.field for e in report.errors] == [f"steps[{n}].role" for n in range(10)] + ["steps"]
    assert report.errors[-1].message == "15 more problems in this list are not shown"


def test_duplicates_in_the_file(project):
    reordered = dict(reversed(list(aed().items())))  # the same record, keys in another order
    report = import_traces(project=project, lines=lines(aed(), reordered, aed(task_id="other")))
    assert [(e.line, e.field, e.message) for e in report.errors] == [
        (3, "trace_id", "trace 'aed-1' already appears on line 1 with different content")]
    assert report.duplicates == 1 and not Trace.objects.exists()

    report = import_traces(project=project, lines=lines(trajectory(), trajectory(model="other")))
    assert found(report) == [("traces.jsonl", 2, "trajectory_id")]


def test_duplicates_against_the_project(project, other_project):
    assert import_traces(project=project, lines=lines(aed(), trajectory())).created == 2

    report = import_traces(project=project, lines=lines(aed("new"), aed(), trajectory(scaffold="changed")))
    assert [(e.line, e.field, e.message) for e in report.errors] == [
        (3, "trajectory_id", "trace 'traj-1' already exists in this project with different content")]
    assert report.duplicates == 1 and report.created == 0 and Trace.objects.count() == 2

    report = import_traces(project=project, lines=lines(aed("new"), aed()))
    assert report.ok and (report.created, report.duplicates) == (1, 1)
    assert TraceSource.objects.get(traces__trace_id="new").rows == 1
    assert Trace.objects.filter(project=project).count() == 3

    elsewhere = import_traces(project=other_project, lines=lines(aed(), trajectory(scaffold="changed")))
    assert elsewhere.ok and elsewhere.created == 2  # trace ids are per project


def test_reimporting_the_same_file_adds_nothing(project):
    body = lines(aed(), trajectory())
    assert import_traces(project=project, lines=body).created == 2
    report = import_traces(project=project, lines=body, file="again.jsonl")
    assert report.ok and (report.created, report.duplicates) == (0, 2)
    assert Trace.objects.count() == 2 and TraceSource.objects.count() == 1

    upload = SimpleUploadedFile("upload.jsonl", b"".join(body))
    report = import_traces(project=project, lines=upload, file=upload.name)
    assert report.ok and (report.created, report.duplicates) == (0, 2) and TraceSource.objects.count() == 1


def test_skip_bad_lines_stores_the_good_ones(project):
    body = lines(aed(), aed("b", outcome={"passed": "yes"}, steps=[]), trajectory(), aed(task_id="changed"))
    report = import_traces(project=project, lines=body, skip_bad_lines=True)
    assert found(report) == [("traces.jsonl", 2, "outcome.passed"), ("traces.jsonl", 2, "steps"),
                             ("traces.jsonl", 4, "trace_id")]
    assert (report.created, report.skipped, report.lines) == (2, 2, 4)
    assert sorted(Trace.objects.values_list("trace_id", flat=True)) == ["aed-1", "traj-1"]
    assert TraceSource.objects.get().rows == 2


def test_invalid_utf8_and_invalid_json_lines(project):
    body = [b'{"trace_id": "x\xff"}\n', b"\n", b"{not json}\n", b"[1, 2]\n", b'{"trace_id": NaN}\n',
            json.dumps(aed("nul\u0000")).encode() + b"\n", *lines(aed())]
    report = import_traces(project=project, lines=body)
    assert [(e.line, e.field) for e in report.errors] == [
        (1, "(line)"), (3, "(line)"), (4, "(line)"), (5, "(line)"), (6, "trace_id")]
    assert report.errors[0].message.startswith("not UTF-8")
    assert report.errors[1].message.startswith("invalid JSON")
    assert report.errors[2].message == "each line must be a JSON object"
    assert report.lines == 7 and report.created == 0 and not Trace.objects.exists()

    skipped = import_traces(project=project, lines=body, skip_bad_lines=True)
    assert skipped.created == 1 and skipped.skipped == 5
    assert list(Trace.objects.values_list("trace_id", flat=True)) == ["aed-1"]


def test_anonymous_user_is_not_recorded(project):
    from django.contrib.auth.models import AnonymousUser

    import_traces(project=project, lines=lines(aed()), user=AnonymousUser())
    assert TraceSource.objects.get().created_by is None


# --- trace formats of dataplatform.conversations.readers -------------------------------------------------------

def test_a_swe_agent_traj_file_is_one_trace_named_after_its_instance(project):
    upload = SimpleUploadedFile(SWE_AGENT_TRAJ, traces.body(SWE_AGENT_TRAJ))
    report = import_traces(project=project, lines=upload, file=upload.name)
    lines = traces.body(SWE_AGENT_TRAJ).count(b"\n")  # the report counts the document's lines: it read them all
    assert report.ok and (report.lines, report.created) == (lines, 1)
    trace = Trace.objects.get()
    assert (trace.task_id, trace.harness, trace.policy_model, trace.environment, trace.passed) == (
        "textkit__textkit-42", "swe-agent", "claude-sonnet-4", "main", None)
    assert trace.trace_id == f"textkit__textkit-42-{trace.source_sha256[:12]}" and trace.source_format == "swe_agent"
    assert [step["index"] for step in trace.steps] == list(range(6))
    find, found = trace.steps[2], trace.steps[3]
    assert (find["role"], find["content"], find["reasoning"]) == (
        "assistant", "Let me find the file that defines slugify.", "The issue names slugify; find its module first.")
    assert find["tool_calls"] == [{"id": "call_a1", "type": "function",
                                   "function": {"name": "find_file", "arguments": '{"file_name":"slugify.py"}'}}]
    assert find["action"] == 'find_file({"file_name":"slugify.py"})' and find["observation"] is None
    assert (found["role"], found["tool_call_id"], found["action"]) == ("tool", "call_a1", None)
    assert find["agent"] == "main"  # the history item's own fields stay on the step
    assert set(trace.meta) == {"info", "replay_config", "trajectory"} and trace.tools == []

    again = import_traces(project=project, lines=upload, file="copy.traj")
    assert again.ok and (again.created, again.duplicates) == (0, 1)


@pytest.mark.parametrize(("name", "bad_line", "fields", "formats"), [
    (SWE_AGENT, 3, ["history[1].tool_calls[0].function.name", "history[2].role"], {"swe_agent"}),
    (OPENHANDS, 3, ["history[0].args.image_urls",
                    "history[1].tool_call_metadata.model_response.choices[0].message.tool_calls[0].function.arguments"],
     {"openhands"}),
    (OPENAI, 3, ["messages[1].tool_calls[0].function.arguments"], {"openai"}),
    # upstream's example shape is this importer's own `messages` trajectory; json_content lines are read as its format
    (SWE_LABELER, 4, ["json_content"], {"messages", "swe_labeler"}),
])
def test_trace_files_import_but_a_bad_record_stops_the_file(project, name, bad_line, fields, formats):
    body = traces.body(name)
    report = import_traces(project=project, lines=io.BytesIO(body), file=name)
    assert [(e.line, e.field) for e in report.errors] == [(bad_line, field) for field in fields]
    assert report.created == 0 and not Trace.objects.exists() and not TraceSource.objects.exists()

    skipped = import_traces(project=project, lines=io.BytesIO(body), file=name, skip_bad_lines=True)
    good = len(traces.records(name)) - 1
    assert (skipped.created, skipped.skipped) == (good, 1) and Trace.objects.count() == good
    assert set(Trace.objects.values_list("source_format", flat=True)) == formats


def test_an_openhands_run_keeps_its_calls_results_tools_and_outcome(project):
    report = import_traces(project=project, lines=[traces.body(OPENHANDS).splitlines()[0]], file=OPENHANDS)
    assert report.ok
    trace = Trace.objects.get()
    assert (trace.task_id, trace.passed, trace.policy_model, trace.harness) == (
        "textkit__textkit-42", True, "openai/qwen3-coder", "openhands")
    assert [tool["function"]["name"] for tool in trace.tools] == ["execute_bash", "str_replace_editor", "finish"]
    reads = trace.steps[2]
    assert [call["id"] for call in reads["tool_calls"]] == ["toolu_01", "toolu_02"]
    assert reads["action"].splitlines()[1] == 'execute_bash({"command": "cat tests/test_slugify.py"})'
    assert [(s["role"], s.get("tool_call_id")) for s in trace.steps[3:5]] == [("tool", "toolu_01"),
                                                                              ("tool", "toolu_02")]
    assert [event["id"] for event in reads["events"]] == [4, 5] and "other_events" in trace.meta


def test_a_read_trace_s_fields_are_checked_against_the_columns(project):
    record = traces.records(OPENAI)[0] | {"model": "m" * 201}
    report = import_traces(project=project, lines=lines(record, {"messages": "no"}))
    assert [(e.line, e.field, e.message) for e in report.errors] == [
        (1, "model", "must be at most 200 characters long"),
        (2, "messages", "must be a non-empty list of message objects")]


def test_the_real_openhands_files_import_as_traces_with_their_outcome_and_the_events_kept_outside(project):
    """Each generation of OpenHands output as its tools wrote it: a trace per run, one step per message the reader
    reads (compared with the files in tests/conversations/readers/test_openhands.py), the outcome from the format's
    own field, a task only where the run names one."""
    pairs, resolver = real_openhands.PAIRS_2024, real_openhands.RESOLVER  # gorilla's `correct` is no known outcome
    expected = {real_openhands.EVENTS_2025: ({"recall action": 1, "recall observation": 1}, [None]),  # not evaluated
                pairs: ({"null observation": real_openhands.null_observations(pairs)}, [None] * 2),
                resolver: ({}, [source["success"] for source in real_openhands.records(resolver)])}
    for name, (outside, passed) in expected.items():
        report = import_traces(project=project, lines=real_openhands.lines(name), file=name)
        assert report.ok and report.created == len(passed) and report.as_dict()["outside"] == outside, name
        for source, outcome in zip(real_openhands.records(name), passed, strict=True):
            record, _ = read_trace(source)
            trace = Trace.objects.get(trace_id=record.id_or(canonical_sha256(source)))
            assert [(step["role"], step["content"]) for step in trace.steps] == [
                (message.role, message.content) for message in record.conversation.messages]
            assert (trace.passed, trace.task_id, trace.source_format) == (outcome, record.task_id, "openhands")
    refused = Trace.objects.get(task_id="ponylang__ponyc-4593").steps[26]  # the malformed call OpenHands refused
    assert refused["role"] == "user" and refused["content"].startswith("Parameter 'command' is expected")
    assert refused["events"][0]["observation"] == "error"


# --- the real corpus (tests/fixtures/real) -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(real.IMPORTS))
def test_every_real_file_imports_message_by_message(project, name):
    report = import_traces(project=project, lines=io.BytesIO(real.body(name)), file=name.split("/")[-1])
    assert report.ok, report.errors
    trace = Trace.objects.get(project=project)
    # The SWE Labeler's example shape is also AED's own `messages` trajectory, read as it always was.
    labeler = real.IMPORTS[name][0] == "swe_labeler"
    assert (trace.source_format, trace.task_id) == (("messages", "") if labeler else real.IMPORTS[name])
    assert real.view(trace.steps) == real.expected(name)


def test_a_real_run_without_a_conversation_is_refused_naming_it(project):
    report = import_traces(project=project, lines=io.BytesIO(real.body(real.TAU_BENCH_FAILED)), file="results.json")
    assert [(e.line, e.field) for e in report.errors] == [(2, "traj")] and not Trace.objects.exists()
