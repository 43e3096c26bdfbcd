"""vLLM's wire format as `VllmBackend` speaks it: the sampling fields every completion body sends, messages as vLLM's
chat parser reads them, token ids in "token_id:N" keys, the logprobs of a completion's choice, and the shapes of its
error bodies (and which of them refuse a prompt over the context)."""

import json
import re
from typing import Any

import httpx
from django.utils.translation import gettext

from .base import PromptTooLong, TokenStep

TOKEN_ID_PREFIX = "token_id:"

# Every sampling field a /v1/completions body sends besides its temperature and seed. vLLM fills a field the request
# leaves out from the served model's generation_config.json (its default `--generation-config auto`): with a typical
# instruct model's, a rollout would be drawn with top_p 0.95, top_k 20 and repetition_penalty 1.05 while the platform
# stores the raw logprobs, and a repetition penalty changes even greedy output. The values are vLLM's own for "off"
# (CompletionRequest._DEFAULT_SAMPLING_PARAMS in vLLM 0.34; top_k 0 rather than -1, which SamplingParams only
# tolerates). tests/inference/test_vllm_conformance.py turns every body into vLLM's SamplingParams to check them.
NEUTRAL_SAMPLING = {"top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                    "frequency_penalty": 0.0}

# vLLM's words for a prompt over max_model_len, in every release since 0.4: "This model's maximum context length
# is N tokens. However, ..." (then the prompt's own count: "... has N input tokens", "... your prompt contains N
# input tokens", "... N in the messages"), answered with 400.
_CONTEXT = re.compile(r"maximum context length is (\d+) tokens")
# vLLM 0.34 cuts `max_tokens` to the room a prompt leaves; a prompt that fills the context leaves none, and the
# sampling parameters' check refuses that (vllm/sampling_params.py).
_NO_ROOM = re.compile(r"max_tokens must be at least 1, got 0\b")
_INPUT_TOKENS = re.compile(r"(?:has|contains(?: at least)?) (\d+) input tokens|\((\d+) in the messages")


def sampling_fields(*, temperature: float, seed: int | None = None) -> dict[str, Any]:
    """The sampling fields of a /v1/completions body: the call's temperature and seed (none: vLLM draws one), and
    every other field neutral."""
    fields: dict[str, Any] = {"temperature": temperature, **NEUTRAL_SAMPLING}
    if seed is not None:
        fields["seed"] = seed
    return fields


def id_of_key(key: str) -> int:
    """A token id from "token_id:123" (return_tokens_as_token_ids) or a plain "123" (prompt_logprobs keys)."""
    return int(key.removeprefix(TOKEN_ID_PREFIX))


def choice_steps(choice: dict[str, Any]) -> list[TokenStep]:
    """The tokens of one streamed choice: zero, one or several per chunk."""
    logprobs = choice.get("logprobs")
    if not logprobs:
        return []
    return [
        TokenStep(
            token_id=id_of_key(token),
            logprob=float(logprob),
            top=sorted(((id_of_key(key), float(value)) for key, value in top.items()), key=lambda item: -item[1]),
        )
        for token, logprob, top in zip(
            logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True
        )
    ]


def payload_error(body: Any) -> str | None:
    """The message of a vLLM error payload, or None if `body` is not one.

    Newer vLLM sends {"error": {"message": ...}}, older {"object": "error",
    "message": ...}; FastAPI's request validation sends {"detail": ...}.
    """
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error:
        return str(error)
    if body.get("object") == "error":
        return str(body.get("message"))
    if "detail" in body:
        return str(body["detail"])
    return None


def arguments_as_text(message: dict) -> dict:
    """OpenAI's request schema, which vLLM validates, takes a tool call's arguments as JSON text (it parses
    them back into an object for the chat template); the training shape carries them as objects."""
    calls = message.get("tool_calls")
    if not calls or all(isinstance(call.get("function", {}).get("arguments"), str) for call in calls):
        return message
    return {**message, "tool_calls": [
        {**call, "function": {**call["function"], "arguments": json.dumps(call["function"]["arguments"],
                                                                          ensure_ascii=False)}}
        if not isinstance(call.get("function", {}).get("arguments"), str) else call for call in calls]}


def vllm_message(message: dict) -> dict:
    """A message of the training shape (`Message.for_training`, what the local backend hands transformers) as vLLM's
    chat parser reads it: tool-call arguments as JSON text, and the reasoning under `reasoning`.

    vLLM (vllm/renderers/chat_utils/chat_message.py, `parse_chat_message_content`) reads an assistant's past
    reasoning from `reasoning` alone and hands it to the chat template under both `reasoning` and
    `reasoning_content`; sent as `reasoning_content`, it would vanish from every prompt rendered on vLLM while the
    local backend renders it. (The training shape never carries both keys; were a message to, its
    `reasoning_content` would win.)"""
    message = arguments_as_text(message)
    if "reasoning_content" not in message:
        return message
    return {key: value for key, value in message.items() if key != "reasoning_content"} | {
        "reasoning": message["reasoning_content"]}


def error_message(response: httpx.Response) -> str:
    """The server's own words for a failed request, else its raw body."""
    try:
        message = payload_error(response.json())
    except ValueError:
        message = None
    return message or response.text[:500] or response.reason_phrase


def over_max_logprobs(field: str, count: int | None, max_logprobs: int) -> str | None:
    """vLLM 0.34's words (SamplingParams._validate_logprobs, a 400 with `param` `field`) for `logprobs` or
    `prompt_logprobs` over the server's `--max-logprobs`; None within it. The embedded model server answers them."""
    if count is None or count <= max_logprobs:
        return None
    kind = "sample" if field == "logprobs" else "prompt"
    return (f"Requested {kind} logprobs of {count}, which is greater than max allowed: {max_logprobs} "
            f"(parameter={field}, value={count})")


def prompt_too_long(message: str, where: str) -> PromptTooLong | None:
    """The server's refusal of a prompt over its context as PromptTooLong (None for any other message): the
    check a client without `max_model_len` relies on, and the server's word when its limit is lower."""
    context = _CONTEXT.search(message)
    if context is None:
        if _NO_ROOM.search(message):  # vLLM 0.34 cuts `max_tokens` to what the context leaves: here nothing
            return PromptTooLong(gettext("%(where)s refused the prompt as longer than the model's context: "
                                         "%(message)s") % {"where": where, "message": message})
        return None
    count = _INPUT_TOKENS.search(message)
    tokens = int(next(group for group in count.groups() if group)) if count else None
    return PromptTooLong(gettext("%(where)s refused the prompt as longer than the model's context: %(message)s")
                         % {"where": where, "message": message}, tokens=tokens, limit=int(context.group(1)))
