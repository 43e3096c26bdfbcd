"""The embedded CPU model behind vLLM's HTTP API, in a process of its own (`manage.py serve_model`).

Why it exists: in production the model runs in its own process (vLLM) and the web app and the workers
reach it over HTTP (MODEL_BACKEND=vllm). With MODEL_BACKEND=local the model runs inside the web
process instead, and a forward pass there holds the GIL: every other request of that process (a claim,
a page) waits behind it. This server gives the embedded model the production shape, so that

- a deployment without a GPU can still keep the model out of the web process, and
- the vLLM client (`vllm.VllmBackend`) is tested end to end against a real model, not only against
  canned responses.

It serves the part of vLLM's OpenAI-compatible API that `VllmBackend` uses, read from vLLM 0.34's own code and
checked against its request and response models (tests/inference/test_server_conformance.py; the fields'
checks are in server_fields.py, the chat messages' reading in server_chat.py): GET /health,
GET /v1/models, POST /tokenize (text, or chat `messages` with `tools`, `add_generation_prompt` or
`continue_final_message`, and `chat_template_kwargs`; the messages read as vLLM's chat parser reads them),
POST /detokenize and POST /v1/completions (prompts as token ids or text, `n` samples each, `stream` with
`stream_options`, `logprobs`, `logprob_token_ids`, `prompt_logprobs`, `return_tokens_as_token_ids`, `seed`, `temperature`,
`max_tokens` clamped to the context as vLLM clamps it, `skip_special_tokens`, `add_special_tokens`, and
`structured_outputs` with `json` or `choice`, decoded under the local backend's xgrammar constraint). Answers
have vLLM's shapes: `usage` on every completion (and on a stream with `stream_options.include_usage`), errors as
vLLM's ErrorResponse, its API-key middleware's 401 body.

What vLLM would honour and this server cannot is refused with a 400, never answered as if it had not been asked:
sampling fields at other than their neutral values (it samples the whole distribution at the temperature),
structured outputs other than `json` and `choice`, and every other vLLM request field it does not implement
(`server_fields.UNSERVED`). The differences that remain, and why, are listed in docs/operations.md ("What the
embedded model server does not do as vLLM does"): one forward pass at a time (no continuous batching) is the main
one.

Concurrent requests (`VllmBackend.rollouts` keeps up to VLLM_MAX_CONCURRENCY in flight) are all accepted and run
in Starlette's thread pool; each generated token is one forward pass under the backend's lock, so their tokens
interleave one pass at a time rather than batching, and each completion is what it would be alone.
"""

import hashlib
import itertools
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .base import BackendError, TokenStep
from .local import LocalBackend
from .server_chat import chat_text
from .server_fields import (
    INT64,
    BadRequest,
    at_least_one,
    budget,
    check_logprobs,
    check_sampling,
    check_vocabulary,
    flag,
    integer,
    is_int,
    prompts,
    refuse_unserved,
    stream_options,
    structured_outputs,
    temperature,
)
from .server_scoring import logprob_token_ids, with_candidates
from .vllm import TOKEN_ID_PREFIX
from .vllm_wire import over_max_logprobs

# The cap on `logprobs` and `prompt_logprobs` (build_app's `max_logprobs`, `serve_model --max-logprobs`): vLLM
# defaults to 20, and docker-compose.yml starts it with --max-logprobs 50 because projects may ask for top-k up to 50.
MAX_LOGPROBS = 50


def error_body(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> dict:
    """vLLM's ErrorResponse (vllm/entrypoints/serve/engine/protocol.py); VllmBackend also reads the older shapes."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, kind, param), status_code=status)


def build_app(backend: LocalBackend, *, served_model_name: str, api_key: str = "",
              max_logprobs: int = MAX_LOGPROBS) -> Starlette:
    """The ASGI app serving `backend`. With `api_key`, every route but /health wants `Bearer <api_key>`."""
    key_digest = hashlib.sha256(api_key.encode()).digest()

    def authorized(request: Request) -> bool:
        # As vLLM's AuthenticationMiddleware checks it: the scheme in any case, the key compared as a digest.
        scheme, _, supplied = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(hashlib.sha256(supplied.encode()).digest(),
                                                                     key_digest)

    def endpoint(handler):
        """Check the key, parse the JSON body and its model name, and turn BadRequest/BackendError into 400."""

        async def wrapped(request: Request) -> Response:
            if api_key and request.url.path != "/health" and not authorized(request):
                # vLLM's middleware answers this body, not an ErrorResponse.
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
            body: dict[str, Any] = {}
            if request.method == "POST":
                media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                if media_type != "application/json":
                    return error(400, "1 validation error:\n  Unsupported Media Type: Only 'application/json' "
                                 "is allowed", "Bad Request")
                try:
                    body = json.loads(await request.body())
                except ValueError as exc:
                    return error(400, f"The body is not JSON: {exc}")
                if not isinstance(body, dict):
                    return error(400, "The body must be a JSON object.")
                model = body.get("model")
                if model is not None and not isinstance(model, str):
                    return error(400, f"`model` must be a string, not {model!r}.", param="model")
                if model and model != served_model_name:  # vLLM takes a missing or empty name as its own
                    return error(404, f"The model `{model}` does not exist. Valid aliases: {served_model_name}.",
                                 "NotFoundError", param="model")
            try:
                # Model calls block: run them in the thread pool, never on the event loop.
                return await run_in_threadpool(handler, body)
            except BadRequest as exc:
                return error(400, str(exc), param=exc.param)
            except BackendError as exc:
                return error(400, str(exc))

        return wrapped

    def health(body: dict) -> Response:
        return Response(status_code=200)

    def models(body: dict) -> Response:
        return JSONResponse({"object": "list", "data": [{
            "id": served_model_name, "object": "model", "created": int(time.time()), "owned_by": "dataplatform",
            "root": backend.model_id, "parent": None, "max_model_len": backend.context_length,
        }]})

    def tokenize(body: dict) -> Response:
        tokenizer = backend.tokenizer
        if "messages" in body:
            # vLLM renders the template to text, then encodes it (by default adding no special tokens of its own).
            tokens = tokenizer.encode(chat_text(body, tokenizer),
                                      add_special_tokens=flag(body, "add_special_tokens", False))
        else:
            text = body.get("prompt")
            if not isinstance(text, str):
                raise BadRequest("`prompt` must be a string (or send `messages`).")
            tokens = tokenizer.encode(text, add_special_tokens=flag(body, "add_special_tokens", True))
        token_strs = tokenizer.convert_ids_to_tokens(tokens) if flag(body, "return_token_strs", False) else None
        return JSONResponse({"count": len(tokens), "max_model_len": backend.context_length, "tokens": tokens,
                             "token_strs": token_strs})

    def detokenize(body: dict) -> Response:
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(is_int(i) for i in tokens):
            raise BadRequest("`tokens` must be a list of token ids (integers).", param="tokens")
        check_vocabulary(tokens, backend)
        return JSONResponse({"prompt": backend.detokenize(tokens) if tokens else ""})

    def completions(body: dict) -> Response:
        request = _CompletionRequest(body, backend, max_logprobs)
        if request.stream:
            # The first step runs here, so a bad request is still a 400 and not a broken stream.
            runs = request.runs()
            first_steps = request.steps(runs[0])
            first = next(first_steps, None)
            return StreamingResponse(_sse(request, runs, first, first_steps, served_model_name),
                                     media_type="text/event-stream")
        choices, completion_tokens = [], 0
        prompt_logprobs: dict[int, list] = {}  # once per prompt, whatever its `n`, as vLLM computes them
        for run in request.runs():
            steps = list(request.steps(run))
            completion_tokens += len(steps)
            choices.append(request.choice(run, steps, prompt_logprobs))
        prompt_tokens = sum(map(len, request.prompts))
        return JSONResponse({"id": _completion_id(), "object": "text_completion", "created": int(time.time()),
                             "model": served_model_name, "choices": choices,
                             "usage": _usage(prompt_tokens, completion_tokens)})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        # An unknown route or method, in vLLM's shape (its handler of FastAPI's HTTPException).
        return error(exc.status_code, exc.detail, exc.detail)

    routes = [
        Route("/health", endpoint(health), methods=["GET"]),
        Route("/v1/models", endpoint(models), methods=["GET"]),
        Route("/tokenize", endpoint(tokenize), methods=["POST"]),
        Route("/detokenize", endpoint(detokenize), methods=["POST"]),
        Route("/v1/completions", endpoint(completions), methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error})


class _CompletionRequest:
    """The checked fields of one /v1/completions body, and the model calls that answer it.

    The checks come in vLLM's order, in its words where it has some: the request model's validators, the prompts
    against the context, the sampling parameters, then the token ids."""

    def __init__(self, body: dict, backend: LocalBackend, max_logprobs: int = MAX_LOGPROBS):
        self.backend = backend
        refuse_unserved(body)
        self.constraint = structured_outputs(body)
        self.stream = flag(body, "stream", False)
        check_logprobs(body)
        logprobs = body.get("logprobs")
        self.logprobs = None if logprobs is None else integer(logprobs, "logprobs", low=0)
        prompt_logprobs = body.get("prompt_logprobs")
        self.prompt_logprobs = None if prompt_logprobs is None else integer(prompt_logprobs, "prompt_logprobs", low=0)
        self.candidates = logprob_token_ids(body, backend.model.config.vocab_size, BadRequest)
        # With `logprob_token_ids` vLLM reports those ids instead of the top `logprobs`: its cap does not apply.
        for field, count in (("logprobs", None if self.candidates else self.logprobs),
                             ("prompt_logprobs", self.prompt_logprobs)):
            if (refusal := over_max_logprobs(field, count, max_logprobs)) is not None:
                raise BadRequest(refusal, param=field)
        self.include_usage, self.continuous_usage = stream_options(body.get("stream_options"), self.stream)
        self.prompts = prompts(body, backend)
        self.as_token_ids = flag(body, "return_tokens_as_token_ids", False)
        self.skip_special_tokens = flag(body, "skip_special_tokens", True)
        self.n = at_least_one(body.get("n", 1), "n")
        max_tokens = body.get("max_tokens")
        self.max_tokens = 16 if max_tokens is None else at_least_one(max_tokens, "max_tokens")
        # Every prompt is checked before any forward pass, as vLLM checks them before it schedules any.
        self.budgets = [budget(len(ids), self.max_tokens, backend.context_length) for ids in self.prompts]
        self.temperature = temperature(body.get("temperature"))
        check_sampling(body, greedy=self.temperature == 0)
        if self.n > 1 and self.temperature == 0:
            raise BadRequest(f"n must be 1 when using greedy sampling, got {self.n}.")
        seed = body.get("seed")
        # vLLM reads -1 as no seed; a seeded request's n samples get seed, seed + 1, ... (vLLM's parallel sampling).
        self.seed = None if seed is None or seed == -1 else integer(seed, "seed", low=INT64[0], high=INT64[1])
        for ids in self.prompts:
            if not ids:
                raise BadRequest("The decoder prompt cannot be empty")
            check_vocabulary(ids, backend)

    def runs(self) -> list[tuple[int, int, int | None]]:
        """(choice index, prompt index, seed) of each completion asked: `n` per prompt, numbered as vLLM numbers
        them (prompt by prompt)."""
        return [(prompt * self.n + sample, prompt, None if self.seed is None else self.seed + sample)
                for prompt in range(len(self.prompts)) for sample in range(self.n)]

    def steps(self, run: tuple[int, int, int | None]) -> Iterator[TokenStep]:
        _, prompt, seed = run
        steps = self.backend.stream(self.prompts[prompt], max_tokens=self.budgets[prompt],
                                    temperature=self.temperature, seed=seed, top_k=max(1, self.logprobs or 0),
                                    **self.constraint)
        return with_candidates(self.backend, self.prompts[prompt], steps, self.candidates) if self.candidates else steps

    def token_key(self, token_id: int) -> str:
        return f"{TOKEN_ID_PREFIX}{token_id}" if self.as_token_ids else self.backend.detokenize([token_id])

    def logprobs_of(self, steps: list[TokenStep], start: int = 0) -> dict | None:
        """vLLM's completion `logprobs` object for these steps (None unless `logprobs` was asked). `start`: the
        offset of the first one. vLLM counts `text_offset` in the characters of the `tokens` it reports (of
        "token_id:N" with `return_tokens_as_token_ids`), not of the text."""
        if self.logprobs is None:
            return None
        tokens = [self.token_key(step.token_id) for step in steps]
        offsets = list(itertools.accumulate((len(token) for token in tokens[:-1]), initial=start))
        return {
            "text_offset": offsets[:len(tokens)],
            "token_logprobs": [_finite(step.logprob) for step in steps],
            "tokens": tokens,
            # The top `logprobs` alternatives (all the `logprob_token_ids` instead, if listed) plus the chosen token.
            "top_logprobs": [
                {self.token_key(top_id): _finite(top_logprob)
                 for top_id, top_logprob in step.top[:None if self.candidates else self.logprobs]}
                | {token: _finite(step.logprob)} for step, token in zip(steps, tokens, strict=True)],
        }

    def choice(self, run: tuple[int, int, int | None], steps: list[TokenStep], prompt_logprobs: dict) -> dict:
        index, prompt, _ = run
        text = _Text(self)
        choice = {"index": index, "text": "".join(text.add(step) for step in steps),
                  "logprobs": self.logprobs_of(steps), "finish_reason": steps[-1].finish_reason or "length",
                  "stop_reason": None}
        if self.prompt_logprobs is not None:
            if prompt not in prompt_logprobs:
                prompt_logprobs[prompt] = self.prompt_entries(self.prompts[prompt])
            choice["prompt_logprobs"] = prompt_logprobs[prompt]
        return choice

    def prompt_entries(self, prompt_ids: list[int]) -> list[dict | None]:
        entries = self.backend.prompt_logprobs(prompt_ids, top_k=max(1, self.prompt_logprobs))
        # vLLM keys prompt logprobs by the plain id and reports the top k plus the prompt's own token.
        return [None if entry is None else {
            str(token_id): {"logprob": _finite(logprob), "decoded_token": self.backend.detokenize([token_id])}
            for token_id, logprob in _top_and_actual(entry, self.prompt_logprobs, actual)
        } for entry, actual in zip(entries, prompt_ids, strict=True)]


class _Text:
    """A completion's text as vLLM's incremental detokenizer writes it: each token adds what its bytes complete (a
    token that ends inside a UTF-8 character adds nothing until a later one completes it), and the end token that
    stops the completion adds nothing (vLLM leaves it out of the text). The streamed texts add up to the whole."""

    def __init__(self, request: _CompletionRequest):
        self.request, self.ids, self.text = request, [], ""

    def add(self, step: TokenStep) -> str:
        if step.finish_reason == "stop" and step.token_id in self.request.backend.eos_token_ids:
            return ""
        self.ids.append(step.token_id)
        text = self.request.backend.tokenizer.decode(self.ids, skip_special_tokens=self.request.skip_special_tokens)
        if text.endswith("\ufffd"):
            return ""
        delta, self.text = text[len(self.text):], text
        return delta


def _sse(request: _CompletionRequest, runs: list, first: TokenStep | None, first_steps: Iterator[TokenStep],
         model: str) -> Iterator[str]:
    """The completions as server-sent events, one chunk per token (choice after choice), the usage chunk if asked,
    then `data: [DONE]`.

    A sync generator: Starlette runs each step in its thread pool, and closes it (ending the
    generation) when the client goes away. An error after the 200 is sent as an error chunk, as vLLM does.
    """
    completion_id, created = _completion_id(), int(time.time())
    completion_tokens = 0
    try:
        for position, run in enumerate(runs):
            index, prompt, _ = run
            if position > 0:
                steps = request.steps(run)
            else:
                steps = first_steps if first is None else itertools.chain([first], first_steps)
            text, offset, produced = _Text(request), 0, 0
            for step in steps:
                produced += 1
                logprobs = request.logprobs_of([step], start=offset)
                if logprobs is not None:
                    offset += len(logprobs["tokens"][0])
                chunk = {"id": completion_id, "object": "text_completion", "created": created, "model": model,
                         "choices": [{"index": index, "text": text.add(step), "logprobs": logprobs,
                                      "finish_reason": step.finish_reason, "stop_reason": None}]}
                if request.continuous_usage:
                    chunk["usage"] = _usage(len(request.prompts[prompt]), produced)
                yield _event(chunk)
            completion_tokens += produced
        if request.include_usage:
            yield _event({"id": completion_id, "object": "text_completion", "created": created, "model": model,
                          "choices": [], "usage": _usage(sum(map(len, request.prompts)), completion_tokens)})
    except BackendError as exc:
        yield _event(error_body(400, str(exc)))
    yield "data: [DONE]\n\n"


def _event(payload: dict) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _completion_id() -> str:
    return f"cmpl-{secrets.token_hex(16)}"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    """vLLM's UsageInfo: every prompt counted once (whatever its `n`), every generated token, the end token too."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _finite(logprob: float) -> float:
    # vLLM reports -inf (a token the constraint forbids) as -9999.0, the number OpenAI uses; JSON has no -inf.
    return max(logprob, -9999.0)


def _top_and_actual(entry: dict[int, float], k: int, actual: int) -> list[tuple[int, float]]:
    best = sorted(entry.items(), key=lambda item: -item[1])[:k]
    if all(token_id != actual for token_id, _ in best):
        best.append((actual, entry[actual]))
    return best


