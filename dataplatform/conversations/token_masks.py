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


class NotPrefixStable(ValueError):
    """The template renders a message differently once later messages follow it."""


def template_identity(backend) -> dict | None:
    """{model_id, tokenizer, chat_template_sha256} of the backend's tokenizer, or None when the backend has no
    tokenizer of its own here (a vLLM server without VLLM_TOKENIZER_DIR)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {"model_id": backend.model_id, "tokenizer": str(getattr(tokenizer, "name_or_path", "")),
            "chat_template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest()}


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
