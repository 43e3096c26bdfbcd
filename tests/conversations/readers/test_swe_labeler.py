"""The SWE Labeler's trajectories into the conversation model: upstream's example shape, json_content as
text or object, Anthropic content blocks, and upstream's order of ids."""

from dataplatform.conversations.readers import swe_labeler
from tests.trace_fixtures import SWE_LABELER, records


def test_upstream_s_example_shape_is_read_as_is():
    record, problems = swe_labeler.read(records(SWE_LABELER)[0])
    assert problems == []
    assert [m.role for m in record.conversation.messages] == ["user", "assistant", "assistant"]
    assert (record.trace_id, record.task_id, record.model, record.harness) == (
        "synthetic-trajectory-1", "synthetic-trajectory-1", "example-model", "example-agent")  # upstream's task id
    assert set(record.meta) == {"labels"}


def test_anthropic_blocks_in_json_content_become_calls_results_and_reasoning():
    record, problems = swe_labeler.read(records(SWE_LABELER)[1])
    assert problems == []
    messages = record.conversation.messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
    read = messages[2]
    assert (read.content, read.reasoning) == ("Reading the parser.", "Read the parser before editing it.")
    assert [(c.id, c.name, c.arguments) for c in read.tool_calls] == [
        ("toolu_r1", "Read", '{"file_path":"parser.py"}')]
    assert (messages[3].tool_call_id, messages[3].content) == ("toolu_r1",
                                                               "def parse(text):\n    return text.split()[0]")
    assert messages[4].content == "" and messages[4].tool_calls[0].name == "Bash"
    # A user message of results and text: the results first, then the text.
    assert (messages[5].tool_call_id, messages[5].content, messages[6].content) == (
        "toolu_b1", "3 passed in 0.05s", "Good. Now commit.")
    assert (record.trace_id, record.task_id) == ("request-7", "textkit__textkit-42")
    assert record.meta == {"source_artifact_uri": "artifact://synthetic/request-7"}


def test_json_content_as_an_object_names_the_run_and_its_model():
    record, _ = swe_labeler.read(records(SWE_LABELER)[2] | {"model": "ignored"})
    assert (record.trace_id, record.model, record.harness) == ("legacy-1", "example-model", "legacy-agent")
    assert record.origins["model"] == "json_content.model" and "label_result" in record.meta


def test_bad_records_name_the_field():
    assert swe_labeler.read(records(SWE_LABELER)[3])[1] == [("json_content", "must hold JSON: Expecting value at "
                                                                             "column 1")]
    image = {"type": "image", "source": {"data": "AAAA"}}
    bad_blocks = [{"role": "assistant", "content": [{"type": "tool_use", "name": "", "input": {}}, image]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}]
    assert swe_labeler.read({"trajectory_id": "", "json_content": bad_blocks})[1] == [
        ("trajectory_id", "must be a non-empty string"),
        ("json_content[0].content[0].name", "must be the tool's name, a non-empty string"),
        ("json_content[0].content[1]", "a 'image' block in a assistant message: only text, thinking, tool_use "
                                       "(assistant) and tool_result (user) blocks are read, and no block is left out"),
        ("json_content[1].content[0].content[0]", "a 'image_url' part: only text is supported, and a message is never "
                                                  "imported with a part left out")]
