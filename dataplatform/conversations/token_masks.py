"""Loss masks per token, aligned to a chat template's tokens: the trainer-ready form of a conversation whose
loss falls on some assistant messages only (`input_ids` with `completion_mask`, which TRL's SFT trainer reads
from a pre-tokenized dataset), and the identity of the template the ids belong to.

A masked assistant message's tokens are those its turn adds after the template's assistant header: from the
end of the conversation before it, rendered with the generation prompt, to the end of the conversation through
it, rendered closed (its end-of-turn marker included, so the model learns to stop). That needs a template whose
rendering of a conversation's beginning is a prefix of the whole; one that rewrites earlier turns (Qwen3 drops
the reasoning of past turns) is refused with `NotPrefixStable`, and the caller leaves the token columns empty.
"""

import hashlib
import json

import pyarrow as pa


class NotPrefixStable(ValueError):
    """The template renders a message differently once later messages follow it."""


# The columns that name the tokenizer and chat template a row's token ids belong to (null when it has none).
IDENTITY_COLUMNS = [
    pa.field("template_model", pa.string()),  # the model whose tokenizer made the ids
    pa.field("tokenizer_sha256", pa.string()),  # sha256 of the tokenizer's serialized vocabulary and rules
    pa.field("template_sha256", pa.string()),  # sha256 of the chat template the ids were rendered with
]
IDENTITY_MEANINGS = {
    "template_model": "The model whose tokenizer and chat template the row's token ids belong to; null when the "
                      "export had no tokenizer here or the row has no token ids.",
    "tokenizer_sha256": "sha256 of that tokenizer's serialized vocabulary and rules; null as template_model is.",
    "template_sha256": "sha256 of the chat template the token ids were rendered with; null as template_model is.",
}


def template_identity(backend) -> dict | None:
    """{model_id, tokenizer, tokenizer_sha256, chat_template_sha256} of the backend's tokenizer, or None when
    the backend has no tokenizer of its own here (a vLLM server without VLLM_TOKENIZER_DIR)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {"model_id": backend.model_id, "tokenizer": str(getattr(tokenizer, "name_or_path", "")),
            "tokenizer_sha256": _sha256(_serialized(tokenizer)),
            "chat_template_sha256": _sha256(template)}


# The pre-tokenized form TRL's SFT trainer reads as it is: `labels` (-100 where `completion_mask` is 0) beside
# the mask, because the trainer folds `completion_mask` into its labels only with completion_only_loss on,
# which it turns on by itself only for prompt/completion rows; a `labels` column it always uses.
TOKEN_COLUMNS = [
    pa.field("input_ids", pa.list_(pa.int64())),
    pa.field("completion_mask", pa.list_(pa.int64())),  # 1 on the tokens that get loss
    pa.field("labels", pa.list_(pa.int64())),  # input_ids, with -100 where completion_mask is 0
]
TOKEN_MEANINGS = {
    "input_ids": "The row's conversation as token ids under the chat template of template_model; null when the "
                 "row has no token ids.",
    "completion_mask": "Per token of input_ids: 1 where the loss falls, 0 elsewhere.",
    "labels": "input_ids with -100 (ignored by the loss) wherever completion_mask is 0.",
}
IGNORE_INDEX = -100  # what PyTorch's cross-entropy (and so every HF trainer) skips


def token_columns(input_ids: list[int] | None, mask: list[int] | None) -> dict:
    """The TOKEN_COLUMNS cells of a row (all null when it has no ids)."""
    if input_ids is None or mask is None:
        return {field.name: None for field in TOKEN_COLUMNS}
    return {"input_ids": input_ids, "completion_mask": mask,
            "labels": [token if bit else IGNORE_INDEX for token, bit in zip(input_ids, mask, strict=True)]}


def note_identity(notes: dict, backend) -> dict | None:
    """The backend's template identity, recorded in an export's notes under "tokenizer" (the export engine
    puts it in the manifest), or why its rows have no token ids."""
    identity = template_identity(backend)
    notes["tokenizer"] = identity or {"model_id": backend.model_id,
                                      "note": "no tokenizer here: the token columns are null"}
    return identity


def identity_columns(identity: dict | None) -> dict:
    """The IDENTITY_COLUMNS cells of a row whose ids belong to `identity` (all null for None)."""
    if identity is None:
        return {field.name: None for field in IDENTITY_COLUMNS}
    return {"template_model": identity["model_id"], "tokenizer_sha256": identity["tokenizer_sha256"],
            "template_sha256": identity["chat_template_sha256"]}


def _serialized(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a fast tokenizer: its whole tokenizer.json
    if backend is not None:
        return backend.to_str()
    return json.dumps(tokenizer.get_vocab(), sort_keys=True)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ids(tokenizer, messages: list[dict], tools, *, generation: bool) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation,
                                              tokenize=True, return_dict=False))


def completion_mask(tokenizer, messages: list[dict], tools, message_mask: list[int]) -> tuple[list[int], list[int]]:
    """(input_ids, completion_mask) of `messages` (training-shape dicts) under the tokenizer's chat template:
    1 on the tokens of every assistant message whose `message_mask` entry is 1, 0 elsewhere."""
    if len(message_mask) != len(messages):
        raise ValueError(f"{len(message_mask)} mask entries for {len(messages)} messages")
    full = _ids(tokenizer, messages, tools, generation=False)
    mask = [0] * len(full)
    for index, (message, masked) in enumerate(zip(messages, message_mask, strict=True)):
        if not masked:
            continue
        if message.get("role") != "assistant":
            raise ValueError(f"message {index} is a {message.get('role')} message: only assistant messages "
                             "carry loss")
        before = _ids(tokenizer, messages[:index], tools, generation=True) if index else []
        through = _ids(tokenizer, messages[:index + 1], tools, generation=False)
        if full[:len(before)] != before or full[:len(through)] != through:
            raise NotPrefixStable(f"the chat template renders message {index} differently once later messages "
                                  "follow it")
        mask[len(before):len(through)] = [1] * (len(through) - len(before))
    return full, mask
