"""Export rows read back as a trainer gets them."""

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
