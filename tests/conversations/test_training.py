"""Conversations written into export rows: the training shape, with tool calls and tools as JSON values that
survive Parquet and come back from `datasets` as objects."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.training import JSON, MESSAGES, TOOLS, messages_cell, record_batch, tools_cell

SCHEMA = pa.schema([("id", pa.int64()), ("messages", MESSAGES), ("tools", TOOLS), ("ids", pa.list_(pa.int64()))])
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
AGENTIC = read_conversation([
    {"role": "user", "content": "Is it raining in Paris?"},
    {"role": "assistant", "content": None, "reasoning_content": "Look it up.",
     "tool_calls": [{"id": "call_7", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": "rain"},
], [TOOL]).conversation


def row(conversation: Conversation) -> dict:
    return {"id": 1, "messages": messages_cell(conversation.for_training()), "tools": tools_cell(conversation.tools),
            "ids": [1, 2]}


def through_parquet(batch: pa.RecordBatch) -> pa.Table:
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), sink)
    return pq.read_table(io.BytesIO(sink.getvalue()))


def trained(cells: list[dict]) -> list[dict]:
    """Message cells as pyarrow reads them, with tool calls parsed and the null fields left out."""
    return [{key: [json.loads(call) for call in value] if key == "tool_calls" else value
             for key, value in message.items() if value is not None} for message in cells]


def test_a_batch_has_the_schema_and_parquet_keeps_the_json_values():
    batch = record_batch([row(AGENTIC)], SCHEMA)
    assert batch.schema.equals(SCHEMA) and batch.schema.field("tools").type.value_type == JSON
    table = through_parquet(batch)
    assert table.schema.equals(SCHEMA)
    read = table.to_pylist()[0]
    assert trained(read["messages"]) == AGENTIC.for_training() and read["ids"] == [1, 2]
    assert read["messages"][1]["tool_calls"] == ['{"id": "call_7", "type": "function", "function": '
                                                 '{"name": "get_weather", "arguments": {"city": "Paris"}}}']
    assert [json.loads(tool) for tool in read["tools"]] == [TOOL]


def test_no_tools_is_a_null_cell():
    assert tools_cell(()) is None
    assert record_batch([row(Conversation(messages=(Message(role="user", content="hi"),)))], SCHEMA).to_pylist()[0][
        "tools"] is None


def test_datasets_reads_tool_calls_and_tools_back_as_objects(tmp_path):
    import datasets

    pq.write_table(pa.Table.from_batches([record_batch([row(AGENTIC)], SCHEMA)]), tmp_path / "rows.parquet")
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "rows.parquet"), split="train")[0]
    assert loaded["messages"][1]["tool_calls"] == AGENTIC.for_training()[1]["tool_calls"]
    assert loaded["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert loaded["tools"] == [TOOL]


# --- any conversation ---------------------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                           max_leaves=8)
# A model can write arguments that are not JSON, or JSON that is not an object: both stay text.
arguments = st.one_of(st.dictionaries(text, json_values, max_size=3).map(json.dumps), text,
                      st.lists(json_values, max_size=2).map(json.dumps))
tool_calls = st.lists(st.builds(ToolCall, id=text, name=text.filter(bool), arguments=arguments), max_size=2)
messages = st.one_of(
    st.builds(Message, role=st.sampled_from(["system", "user"]), content=text),
    st.builds(Message, role=st.just("assistant"), content=text, reasoning=text, tool_calls=tool_calls.map(tuple)),
    st.builds(Message, role=st.just("tool"), content=text, tool_call_id=text, name=text),
)
tools = st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": text.filter(bool)}, optional={"parameters": st.dictionaries(text, json_values, max_size=2)})}),
    max_size=2)
conversations = st.builds(Conversation, messages=st.lists(messages, min_size=1, max_size=5).map(tuple),
                          tools=tools.map(tuple))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(conversation=conversations)
def test_any_conversation_comes_back_from_parquet_in_the_training_shape(conversation):
    read = through_parquet(record_batch([row(conversation)], SCHEMA)).to_pylist()[0]
    assert trained(read["messages"]) == conversation.for_training()
    assert (None if read["tools"] is None else [json.loads(tool) for tool in read["tools"]]) == (
        list(conversation.tools) or None)
