"""The embedded CPU model behind vLLM's HTTP API, in a process of its own (`manage.py serve_model`).

Why it exists: in production the model runs in its own process (vLLM) and the web app and the workers
reach it over HTTP (MODEL_BACKEND=vllm). With MODEL_BACKEND=local the model runs inside the web
process instead, and a forward pass there holds the GIL: every other request of that process (a claim,
a page) waits behind it. This server gives the embedded model the production shape, so that

- a deployment without a GPU can still keep the model out of the web process, and
- the vLLM client (`vllm.VllmBackend`) is tested end to end against a real model, not only against
  canned responses.

It serves the part of vLLM's OpenAI-compatible API that `VllmBackend` uses, with vLLM's request and
response fields: GET /health, GET /v1/models, POST /tokenize (text, or chat `messages` with `tools`,
`add_generation_prompt` or `continue_final_message`, and `chat_template_kwargs`), POST /detokenize and
POST /v1/completions (prompts as token ids or text, `stream`, `logprobs`, `logprob_token_ids`, `prompt_logprobs`,
`return_tokens_as_token_ids`, `seed`, `temperature`, `max_tokens`, and `structured_outputs` with `json` or
`choice`, decoded under the local backend's xgrammar constraint). It is not vLLM: one forward pass at a
time (no continuous batching), one streamed prompt per request, and of the structured outputs only `json`
and `choice` (`regex`, `grammar`, `json_object`, `structural_tag`, `whitespace_pattern`, the removed
`guided_*` fields and `response_format` get a 400, never a silently unconstrained answer).

Concurrent requests (`VllmBackend.rollouts` keeps up to VLLM_MAX_CONCURRENCY in flight) are all accepted and run
in Starlette's thread pool; each generated token is one forward pass under the backend's lock, so their tokens
interleave one pass at a time rather than batching, and each completion is what it would be alone.
"""

import itertools
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .base import BackendError, TokenStep
from .local import LocalBackend
from .server_scoring import logprob_token_ids, with_candidates
from .vllm import TOKEN_ID_PREFIX
from .vllm_wire import context_refusal, over_max_logprobs

# The cap on `logprobs` and `prompt_logprobs` (build_app's `max_logprobs`, `serve_model --max-logprobs`): vLLM
# defaults to 20, and docker-compose.yml starts it with --max-logprobs 50 because projects may ask for top-k up to 50.
MAX_LOGPROBS = 50

# vLLM's words for two chat requests it refuses: both prompt flags true (TokenizeChatRequest's validator), and a
# chat template sent with the request (refused unless vLLM runs with --trust-request-chat-template; off by default).
BOTH_PROMPT_FLAGS = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
UNTRUSTED_TEMPLATE = ("Chat template is passed with request, but --trust-request-chat-template is not set. "
                      "Refused request with untrusted chat template.")

# vLLM's StructuredOutputsParams: the constraint kinds (at most one per request), then its options.
STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
STRUCTURED_OPTIONS = ("disable_fallback", "disable_any_whitespace", "disable_additional_properties",
                      "whitespace_pattern")
# The request fields vLLM v0.12 replaced by `structured_outputs` (it now ignores them, with a warning).
REMOVED_STRUCTURED_FIELDS = ("guided_json", "guided_regex", "guided_choice", "guided_grammar",
                             "guided_whitespace_pattern", "guided_decoding_backend")


class BadRequest(Exception):
    """A request this server answers with 400 and the message (and `param`, the field it is about, if any)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


def build_app(backend: LocalBackend, *, served_model_name: str, api_key: str = "",
              max_logprobs: int = MAX_LOGPROBS) -> Starlette:
    """The ASGI app serving `backend`. With `api_key`, every route but /health wants `Bearer <api_key>`."""

    def error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
        # The current vLLM error shape (its ErrorInfo); VllmBackend also reads the older ones.
        return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                            status_code=status)

    def endpoint(handler):
        """Parse the JSON body, check the key and the model name, and turn BadRequest/BackendError into 400."""

        async def wrapped(request: Request) -> Response:
            if api_key and request.url.path != "/health":
                supplied = request.headers.get("authorization", "")
                if not secrets.compare_digest(supplied.encode(), f"Bearer {api_key}".encode()):
                    return error(401, "Unauthorized", "AuthenticationError")
            body: dict[str, Any] = {}
            if request.method == "POST":
                try:
                    body = json.loads(await request.body())
                except ValueError as exc:
                    return error(400, f"The body is not JSON: {exc}")
                if not isinstance(body, dict):
                    return error(400, "The body must be a JSON object.")
                model = body.get("model")
                if model is not None and model != served_model_name:
                    return error(404, f"The model `{model}` does not exist.", "NotFoundError")
            try:
                # Model calls block: run them in the thread pool, never on the event loop.
                return await run_in_threadpool(handler, body)
            except BadRequest as exc:
                return error(400, str(exc), param=exc.param)
            except BackendError as exc:  # a PromptTooLong too (checked above first, in vLLM's words)
                return error(400, str(exc))

        return wrapped

    def health(body: dict) -> Response:
        return Response(status_code=200)

    def models(body: dict) -> Response:
        return JSONResponse({"object": "list", "data": [{
            "id": served_model_name, "object": "model", "created": int(time.time()), "owned_by": "dataplatform",
            "root": backend.model_id, "max_model_len": backend.context_length,
        }]})

    def tokenize(body: dict) -> Response:
        tokenizer = backend.tokenizer
        if "messages" in body:
            # vLLM renders the template to text, then encodes it (by default adding no special tokens of its own).
            tokens = tokenizer.encode(_chat_text(body, tokenizer),
                                      add_special_tokens=_flag(body, "add_special_tokens", False))
        else:
            text = body.get("prompt")
            if not isinstance(text, str):
                raise BadRequest("`prompt` must be a string (or send `messages`).")
            tokens = tokenizer.encode(text, add_special_tokens=_flag(body, "add_special_tokens", True))
        token_strs = tokenizer.convert_ids_to_tokens(tokens) if _flag(body, "return_token_strs", False) else None
        return JSONResponse({"count": len(tokens), "max_model_len": backend.context_length, "tokens": tokens,
                             "token_strs": token_strs})

    def detokenize(body: dict) -> Response:
        return JSONResponse({"prompt": backend.detokenize(_token_ids(body.get("tokens"), "tokens"))})

    def completions(body: dict) -> Response:
        request = _CompletionRequest(body, backend, max_logprobs)
        if body.get("stream"):
            if len(request.prompts) != 1:
                raise BadRequest("This server streams one prompt per request.")
            # The first step runs here, so a bad request is still a 400 and not a broken stream.
            steps = request.steps(request.prompts[0])
            first = next(steps, None)
            return StreamingResponse(_sse(request, first, steps, served_model_name), media_type="text/event-stream")
        choices = [request.choice(index, ids) for index, ids in enumerate(request.prompts)]
        return JSONResponse({"id": _completion_id(), "object": "text_completion", "created": int(time.time()),
                             "model": served_model_name, "choices": choices})

    routes = [
        Route("/health", endpoint(health), methods=["GET"]),
        Route("/v1/models", endpoint(models), methods=["GET"]),
        Route("/tokenize", endpoint(tokenize), methods=["POST"]),
        Route("/detokenize", endpoint(detokenize), methods=["POST"]),
        Route("/v1/completions", endpoint(completions), methods=["POST"]),
    ]
    return Starlette(routes=routes)


class _CompletionRequest:
    """The checked fields of one /v1/completions body, and the model calls that answer it."""

    def __init__(self, body: dict, backend: LocalBackend, max_logprobs: int = MAX_LOGPROBS):
        self.backend = backend
        self.constraint = _structured_outputs(body)
        if body.get("n", 1) != 1:
            raise BadRequest("Only n=1 is supported.")
        self.prompts = _prompts(body.get("prompt"), backend)
        self.max_tokens = _int(body.get("max_tokens", 16), "max_tokens", low=1)
        self.temperature = _number(body.get("temperature", 1.0), "temperature")
        seed = body.get("seed")
        self.seed = None if seed is None else _int(seed, "seed", low=0)
        logprobs = body.get("logprobs")
        self.logprobs = None if logprobs is None else _int(logprobs, "logprobs", low=0)
        prompt_logprobs = body.get("prompt_logprobs")
        self.prompt_logprobs = None if prompt_logprobs is None else _int(prompt_logprobs, "prompt_logprobs", low=0)
        for field, count in (("logprobs", self.logprobs), ("prompt_logprobs", self.prompt_logprobs)):
            if (refusal := over_max_logprobs(field, count, max_logprobs)) is not None:
                raise BadRequest(refusal, param=field)
        self.as_token_ids = bool(body.get("return_tokens_as_token_ids"))
        self.candidates = logprob_token_ids(body, backend.model.config.vocab_size, BadRequest)
        # Every prompt is checked before any forward pass, as vLLM checks them before it schedules any.
        for ids in self.prompts:
            if (refusal := context_refusal(len(ids), self.max_tokens, backend.context_length)) is not None:
                raise BadRequest(refusal, param="input_tokens")

    def steps(self, prompt_ids: list[int]) -> Iterator[TokenStep]:
        steps = self.backend.stream(prompt_ids, max_tokens=self.max_tokens, temperature=self.temperature,
                                    seed=self.seed, top_k=max(1, self.logprobs or 0), **self.constraint)
        return with_candidates(self.backend, prompt_ids, steps, self.candidates) if self.candidates else steps

    def token_key(self, token_id: int) -> str:
        return f"{TOKEN_ID_PREFIX}{token_id}" if self.as_token_ids else self.backend.detokenize([token_id])

    def text_of(self, steps: list[TokenStep]) -> str:
        # vLLM leaves the end token out of the text (skip_special_tokens defaults to true).
        ids = [step.token_id for step in steps if step.token_id not in self.backend.eos_token_ids]
        return self.backend.detokenize(ids) if ids else ""

    def logprobs_of(self, steps: list[TokenStep], texts: list[str], start: int = 0) -> dict | None:
        """vLLM's completion `logprobs` object for these steps (None unless `logprobs` was asked). `texts`:
        each step's text; `start`: where the first one begins in the whole completion's text."""
        if self.logprobs is None:
            return None
        offsets = []
        for text in texts:
            offsets.append(start)
            start += len(text)
        return {
            "text_offset": offsets,
            "token_logprobs": [step.logprob for step in steps],
            "tokens": [self.token_key(step.token_id) for step in steps],
            # The top `logprobs` alternatives (all the `logprob_token_ids` instead, if listed) plus the chosen token.
            "top_logprobs": [{self.token_key(i): lp for i, lp in step.top[:None if self.candidates else self.logprobs]}
                             | {self.token_key(step.token_id): step.logprob} for step in steps],
        }

    def choice(self, index: int, prompt_ids: list[int]) -> dict:
        steps = list(self.steps(prompt_ids))
        texts = [self.text_of([step]) for step in steps] if self.logprobs is not None else []
        choice = {"index": index, "text": self.text_of(steps), "logprobs": self.logprobs_of(steps, texts),
                  "finish_reason": steps[-1].finish_reason or "length", "stop_reason": None}
        if self.prompt_logprobs is not None:
            entries = self.backend.prompt_logprobs(prompt_ids, top_k=max(1, self.prompt_logprobs))
            # vLLM keys prompt logprobs by the plain id and reports the top k plus the prompt's own token.
            choice["prompt_logprobs"] = [None if entry is None else {
                str(token_id): {"logprob": logprob, "decoded_token": self.backend.detokenize([token_id])}
                for token_id, logprob in _top_and_actual(entry, self.prompt_logprobs, actual)
            } for entry, actual in zip(entries, prompt_ids, strict=True)]
        return choice


def _sse(request: _CompletionRequest, first: TokenStep | None, rest: Iterator[TokenStep], model: str) -> Iterator[str]:
    """The completion as server-sent events, one chunk per token, then `data: [DONE]`.

    A sync generator: Starlette runs each step in its thread pool, and closes it (ending the
    generation) when the client goes away. An error after the 200 is sent as an error chunk, as vLLM does.
    """
    completion_id, created, offset = _completion_id(), int(time.time()), 0
    try:
        steps = rest if first is None else itertools.chain([first], rest)
        for step in steps:
            text = request.text_of([step])
            chunk = {"index": 0, "text": text, "logprobs": request.logprobs_of([step], [text], start=offset),
                     "finish_reason": step.finish_reason, "stop_reason": None}
            offset += len(text)
            yield _event({"id": completion_id, "object": "text_completion", "created": created, "model": model,
                          "choices": [chunk]})
    except BackendError as exc:
        yield _event({"error": {"message": str(exc), "type": "BadRequestError", "code": 400}})
    yield "data: [DONE]\n\n"


def _event(payload: dict) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _completion_id() -> str:
    return f"cmpl-{secrets.token_hex(16)}"


def _top_and_actual(entry: dict[int, float], k: int, actual: int) -> list[tuple[int, float]]:
    best = sorted(entry.items(), key=lambda item: -item[1])[:k]
    if all(token_id != actual for token_id, _ in best):
        best.append((actual, entry[actual]))
    return best


def _structured_outputs(body: dict) -> dict:
    """The request's constraint as the local backend's keywords: {"json_schema": ...}, {"choice": [...]} or {}.

    vLLM's rules: one kind at most (in its words otherwise), `json` a schema object or its JSON text,
    `choice` a list of strings. What this server cannot honour is refused, never ignored."""
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
    if len(kinds) > 1:
        given = json.dumps({kind: spec[kind] for kind in kinds})
        raise BadRequest("You can only use one kind of structured outputs constraint but multiple are "
                         f"specified: {given[:500]}")
    if spec.get("whitespace_pattern") is not None:
        raise BadRequest("The embedded model server does not support `whitespace_pattern` (its JSON allows no "
                         "free whitespace); use vLLM.")
    if not kinds:
        return {}
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


def _prompts(prompt: Any, backend: LocalBackend) -> list[list[int]]:
    """`prompt` as vLLM takes it: text, a list of texts, a list of ids, or a list of id lists."""
    if isinstance(prompt, str):
        return [backend.tokenizer.encode(prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return [backend.tokenizer.encode(p) for p in prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(p, list) for p in prompt):
        return [_token_ids(p, "prompt") for p in prompt]
    return [_token_ids(prompt, "prompt")]


def _chat_text(body: dict, tokenizer) -> str:
    """The chat template applied to a /tokenize chat request, as vLLM applies it.

    vLLM's validator refuses the two prompt flags only when both are sent true. With `continue_final_message`
    alone, `add_generation_prompt` keeps its default (true) and the template renderer refuses the pair, in
    transformers' words. Template errors are the request's fault: 400, as in vLLM.
    """
    add_generation_prompt = _flag(body, "add_generation_prompt", True)
    continue_final_message = _flag(body, "continue_final_message", False)
    if continue_final_message and body.get("add_generation_prompt"):
        raise BadRequest(BOTH_PROMPT_FLAGS)
    extra = body.get("chat_template_kwargs") or {}
    if not isinstance(extra, dict):
        raise BadRequest("`chat_template_kwargs` must be an object.")
    if body.get("chat_template") is not None or extra.get("chat_template") is not None:
        raise BadRequest(UNTRUSTED_TEMPLATE)
    if unexpected := {"chat_template", "tokenize"} & extra.keys():
        raise BadRequest(f"Found unexpected chat template kwargs from request: {unexpected}")
    conversation, tools = _conversation(body["messages"]), _tools(body.get("tools"))
    # The request's own fields win over the same names in `chat_template_kwargs`, as in vLLM.
    options = extra | {"tools": tools, "add_generation_prompt": add_generation_prompt,
                       "continue_final_message": continue_final_message}
    try:
        return tokenizer.apply_chat_template(conversation, tokenize=False, **options)
    except (ValueError, TypeError, jinja2.TemplateError) as exc:
        raise BadRequest(str(exc)) from exc


def _conversation(messages: Any) -> list[dict]:
    """`messages` as vLLM hands them to a chat template (vllm/entrypoints/chat_utils.py, in the "string"
    content format that the embedded model's template takes): the content as one string (text parts joined
    by newlines, "" when there is none), an assistant's `reasoning` under both `reasoning` and
    `reasoning_content`, tool-call arguments parsed from their JSON text, and no other field."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                 for m in messages):
        raise BadRequest("`messages` must be a list of objects, each with a string `role`.")
    conversation = []
    for index, message in enumerate(messages):
        turn = {"role": message["role"], "content": _text(message.get("content"), index)}
        if message["role"] == "assistant":
            if message.get("tool_calls"):  # vLLM drops an empty list, so that templates take the plain path
                turn["tool_calls"] = [_tool_call(call, index) for call in message["tool_calls"]]
            if message.get("reasoning") is not None:
                turn["reasoning"] = turn["reasoning_content"] = message["reasoning"]
        if message["role"] == "tool" and "tool_call_id" in message:
            turn["tool_call_id"] = message["tool_call_id"]
        if isinstance(message.get("name"), str):
            turn["name"] = message["name"]
        conversation.append(turn)
    return conversation


def _text(content: Any, index: int) -> str:
    if content is None:
        return ""
    texts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            part = part.get("text")
        if not isinstance(part, str):
            raise BadRequest(f"`messages[{index}].content`: the embedded model reads text only (a string or "
                             f"text parts), not {json.dumps(part)[:80]}.")
        texts.append(part)
    return "\n".join(texts)


def _tool_call(call: Any, index: int) -> dict:
    """A tool call with its arguments as the object templates expect ({} when empty), as vLLM passes it."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise BadRequest(f"`messages[{index}].tool_calls`: each call must be an object with a `function` object.")
    arguments = function.get("arguments") or {}
    if not isinstance(arguments, dict | list):
        try:
            arguments = json.loads(arguments)
        except (TypeError, ValueError) as exc:
            raise BadRequest(f"`messages[{index}].tool_calls`: arguments are not JSON: {exc}") from exc
    return call | {"function": function | {"arguments": arguments}}


def _tools(tools: Any) -> list[dict] | None:
    """`tools` as vLLM hands them to the template: as its request model dumps them, so that a function
    without `description` or `parameters` has them as null (visible to a template that prints the tools)."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise BadRequest("`tools` must be a list of function tools.")
    dumped = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if (not isinstance(function, dict) or not isinstance(function.get("name"), str)
                or tool.get("type", "function") != "function"):
            raise BadRequest(f'`tools[{index}]` must be {{"type": "function", "function": {{"name": ...}}}}.')
        declared = {"name": None, "description": None, "parameters": None} | function
        others = {key: value for key, value in tool.items() if key not in ("type", "function")}
        dumped.append({"type": "function", "function": declared} | others)
    return dumped


def _flag(body: dict, field: str, default: bool) -> bool:
    value = body.get(field, default)
    if not isinstance(value, bool):
        raise BadRequest(f"`{field}` must be true or false, not {value!r}.")
    return value


def _token_ids(value: Any, field: str) -> list[int]:
    if not isinstance(value, list) or not value or not all(isinstance(i, int) and not isinstance(i, bool)
                                                           for i in value):
        raise BadRequest(f"`{field}` must be a non-empty list of token ids (integers).")
    return value


def _int(value: Any, field: str, *, low: int, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise BadRequest(f"`{field}` must be an integer {bounds}, not {value!r}.")
    return value


def _number(value: Any, field: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise BadRequest(f"`{field}` must be a number of at least 0, not {value!r}.")
    return float(value)
