import io
import json

import pytest

from annotate.importers import import_prompts
from annotate.models import Item
from dataplatform.imports import canonical_sha256

from .. import real_traces as real
from . import agentic

pytestmark = pytest.mark.django_db


def lines(*records):
    return [(json.dumps(r) if not isinstance(r, str) else r).encode() + b"\n" for r in records]


GOOD = {"id": "p1", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
        "meta": {"source": "unit"}}


def test_imports_good_lines_and_dedups_on_reimport(project):
    report = import_prompts(project=project, lines=lines(GOOD, {"messages": [{"role": "user", "content": "hi"}]}),
                            file="p.jsonl")
    assert report.ok and report.created == 2
    item = Item.objects.get(external_id="p1")
    assert item.messages == GOOD["messages"] and item.meta == {"source": "unit"}
    again = import_prompts(project=project, lines=lines(GOOD), file="p.jsonl")
    assert again.created == 0 and again.duplicates == 1 and Item.objects.count() == 2


def test_errors_name_file_line_and_field_and_nothing_is_written(project):
    report = import_prompts(project=project, file="bad.jsonl", lines=lines(
        GOOD,
        "{not json",
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
        {"messages": []},
        [1, 2],
    ))
    found = {(e.line, e.field) for e in report.errors}
    assert found == {(2, "(line)"), (3, "messages[0].role"), (4, "messages[0].content"), (5, "messages[1].role"),
                     (6, "messages"), (7, "(line)")}
    assert all(e.file == "bad.jsonl" for e in report.errors)
    assert "invalid JSON" in report.errors[0].message
    assert report.created == 0 and not Item.objects.exists()


def test_skip_bad_lines_imports_the_rest(project):
    report = import_prompts(project=project, lines=lines(GOOD, "{oops"), skip_bad_lines=True)
    assert report.created == 1 and report.skipped == 1 and len(report.errors) == 1


def test_dry_run_reports_without_writing(project):
    report = import_prompts(project=project, lines=lines(GOOD), dry_run=True)
    assert report.ok and report.created == 0 and not Item.objects.exists()


def test_non_utf8_line_is_reported(project):
    report = import_prompts(project=project, lines=[b"\xff\xfe{}\n"])
    assert report.errors[0].line == 1 and "not UTF-8" in report.errors[0].message


# --- agentic context: reasoning, tool calls and tool results before the model's turn --------------------

def test_a_prompt_keeps_its_reasoning_tool_calls_tool_results_and_tools(project):
    report = import_prompts(project=project, lines=lines(agentic.record()), file="agent.jsonl")
    assert report.ok and report.created == 1, report.as_dict()
    item = Item.objects.get()
    assert item.messages == agentic.STORED_MESSAGES and item.tools == agentic.STORED_TOOLS


def test_the_same_prompt_spelled_otherwise_is_the_same_record_and_other_tools_another(project):
    import_prompts(project=project, lines=lines(agentic.record()))
    respelled = agentic.record()
    respelled["messages"][2]["thinking"] = respelled["messages"][2].pop("reasoning_content")
    respelled["tools"] = [{"type": "function", "function": respelled["tools"][0]}]
    again = import_prompts(project=project, lines=lines(respelled))
    assert again.duplicates == 1 and again.created == 0
    other_tools = agentic.record()
    other_tools["tools"][0]["description"] = "Today's weather."
    assert import_prompts(project=project, lines=lines(other_tools)).created == 1
    assert Item.objects.count() == 2


def test_a_prompt_without_tools_keeps_the_source_hash_it_had_before_tools(project):
    import_prompts(project=project, lines=lines(GOOD))
    assert Item.objects.get().source_sha256 == canonical_sha256({"id": "p1", "messages": GOOD["messages"]})


def test_agentic_problems_name_their_field(project):
    def broken(change):
        record = agentic.record()
        change(record)
        return record

    report = import_prompts(project=project, file="agent.jsonl", lines=lines(
        broken(lambda r: r["messages"][1].update(content=[{"type": "image_url", "image_url": {"url": "x"}}])),
        broken(lambda r: r["messages"][2]["tool_calls"][0]["function"].pop("name")),
        broken(lambda r: r.update(tools={"name": "get_weather"})),
        broken(lambda r: r["messages"].pop()),  # ends with the assistant's tool call: nothing for the model to do
        broken(lambda r: r["messages"][1].update(role="system")),
    ))
    assert [(e.line, e.field) for e in report.errors] == [
        (1, "messages[1].content[0]"), (2, "messages[2].tool_calls[0].function.name"), (3, "tools"),
        (4, "messages[2].role"), (5, "messages")]
    assert "image_url" in report.errors[0].message and not Item.objects.exists()


# --- the real corpus (tests/fixtures/real) -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(real.IMPORTS))
def test_every_real_trace_imports_as_a_prompt_up_to_the_model_s_last_turn(project, name):
    report = import_prompts(project=project, lines=io.BytesIO(real.body(name)), file=name.split("/")[-1])
    assert report.ok, report.errors
    item = Item.objects.get(project=project)
    source = real.expected(name)
    answer = len(source) - next(i for i, m in enumerate(reversed(source)) if m[0] != "assistant")
    assert real.view(item.messages) == source[:answer]
    trace = item.meta.get("trace", {})
    assert real.view(trace.get("answer", [])) == source[answer:]  # the model's last turn, kept beside the prompt
    assert trace.get("format", "openai") == real.IMPORTS[name][0]


def test_a_claude_code_session_s_reasoning_is_in_the_prompt(project):
    import_prompts(project=project, lines=io.BytesIO(real.body(real.CLAUDE_CODE)), file="session.jsonl")
    item = Item.objects.get(project=project)
    assert item.external_id == "4d5611e5-241a-462a-8d15-5122611a9569"
    assert item.messages[1]["reasoning"] == real.THINKING and len(item.messages[1]["tool_calls"]) == 2
