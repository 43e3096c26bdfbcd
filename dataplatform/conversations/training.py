"""Conversations in export rows, in the shape TRL and Hugging Face chat templates read (DESIGN.md section 8).

A message is a struct of `role`, `content`, `reasoning_content`, `tool_calls`, `tool_call_id` and `name`, null
where the message has none: `Message.for_training()` as a row. Each tool call, like each function schema of
the `tools` column, is a JSON value (Arrow's canonical `arrow.json` type), since a call's arguments are any
JSON object and no struct of fixed fields holds them. This is the layout TRL's dataset docs give for tool
calling (`tool_calls: List(Json())`, `tools: List(Json())`): `datasets` reads JSON values back as objects, so
a row goes into `apply_chat_template(messages, tools=tools)` as it is (after TRL's `remove_none_values`, or
any drop of the null fields); pyarrow and pandas read them as JSON text.

Every app builds its rows with `messages_cell` and `tools_cell` and yields `record_batch(rows, schema)`.
"""

import json

import pyarrow as pa

JSON = pa.json_()
MESSAGES = pa.list_(pa.struct([
    ("role", pa.string()),
    ("content", pa.string()),
    ("reasoning_content", pa.string()),
    ("tool_calls", pa.list_(JSON)),  # each {id, type: function, function: {name, arguments}}
    ("tool_call_id", pa.string()),  # a tool result: the call it answers
    ("name", pa.string()),  # a tool result: the function's name
]))
# The function schemas the conversation offers; null when it offers none (some templates announce an empty list).
TOOLS = pa.list_(JSON)

# The tools column's meaning, for the kinds' field_meanings (their dataset cards' Fields tables); each kind says
# what its own MESSAGES columns hold.
TOOLS_MEANINGS = {"tools": "The function schemas (JSON) the model was offered, for apply_chat_template(tools=...); "
                           "null when it was offered none."}


def messages_cell(messages: list[dict]) -> list[dict]:
    """`for_training()` messages as a cell of MESSAGES, their tool calls as JSON text (see `record_batch`)."""
    return [{**message, "tool_calls": [_json_text(call) for call in message["tool_calls"]]}
            if "tool_calls" in message else message for message in messages]


def tools_cell(tools) -> list[str] | None:
    """Function schemas as a cell of TOOLS."""
    return [_json_text(tool) for tool in tools] or None


def record_batch(rows: list[dict], schema: pa.Schema) -> pa.RecordBatch:
    """Rows whose JSON values are given as JSON text, as a batch of `schema`.

    pyarrow builds no JSON-typed column from Python values: the batch is built with text in their place, then
    cast (the text is the JSON's storage, so nothing is converted)."""
    return pa.RecordBatch.from_pylist(rows, schema=text_schema(schema)).cast(schema)


def text_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with each JSON value as its text: the types a JSONL shard parses with (JSON values are written
    there as JSON text), before a cast back to `schema`."""
    return pa.schema([field.with_type(_as_text(field.type)) for field in schema])


def _json_text(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def _as_text(type_: pa.DataType) -> pa.DataType:
    if type_ == JSON:
        return pa.string()
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(_as_text(type_.value_type)))
    if pa.types.is_struct(type_):
        return pa.struct([type_.field(index).with_type(_as_text(type_.field(index).type))
                          for index in range(type_.num_fields)])
    return type_
