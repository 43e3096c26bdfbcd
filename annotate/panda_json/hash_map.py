"""`hash_map`, as the onPanda app writes it (`usingHashMapRemoveRedundancy` in src/stores/pandaState.js).

A value that recurs in a file (a message's content or reasoning, a message's tool calls, one tool of a
dialog's `tools`) and whose copies together pass `MIN_LENGTH` characters is stored once in `hash_map`
under its sha256 (base64, of its canonical JSON), and every copy becomes `"<|hash|>" + that hash`.
"""

import base64
import hashlib
import json

HASH_PREFIX = "<|hash|>"
MIN_LENGTH = 8096  # the app's MIN_LENGTH_FOR_HASH_MAP


def object_hash(value) -> str:
    """The app's hashObjectSHA256Base64: sha256 of the JSON with sorted keys and no spaces, in base64."""
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(hashlib.sha256(canonical.encode("utf-8")).digest()).decode("ascii")


def _places(dialogs: dict):
    """(container, key) of every value the app may move into hash_map, in the app's order."""
    for dialog in dialogs.values():
        for message in dialog.get("messages", []):
            if isinstance(message.get("content"), str):
                yield message, "content"
            elif isinstance(message.get("content"), list):
                for chunk in message["content"]:
                    if isinstance(chunk, dict) and chunk.get("type") in chunk:
                        yield chunk, chunk["type"]
            if isinstance(message.get("reasoning"), str):
                yield message, "reasoning"
            if isinstance(message.get("tool_calls"), list):
                yield message, "tool_calls"
        for list_key in ("tool_configs", "tools"):
            if isinstance(dialog.get(list_key), list):
                for index in range(len(dialog[list_key])):
                    yield dialog[list_key], index


def use_hash_map(document: dict) -> dict:
    """Move the document's long repeated values of `dialogs` into its `hash_map` (in place; returned)."""
    records: dict[str, dict] = {}
    for container, key in _places(document["dialogs"]):
        value = container[key]
        digest = object_hash(value)
        record = records.setdefault(digest, {"value": value, "places": [],
                                             "length": len(value) if isinstance(value, str) else
                                             len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))})
        record["places"].append((container, key))
    for digest, record in records.items():
        if len(record["places"]) >= 2 and record["length"] * len(record["places"]) > MIN_LENGTH:
            document["hash_map"][digest] = record["value"]
            for container, key in record["places"]:
                container[key] = HASH_PREFIX + digest
    return document
