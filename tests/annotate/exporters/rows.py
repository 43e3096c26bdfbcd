"""Export rows read back as a trainer gets them, and a chat template to render them with."""

import json

import datasets


def trained(cells: list[dict]) -> list[dict]:
    """Message cells as pyarrow reads them, as `datasets` gives them to a trainer: tool calls as objects, and
    without the nulls of fields a message does not have (what TRL's `remove_none_values` leaves out)."""
    return [{key: [json.loads(call) for call in value] if key == "tool_calls" else value
             for key, value in message.items() if value is not None} for message in cells]


def tools_of(cell: list[str] | None) -> list[dict] | None:
    return None if cell is None else [json.loads(tool) for tool in cell]


def load_shards(storage_root, export) -> datasets.Dataset:
    """The export's Parquet shards loaded by `datasets` as they are, as a trainer loads them."""
    files = [str(storage_root / export.location / shard["name"]) for shard in export.manifest["shards"]]
    return datasets.load_dataset("parquet", data_files=files, split="train")


# A chat template of the kind that renders tools, reasoning and tool calls (as Qwen3's does), reading each
# where Hugging Face templates look for it; `tojson` shows whether the arguments are an object or text.
TOOL_TEMPLATE = (
    "{% for tool in tools or [] %}[tool {{ tool.function.name }} {{ tool.function.parameters | tojson }}]{% endfor %}"
    "{% for message in messages %}[{{ message.role }}]"
    "{% if message.reasoning_content %}[think]{{ message.reasoning_content }}[/think]{% endif %}"
    "{{ message.content }}"
    "{% for call in message.tool_calls or [] %}[call {{ call.function.name }} {{ call.function.arguments | tojson }}]"
    "{% endfor %}"
    "{% if message.tool_call_id %}[result of {{ message.tool_call_id }}]{% endif %}{% endfor %}"
)
