import hashlib
import io
import json

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from dataplatform.conversations.readers import read_trace
from dataplatform.exports import stored, tasks
from dataplatform.exports.models import StoredRow
from dataplatform.imports import canonical_sha256
from labeler.importers import import_tasks, import_trajectories
from labeler.models import Source, SourceKind, SweTask, Trajectory
from tests import real_openhands
from tests import real_traces as real
from tests import trace_fixtures as traces
from tests.factories import UserFactory
from tests.trace_fixtures import OPENAI, OPENHANDS, SWE_AGENT, SWE_AGENT_TRAJ, SWE_LABELER

pytestmark = pytest.mark.django_db


def lines(*records):
    return [(json.dumps(r) if not isinstance(r, str) else r).encode() + b"\n" for r in records]


def task(instance_id="astropy__astropy-12907", **overrides):
    record = {
        "repo": "astropy/astropy", "instance_id": instance_id, "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
        "problem_statement": "Modeling's `separability_matrix` does not compute separability correctly",
        "patch": "diff --git a/x b/x\n", "test_patch": "diff --git a/t b/t\n",
        "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6]"]',
        "PASS_TO_PASS": ["astropy/modeling/tests/test_separable.py::test_coord_matrix"],
        "version": "4.3", "created_at": "2022-03-03T15:14:54Z", "hints_text": "",
    }
    return record | overrides


def trajectory(trajectory_id="t1", instance_id="astropy__astropy-12907", **overrides):
    record = {
        "trajectory_id": trajectory_id, "instance_id": instance_id, "model": "gpt-4o", "scaffold": "swe-agent",
        "messages": [
            {"role": "system", "content": "You are a software engineer."},
            {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        "resolved": True,
    }
    return record | overrides


def errors_of(report):
    return [(e.file, e.line, e.field) for e in report.errors]


def test_good_tasks_file_stores_fields_and_keeps_extra(project):
    user = UserFactory(username="curator")
    body = lines(task(), task("django__django-11099", FAIL_TO_PASS=[], PASS_TO_PASS="[]"))
    report = import_tasks(project=project, lines=body, file="swe.jsonl", user=user)

    assert report.ok and report.created == 2 and report.lines == 2 and report.duplicates == 0
    stored = SweTask.objects.get(instance_id="astropy__astropy-12907")
    assert stored.repo == "astropy/astropy" and stored.base_commit.startswith("d16bfe05")
    assert stored.problem_statement.startswith("Modeling's") and stored.patch and stored.test_patch
    assert stored.fail_to_pass == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6]"]
    assert stored.pass_to_pass == ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]
    assert stored.extra == {"version": "4.3", "created_at": "2022-03-03T15:14:54Z", "hints_text": ""}
    assert stored.source_sha256 == canonical_sha256(task())
    other = SweTask.objects.get(instance_id="django__django-11099")
    assert other.fail_to_pass == [] and other.pass_to_pass == []

    source = Source.objects.get()
    assert (source.project, source.kind, source.filename, source.rows, source.created_by) == (
        project, SourceKind.TASKS, "swe.jsonl", 2, user)
    assert source.sha256 == hashlib.sha256(b"".join(body)).hexdigest()
    assert set(source.tasks.all()) == set(SweTask.objects.all())


def test_uploaded_file_and_optional_fields(project):
    upload = SimpleUploadedFile("min.jsonl", b'{"instance_id": "a-1", "problem_statement": "p"}\n')
    report = import_tasks(project=project, lines=upload, file=upload.name)
    assert report.ok and report.created == 1
    stored = SweTask.objects.get()
    assert (stored.repo, stored.patch, stored.fail_to_pass, stored.extra) == ("", "", [], {})
    assert Source.objects.get().sha256 == hashlib.sha256(b'{"instance_id": "a-1", "problem_statement": "p"}\n').hexdigest()


def test_dry_run_reports_without_writing(project):
    report = import_tasks(project=project, lines=lines(task()), dry_run=True)
    assert report.ok and report.dry_run and report.created == 0
    assert not SweTask.objects.exists() and not Source.objects.exists()


def test_errors_name_file_line_and_field_and_nothing_is_written(project):
    report = import_tasks(project=project, file="bad.jsonl", lines=lines(
        task(),
        "{not json",
        {"instance_id": "x-1"},
        task("x-2", FAIL_TO_PASS="not a list"),
        task("x-3", PASS_TO_PASS='{"a": 1}'),
        task("x-4", FAIL_TO_PASS=[1, 2]),
        [1, 2],
        task("", problem_statement="  "),
        task("x-5", base_commit=5, repo="r" * 301),
    ))
    assert errors_of(report) == [
        ("bad.jsonl", 2, "(line)"), ("bad.jsonl", 3, "problem_statement"), ("bad.jsonl", 4, "FAIL_TO_PASS"),
        ("bad.jsonl", 5, "PASS_TO_PASS"), ("bad.jsonl", 6, "FAIL_TO_PASS"), ("bad.jsonl", 7, "(line)"),
        ("bad.jsonl", 8, "instance_id"), ("bad.jsonl", 8, "problem_statement"),
        ("bad.jsonl", 9, "repo"), ("bad.jsonl", 9, "base_commit"),
    ]
    messages = {(e.line, e.field): e.message for e in report.errors}
    assert messages[(2, "(line)")].startswith("invalid JSON")
    assert messages[(3, "problem_statement")] == "must be a non-empty string"
    assert "JSON list of test names" in messages[(4, "FAIL_TO_PASS")]
    assert messages[(7, "(line)")] == "each line must be a JSON object"
    assert messages[(9, "repo")] == "must be at most 300 characters long"
    assert report.created == 0 and report.skipped == 0
    assert not SweTask.objects.exists() and not Source.objects.exists()


def test_skip_bad_lines_imports_the_rest(project):
    report = import_tasks(project=project, lines=lines(task(), "{oops", {"instance_id": "y"}), skip_bad_lines=True)
    assert report.created == 1 and report.skipped == 2 and len(report.errors) == 2
    assert list(SweTask.objects.values_list("instance_id", flat=True)) == ["astropy__astropy-12907"]
    assert Source.objects.get().rows == 1


def test_reimporting_the_same_file_writes_nothing_and_counts_duplicates(project):
    body = lines(task(), task("b-2"))
    import_tasks(project=project, lines=body)
    again = import_tasks(project=project, lines=body)
    assert again.ok and again.created == 0 and again.duplicates == 2
    assert SweTask.objects.count() == 2 and Source.objects.count() == 1


def test_same_records_in_another_file_are_duplicates(project):
    import_tasks(project=project, lines=lines(task()))
    report = import_tasks(project=project, lines=lines(task(), task(), task("c-3")))  # repeated line: also a duplicate
    assert report.ok and report.created == 1 and report.duplicates == 2
    assert SweTask.objects.count() == 2 and Source.objects.count() == 2


def test_known_instance_id_with_different_content_is_an_error(project):
    import_tasks(project=project, lines=lines(task()))
    report = import_tasks(project=project, file="v2.jsonl", lines=lines(task("d-1"), task(problem_statement="new")))
    assert errors_of(report) == [("v2.jsonl", 2, "instance_id")]
    assert report.errors[0].message == (
        "instance_id astropy__astropy-12907 already exists in this project with different content")
    assert report.created == 0 and SweTask.objects.count() == 1


def test_repeated_instance_id_in_one_file_names_the_first_line(project):
    report = import_tasks(project=project, file="f.jsonl", lines=lines(task(), task("e-2"), task(patch="other")))
    assert errors_of(report) == [("f.jsonl", 3, "instance_id")]
    assert "line 1" in report.errors[0].message
    assert not SweTask.objects.exists()


def test_invalid_utf8_line_is_reported(project):
    report = import_tasks(project=project, file="u.jsonl", lines=[json.dumps(task()).encode() + b"\n", b"\xff\xfe{}\n"])
    assert errors_of(report) == [("u.jsonl", 2, "(line)")] and "not UTF-8" in report.errors[0].message
    assert not SweTask.objects.exists()


def test_values_postgres_cannot_store_are_line_errors(project):
    report = import_tasks(project=project, file="n.jsonl", lines=lines(
        task(problem_statement="nul \u0000 here"), task("n-2", extra_field={"deep": ["\ud800"]}), '{"a": NaN}'))
    assert errors_of(report) == [("n.jsonl", 1, "problem_statement"), ("n.jsonl", 2, "extra_field"),
                                 ("n.jsonl", 3, "(line)")]
    assert not SweTask.objects.exists()


def test_str_lines_are_accepted(project):
    report = import_tasks(project=project, lines=[json.dumps(task()) + "\n", "\n"])
    assert report.ok and report.created == 1


def test_trajectories_link_to_tasks_and_keep_extra(project, other_project):
    import_tasks(project=project, lines=lines(task()))
    import_tasks(project=other_project, lines=lines(task("unknown-1")))
    report = import_trajectories(project=project, file="traj.jsonl",
                                 lines=lines(trajectory(), trajectory("t2", "unknown-1", model=None)))
    assert report.ok and report.created == 2
    linked, unlinked = Trajectory.objects.order_by("trajectory_id")
    assert linked.task == SweTask.objects.get(project=project) and unlinked.task is None
    assert linked.model == "gpt-4o" and linked.scaffold == "swe-agent" and unlinked.model == ""
    # Stored normalised (text parts joined, null content beside tool calls as ""), the rest kept in extra.
    assert linked.messages == [
        {"role": "system", "content": "You are a software engineer."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"},
    ]
    assert linked.extra == {"resolved": True} and linked.source_format == "swe_labeler" and linked.tools == []
    source = Source.objects.get(project=project, kind=SourceKind.TRAJECTORIES)
    assert source.rows == 2 and set(source.trajectories.all()) == set(Trajectory.objects.all())

    again = import_trajectories(project=project, lines=lines(trajectory()))
    assert again.ok and again.duplicates == 1 and again.created == 0
    changed = import_trajectories(project=project, lines=lines(trajectory(scaffold="openhands")))
    assert [e.field for e in changed.errors] == ["trajectory_id"] and Trajectory.objects.count() == 2


def test_trajectory_messages_are_validated(project):
    report = import_trajectories(project=project, file="t.jsonl", lines=lines(
        trajectory("m1", messages=[]),
        trajectory("m2", messages="hello"),
        trajectory("m3", messages=[{"role": "user", "content": 5}, "text", {"content": "no role"}]),
        trajectory("m4", messages=[{"role": "user", "content": ["not an object"]}]),
        trajectory("", instance_id=None),
        trajectory("m5", model=7),
        trajectory("m6", messages=[{"role": "assistant"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}]),
    ))
    assert errors_of(report) == [
        ("t.jsonl", 1, "messages"), ("t.jsonl", 2, "messages"),
        ("t.jsonl", 3, "messages[0].content"), ("t.jsonl", 3, "messages[1]"), ("t.jsonl", 3, "messages[2].role"),
        ("t.jsonl", 4, "messages[0].content[0]"),
        ("t.jsonl", 5, "trajectory_id"), ("t.jsonl", 5, "instance_id"),
        ("t.jsonl", 6, "model"),
        ("t.jsonl", 7, "messages"),  # its one assistant turn is empty: nothing the agent did would be kept
    ]
    assert not Trajectory.objects.exists()


# --- trajectories in the readers' trace formats ------------------------------------------------------------

@pytest.mark.parametrize(("name", "errors"), [
    (SWE_AGENT, [(3, "history[1].tool_calls[0].function.name"), (3, "history[2].role")]),
    (OPENHANDS, [(3, "history[0].args.image_urls"),
                 (3, "history[1].tool_call_metadata.model_response.choices[0].message.tool_calls[0].function.arguments")]),
    (OPENAI, [(3, "messages[1].tool_calls[0].function.arguments")]),  # line 2 names no task: kept unlinked
    (SWE_LABELER, [(4, "json_content")]),
])
def test_trace_files_import_as_trajectories_but_a_bad_record_stops_the_file(project, name, errors):
    body = traces.body(name)
    report = import_trajectories(project=project, lines=io.BytesIO(body), file=name)
    assert [(e.line, e.field) for e in report.errors] == errors
    assert report.created == 0 and not Trajectory.objects.exists() and not Source.objects.exists()

    skipped = import_trajectories(project=project, lines=io.BytesIO(body), file=name, skip_bad_lines=True)
    good = len(traces.records(name)) - len({line for line, _ in errors})
    assert skipped.created == good and Trajectory.objects.count() == good


def test_a_traj_file_links_to_the_task_it_is_named_after(project):
    import_tasks(project=project, lines=lines(task("textkit__textkit-42")))
    upload = SimpleUploadedFile(SWE_AGENT_TRAJ, traces.body(SWE_AGENT_TRAJ))
    report = import_trajectories(project=project, lines=upload, file=upload.name)
    assert report.ok and report.created == 1
    trajectory = Trajectory.objects.get()
    assert (trajectory.instance_id, trajectory.task.instance_id, trajectory.scaffold, trajectory.model) == (
        "textkit__textkit-42", "textkit__textkit-42", "swe-agent", "claude-sonnet-4")
    assert trajectory.source_format == "swe_agent" and set(trajectory.extra) == {"info", "replay_config", "trajectory"}
    assert trajectory.messages[2]["tool_calls"][0]["function"] == {"name": "find_file",
                                                                   "arguments": '{"file_name":"slugify.py"}'}
    assert trajectory.messages[2]["reasoning"] == "The issue names slugify; find its module first."


def test_openhands_and_anthropic_trajectories_keep_their_tools_and_calls(project):
    report = import_trajectories(project=project, file="mixed.jsonl", lines=[
        traces.body(OPENHANDS).splitlines()[0], traces.body(SWE_LABELER).splitlines()[1]])
    assert report.ok and report.created == 2
    run, blocks = (Trajectory.objects.get(source_format=name) for name in ("openhands", "swe_labeler"))
    assert [tool["function"]["name"] for tool in run.tools] == ["execute_bash", "str_replace_editor", "finish"]
    assert (run.instance_id, run.model, run.scaffold) == ("textkit__textkit-42", "openai/qwen3-coder", "openhands")
    assert run.trajectory_id == f"textkit__textkit-42-{run.source_sha256[:12]}"  # the run has no id of its own
    assert [m["role"] for m in blocks.messages].count("tool") == 2 and blocks.trajectory_id == "request-7"


def test_the_real_openhands_files_import_as_trajectories_with_or_without_a_task(project):
    """Each generation of OpenHands output, as its tools wrote it: every record a trajectory, the same messages the
    reader reads (tests/conversations/readers/test_openhands.py compares them with the files), the events kept
    outside the conversation counted before anything is written."""
    pairs = real_openhands.PAIRS_2024
    outside = {real_openhands.EVENTS_2025: {"recall action": 1, "recall observation": 1},
               pairs: {"null observation": real_openhands.null_observations(pairs)}, real_openhands.RESOLVER: {}}
    for name, kept_outside in outside.items():
        dry = import_trajectories(project=project, lines=real_openhands.lines(name), file=name, dry_run=True)
        assert dry.ok and dry.as_dict()["outside"] == kept_outside, name
        report = import_trajectories(project=project, lines=real_openhands.lines(name), file=name)
        sources = real_openhands.records(name)
        assert report.ok and report.created == len(sources), report.errors
        for source in sources:
            record, _ = read_trace(source)
            stored = Trajectory.objects.get(trajectory_id=record.id_or(canonical_sha256(source)))
            assert stored.messages == record.stored_messages() and stored.source_format == "openhands"
            assert stored.instance_id == record.task_id and stored.task is None  # no such task in the project
    assert set(Trajectory.objects.values_list("instance_id", flat=True)) == {
        "ponylang__ponyc-4593", "neubig/pr-viewer#5", ""}


# --- the real corpus (tests/fixtures/real) -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(real.IMPORTS))
def test_every_real_file_imports_message_by_message(project, name):
    report = import_trajectories(project=project, lines=io.BytesIO(real.body(name)), file=name.split("/")[-1])
    assert report.ok, report.errors
    trajectory = Trajectory.objects.get(project=project)
    assert (trajectory.source_format, trajectory.instance_id) == real.IMPORTS[name]
    assert real.view(trajectory.messages) == real.expected(name)


def test_imported_trajectories_have_a_worker_derive_their_export_rows(project, settings, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    settings.EXPORTS_BUILD_AHEAD = True
    cache.clear()
    sent = []
    monkeypatch.setattr(tasks.build_stored_rows, "apply_async", lambda **kwargs: sent.append(kwargs))
    with django_capture_on_commit_callbacks(execute=True):
        import_tasks(project=project, lines=lines(task()))
    assert sent == []  # tasks give no stored rows
    with django_capture_on_commit_callbacks(execute=True):
        import_trajectories(project=project, lines=lines(trajectory(), trajectory("t2")))
    assert [call["args"] for call in sent] == [[project.pk]]
    assert tasks.build_stored_rows(project.pk)["swe.trajectories"] == 2  # what the worker runs
    rows = StoredRow.objects.filter(kind="swe.trajectories", project=project).order_by("source_id")
    assert [row.row["trajectory_id"] for row in rows] == ["t1", "t2"]
    assert stored.build_project(project)["swe.trajectories"] == 0  # derived once
