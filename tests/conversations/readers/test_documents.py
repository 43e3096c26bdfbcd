"""Trace files told from their content: JSON Lines line by line, a JSON document read whole (an array of records,
a record, an object of records, a messages array), a session log as one record; the hint a broken document gets."""

import io
import json

from dataplatform.conversations.readers import document_name, documents, trace_records
from tests.real_traces import CLAUDE_CODE, TAU_BENCH, body
from tests.trace_fixtures import SWE_AGENT_TRAJ
from tests.trace_fixtures import body as fixture


def reads(lines, file="upload.jsonl"):
    return [(r.line, r.record, r.problem, r.field, r.name) for r in trace_records(lines, file)]


def test_a_traj_file_is_one_record_named_after_its_instance():
    [(line, record, problem, _, name)] = reads(io.BytesIO(fixture(SWE_AGENT_TRAJ)), SWE_AGENT_TRAJ)
    assert (line, problem, name) == (1, "", "textkit__textkit-42") and record == json.loads(fixture(SWE_AGENT_TRAJ))
    assert document_name("runs/django__django-11099.traj") == "django__django-11099"
    assert document_name("django__django-11099.traj.json") == "django__django-11099"
    assert document_name("traces.jsonl") == document_name(".traj") == ""


def test_jsonl_is_read_line_by_line_and_its_bad_lines_are_their_own_errors():
    assert [(line, record) for line, record, *_ in reads([b"{}\n", b"\n", b'{"a": 1}\n'])] == [(1, {}), (3, {"a": 1})]
    found = reads([b'{"a": 1\n', b"{}\n", b"[1]\n"])  # a broken first line is JSON Lines, not a document
    assert [(line, problem[:12]) for line, _, problem, *_ in found] == [(1, "invalid JSON"), (2, ""),
                                                                       (3, "each line mu")]


def test_an_array_is_a_record_an_element_each_on_the_line_it_starts():
    text = b'[\n  {"messages": [{"role": "user", "content": "a"}]},\n  {\n    "id": "b"\n  },\n  3\n]\n'
    assert [(line, record, problem) for line, record, problem, *_ in reads(io.BytesIO(text), "runs.json")] == [
        (2, {"messages": [{"role": "user", "content": "a"}]}, ""), (3, {"id": "b"}, ""),
        (6, None, "each record must be a JSON object")]
    [(line, record, _, _, name)] = reads([b'[{"role": "user", "content": "hi"},\n', b'{"role": "assistant"}]'],
                                         "local.traj.json")
    assert (line, record, name) == (1, {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]},
                                    "local")  # a messages array is one conversation
    keyed = reads(io.BytesIO(b'{\n"x__y-1": {"messages": []},\n"x__y-2": {"history": []}\n}'))
    assert [(record, name) for _, record, _, _, name in keyed] == [({"messages": []}, "x__y-1"),
                                                                  ({"history": []}, "x__y-2")]


def test_a_broken_document_is_one_error_saying_it_was_read_as_one():
    text = body(TAU_BENCH).replace(b'"trial": 0', b'"trial": 0,', 1)  # a stray comma on line 331
    [(line, record, problem, field, _)] = reads(io.BytesIO(text), "tau.jsonl")
    assert (line, record, field) == (332, None, "(line)")
    assert problem.startswith("invalid JSON: Expecting property name enclosed in double quotes at column 3; the file "
                              "is read as one JSON document")
    [(_, _, problem, *_)] = reads([b"[\n", b'{"a": NaN}\n', b"]\n"])
    assert problem == "invalid JSON: NaN is not allowed"


def test_a_session_log_is_one_record_whose_problems_name_their_lines():
    [found] = trace_records(io.BytesIO(body(CLAUDE_CODE)), "s.jsonl")
    assert (found.line, found.end, len(found.record["entries"]), found.lines[:3]) == (1, 25, 25, (1, 2, 3))
    assert found.at("entries[17].message.content[0]") == (18, "message.content[0]") and found.at("x") == (1, "x")
    first = body(CLAUDE_CODE).splitlines(keepends=True)[:3]
    found = reads(first[:1] + [b"{not json\n"] + first[2:])
    assert [(line, record) for line, record, *_ in found] == [(2, None)]  # no session with a line missing


def test_documents_and_session_logs_are_bounded(monkeypatch):
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 10)
    [(line, record, problem, field, _)] = reads([b'{"history":\n', b"[]}\n"], "x.traj")
    assert (line, record, field) == (0, None, "(file)") and "is read whole, and this one is over" in problem
    [(_, _, problem, *_)] = reads(body(CLAUDE_CODE).splitlines(keepends=True)[:2])
    assert problem.startswith("a session log is read whole, as one trace")


def test_an_unreadable_line_of_a_document_is_its_own_problem_and_no_record_follows():
    found = reads([b"{\n", b'"a": "\xff"\n', b"}\n"], "x.traj")
    assert [(line, record) for line, record, *_ in found] == [(2, None)] and found[0][2].startswith("not UTF-8")


def test_a_first_line_holding_a_whole_array_is_a_bad_line_of_json_lines():
    assert [(line, problem[:12]) for line, _, problem, *_ in reads([b"[1, 2]\n", b"{}\n"])] == [
        (1, "each line mu"), (2, "")]
    assert [(line, record) for line, record, *_ in reads([b'[{"a": 1}, {"b": 2}]'])] == [(1, {"a": 1}), (1, {"b": 2})]
