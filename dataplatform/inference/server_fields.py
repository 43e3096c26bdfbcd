"""The fields of a /v1/completions request as vLLM 0.34 checks them, for the embedded model server (server.py).

Each check is vLLM's, in its words where it has some (vllm/entrypoints/openai/completion/protocol.py, the request
model's validators; vllm/sampling_params.py, SamplingParams._verify_args; vllm/renderers/params.py, the context),
then this server's own: what vLLM would honour and the local backend cannot is refused (BadRequest, a 400), never
answered as if it had not been asked. tests/inference/test_server_conformance.py runs the same bodies through
vLLM's own code.
"""

import json
import math
from typing import Any

from .local import LocalBackend
from .vllm_wire import NEUTRAL_SAMPLING

# vLLM's StructuredOutputsParams: the constraint kinds (exactly one per request), then its options.
STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
STRUCTURED_OPTIONS = ("disable_fallback", "disable_any_whitespace", "disable_additional_properties",
                      "whitespace_pattern")
# The request fields vLLM v0.12 replaced by `structured_outputs` (it now ignores them, with a warning).
REMOVED_STRUCTURED_FIELDS = ("guided_json", "guided_regex", "guided_choice", "guided_grammar",
                             "guided_whitespace_pattern", "guided_decoding_backend")

# NEUTRAL_SAMPLING (the client sends it; vllm_wire.py): the sampling fields vLLM fills from the served model's
# generation_config.json when a request leaves them out, at vLLM's own neutral values. The local backend draws from
# the whole distribution at the temperature: these are the only values it honours, and a request that leaves a field
# out gets the neutral value, as from vLLM started with --generation-config vllm. top_k -1 is vLLM's other word
# for "off".
# What a greedy pick does not depend on (vLLM resets them at temperature 0); the penalties change even greedy text.
GREEDY_IGNORES = ("top_p", "top_k", "min_p")

# vLLM's CompletionRequest fields this server does not implement, each with the value that asks for nothing (vLLM's
# default; None is neutral too). Any other value is refused: an answer that ignored it would not be vLLM's.
UNSERVED = {
    "echo": False, "logit_bias": {}, "stop": [], "suffix": None, "use_beam_search": False, "watermarking": False,
    "stop_token_ids": [], "include_stop_str_in_output": False, "ignore_eos": False, "min_tokens": 0,
    "spaces_between_special_tokens": True, "truncate_prompt_tokens": None, "truncation_side": None,
    "allowed_token_ids": None, "bad_words": [], "prompt_embeds": None, "priority": 0, "return_token_ids": False,
    "return_weight_versions": False, "repetition_detection": None, "thinking_token_budget": -1,
    "stream_interval": 1,
}
# vLLM's CompletionRequest fields accepted and ignored: they change nothing of what one server answers (request
# bookkeeping, prefix-cache salting, the render endpoints' options, the beam search's length penalty, extensions
# and disaggregated serving this server has none of).
IGNORED = ("user", "request_id", "session_id", "cache_salt", "length_penalty", "mm_payload", "return_mm_kwargs",
           "return_token_offsets", "routed_experts_prompt_start", "vllm_xargs", "kv_transfer_params",
           "ec_transfer_params")
# The ones served, as vLLM serves them (`response_format` is refused by structured_outputs, with its reason).
SERVED = ("model", "prompt", "max_tokens", "n", "seed", "stream", "stream_options", "temperature", *NEUTRAL_SAMPLING,
          "logprobs", "logprob_token_ids", "prompt_logprobs", "return_tokens_as_token_ids", "structured_outputs",
          "response_format", "add_special_tokens", "skip_special_tokens")

# vLLM's limits: the prompts of one request (VLLM_MAX_COMPLETION_PROMPTS) and a seed (int64).
MAX_PROMPTS = 1024
INT64 = (-2**63, 2**63 - 1)


class BadRequest(Exception):
    """A request this server answers with 400 and the message (and `param`, the field it is about, if any)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


def refuse_unserved(body: dict) -> None:
    """Refuse a vLLM field this server does not implement unless its value asks for nothing (UNSERVED)."""
    for field, neutral in UNSERVED.items():
        value = body.get(field)
        if value is not None and value != neutral:
            raise BadRequest(f"The embedded model server does not serve `{field}` (it would answer as if it had not "
                             f"been sent); leave it out, or send it to vLLM.", param=field)


def check_logprobs(body: dict) -> None:
    """vLLM's request validator `check_logprobs`: numbers, no prompt logprobs in a stream, no negative count but -1
    (the whole vocabulary, which the server's --max-logprobs then bounds)."""
    for field in ("prompt_logprobs", "logprobs"):
        value = body.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BadRequest(f"`{field}` must be an integer.", param=field)
    prompt_logprobs = body.get("prompt_logprobs")
    if prompt_logprobs is not None and body.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
        raise BadRequest("`prompt_logprobs` are not available when `stream=True`.", param="prompt_logprobs")
    for field in ("prompt_logprobs", "logprobs"):
        if body.get(field) is not None and body[field] < 0 and body[field] != -1:
            raise BadRequest(f"`{field}` must be a positive value or -1.", param=field)


def stream_options(options: Any, stream: bool) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats) as vLLM reads `stream_options`: only with `stream`, and the
    per-chunk usage only with the final one."""
    if not options:
        return False, False
    if not stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.", param="stream_options")
    if not isinstance(options, dict):
        raise BadRequest("`stream_options` must be an object.", param="stream_options")
    include = flag(options, "include_usage", False)
    return include, include and flag(options, "continuous_usage_stats", False)


def budget(prompt_tokens: int, max_tokens: int, max_model_len: int) -> int:
    """The tokens a prompt may generate, as vLLM 0.34 decides it: `max_tokens` over the context, or a prompt over
    it, is refused; otherwise `max_tokens` is cut to what the context leaves (the answer then ends with "length").
    A prompt that fills the context leaves 0, which vLLM refuses as a `max_tokens` below 1."""
    if max_tokens > max_model_len:
        raise BadRequest(f"max_tokens={max_tokens} cannot be greater than max_model_len={max_model_len}. Please "
                         "request fewer output tokens.", param="max_tokens")
    if prompt_tokens > max_model_len:
        at_least = "at least " if prompt_tokens == max_model_len + 1 else ""  # vLLM's, for a cut text prompt
        raise BadRequest(f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
                         f"contains {at_least}{prompt_tokens} input tokens, which exceeds this limit even without "
                         "any output tokens. Please reduce the length of the input prompt.", param="input_tokens")
    allowed = min(max_tokens, max_model_len - prompt_tokens)
    if allowed < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {allowed}.", param="max_tokens")
    return allowed


def temperature(value: Any) -> float:
    """vLLM's rules: 1.0 when absent, within [0, 2]; a positive value under 0.01 is raised to 0.01."""
    if value is None:
        return 1.0
    given = number(value, "temperature")
    if not math.isfinite(given):
        raise BadRequest(f"temperature must be a finite number, got {given}.", param="temperature")
    if given < 0:
        raise BadRequest(f"temperature must be non-negative, got {given}.", param="temperature")
    if given > 2:
        raise BadRequest(f"temperature must be in [0, 2], got {given}.", param="temperature")
    return max(given, 0.01) if given > 0 else 0.0


# vLLM's range of each sampling field (SamplingParams._verify_args), in its words.
SAMPLING_RANGES = {
    "top_p": (lambda v: 0 < v <= 1, "top_p must be in (0, 1], got {}."),
    "top_k": (lambda v: v >= -1, "top_k must be 0 (disable), or at least 1, got {}."),
    "min_p": (lambda v: 0 <= v <= 1, "min_p must be in [0, 1], got {}."),
    "repetition_penalty": (lambda v: math.isfinite(v) and v > 0,
                           "repetition_penalty must be greater than zero, got {}."),
    "presence_penalty": (lambda v: -2 <= v <= 2, "presence_penalty must be in [-2, 2], got {}."),
    "frequency_penalty": (lambda v: -2 <= v <= 2, "frequency_penalty must be in [-2, 2], got {}."),
}


def check_sampling(body: dict, *, greedy: bool) -> None:
    """vLLM's checks of the sampling fields, then this server's: each at its neutral value, or refused (or, for
    those a greedy pick ignores, at any valid value under temperature 0)."""
    for field, neutral in NEUTRAL_SAMPLING.items():
        if body.get(field) is None:
            continue
        value = integer(body[field], field, low=-2**31) if field == "top_k" else number(body[field], field)
        valid, words = SAMPLING_RANGES[field]
        if not valid(value):
            raise BadRequest(words.format(value), param=field)
        if value != neutral and not (field == "top_k" and value == -1) and not (greedy and field in GREEDY_IGNORES):
            raise BadRequest(f"The embedded model server samples from the whole distribution at the temperature: "
                             f"`{field}` must be {neutral} (or left out), not {value}. Send it to vLLM.", param=field)


def structured_outputs(body: dict) -> dict:
    """The request's constraint as the local backend's keywords: {"json_schema": ...}, {"choice": [...]} or {}.

    vLLM's rules: exactly one kind (in its words otherwise), `json` a schema object or its JSON text, `choice` a
    list of strings. What this server cannot honour is refused, never ignored."""
    if removed := [field for field in REMOVED_STRUCTURED_FIELDS if body.get(field) is not None]:
        raise BadRequest(f"`{removed[0]}` was removed in vLLM v0.12 (which now ignores it); send "
                         "`structured_outputs` instead, e.g. {\"structured_outputs\": {\"json\": <schema>}}.")
    if body.get("response_format") is not None:
        raise BadRequest("The embedded model server does not support `response_format`; send "
                         "`structured_outputs` with `json` or `choice`.")
    spec = body.get("structured_outputs")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise BadRequest("`structured_outputs` must be an object.")
    if unknown := sorted(set(spec) - set(STRUCTURED_KINDS) - set(STRUCTURED_OPTIONS)):
        raise BadRequest(f"Unknown `structured_outputs` field(s): {', '.join(unknown)}.")
    kinds = [kind for kind in STRUCTURED_KINDS if spec.get(kind) is not None]
    if len(set(kinds) & {"json", "regex", "choice"}) > 1:  # the request model's validator, before the rest
        raise BadRequest("You can only use one kind of constraints for structured outputs ('json', 'regex' or "
                         "'choice').", param="structured_outputs")
    if len(kinds) > 1:
        given = json.dumps({kind: spec[kind] for kind in kinds})
        raise BadRequest("You can only use one kind of structured outputs constraint but multiple are "
                         f"specified: {given[:500]}")
    if not kinds:
        raise BadRequest("You must use one kind of structured outputs constraint but none are specified: "
                         f"{json.dumps(spec)[:500]}", param="structured_outputs")
    if spec.get("whitespace_pattern") is not None:
        raise BadRequest("The embedded model server does not support `whitespace_pattern` (its JSON allows no "
                         "free whitespace); use vLLM.")
    kind = kinds[0]
    if kind not in ("json", "choice"):
        raise BadRequest(f"The embedded model server does not support `{kind}` structured outputs, only `json` "
                         "and `choice`; use vLLM.")
    if kind == "choice":
        choice = spec["choice"]
        if not isinstance(choice, list) or not choice or not all(isinstance(option, str) for option in choice):
            raise BadRequest("`structured_outputs.choice` must be a non-empty list of strings.")
        return {"choice": choice}
    schema = spec["json"]
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise BadRequest(f"`structured_outputs.json` is not JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise BadRequest("`structured_outputs.json` must be a JSON schema: an object, or its JSON text.")
    return {"json_schema": schema}


def prompts(body: dict, backend: LocalBackend) -> list[list[int]]:
    """`prompt` as vLLM takes it: text, a list of texts, a list of ids, or a list of id lists (at most
    MAX_PROMPTS of them). Texts are encoded with the tokenizer's special tokens unless `add_special_tokens` is
    false."""
    prompt = body.get("prompt")
    if prompt is None or prompt == "":
        raise BadRequest("Either prompt or prompt_embeds must be provided and non-empty.", param="prompt")
    add_special_tokens = flag(body, "add_special_tokens", True)
    if isinstance(prompt, list) and prompt and not all(is_int(p) for p in prompt) and len(prompt) > MAX_PROMPTS:
        raise BadRequest(f"prompt list length {len(prompt)} exceeds the maximum allowed count of {MAX_PROMPTS}. "
                         "To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS environment variable.",
                         param="prompt")
    texts = [prompt] if isinstance(prompt, str) else prompt
    if isinstance(texts, list) and texts and all(isinstance(text, str) for text in texts):
        return [backend.tokenizer.encode(text, add_special_tokens=add_special_tokens) for text in texts]
    if isinstance(prompt, list) and all(is_int(i) for i in prompt):
        return [_token_ids(prompt)]
    if isinstance(prompt, list) and all(isinstance(p, list) for p in prompt):
        return [_token_ids(p) for p in prompt]
    raise BadRequest("`prompt` must be a text, a list of texts, a list of token ids or a list of token-id lists.",
                     param="prompt")


def check_vocabulary(ids: list[int], backend: LocalBackend) -> None:
    # vLLM's renderer: an id past both the model's vocabulary and the tokenizer's, in its words.
    if not ids:
        return
    last = max(backend.model.config.vocab_size, len(backend.tokenizer)) - 1
    for bad in (min(ids), max(ids)):
        if not 0 <= bad <= last:
            raise BadRequest(f"Token id {bad} is out of vocabulary")


def flag(body: dict, field: str, default: bool) -> bool:
    value = body.get(field)
    if value is None:  # vLLM's optional flags take null as their default
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"`{field}` must be true or false, not {value!r}.", param=field)
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(is_int(i) for i in value):
        raise BadRequest("`prompt` must be a list of token ids (integers), or a list of such lists.", param="prompt")
    return value


def at_least_one(value: Any, field: str) -> int:
    if not is_int(value):
        raise BadRequest(f"`{field}` must be an integer, not {value!r}.", param=field)
    if value < 1:
        raise BadRequest(f"{field} must be at least 1, got {value}.", param=field)
    return value


def integer(value: Any, field: str, *, low: int, high: int | None = None) -> int:
    if not is_int(value) or value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise BadRequest(f"`{field}` must be an integer {bounds}, not {value!r}.", param=field)
    return value


def number(value: Any, field: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise BadRequest(f"`{field}` must be a number, not {value!r}.", param=field)
    return float(value)
