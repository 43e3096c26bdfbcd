"""Trace files: JSONL line by line, a SWE-agent .traj read whole."""

import io

from dataplatform.conversations.readers import document_name, documents, json_texts
from tests.trace_fixtures import SWE_AGENT_TRAJ, body


def test_a_traj_file_is_one_text_named_after_its_instance():
    texts = list(json_texts(io.BytesIO(body(SWE_AGENT_TRAJ)), SWE_AGENT_TRAJ))
    assert [(number, problem) for number, _, problem in texts] == [(1, None)]
    assert texts[0][1] == body(SWE_AGENT_TRAJ).decode()
    assert document_name("runs/django__django-11099.traj") == "django__django-11099"
    assert document_name("traces.jsonl") == ""


def test_jsonl_is_read_line_by_line():
    assert [number for number, _, _ in json_texts([b"{}\n", b"\n", b"{}\n"], "t.jsonl")] == [1, 3]


def test_an_unreadable_line_of_a_traj_is_its_own_problem_and_no_document_follows():
    texts = list(json_texts([b"{\n", b'"a": "\xff"\n', b"}\n"], "x.traj"))
    assert [(number, text) for number, text, _ in texts] == [(2, None)]
    assert texts[0][2].startswith("not UTF-8")


def test_a_traj_over_the_limit_is_refused_whole(monkeypatch):
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 10)
    [(number, text, problem)] = json_texts([b'{"history":\n', b"[]}\n"], "x.traj")
    assert (number, text) == (0, None) and "is read whole" in problem
