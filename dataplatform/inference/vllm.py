"""Client of vLLM's OpenAI-compatible server (`vllm serve`), speaking token ids.

Prompts go to /v1/completions as lists of ids and tokens come back as
"token_id:N" strings (`return_tokens_as_token_ids`), so nothing is re-tokenized
between what the annotator saw and what the model continues. /tokenize and
/detokenize (served at the root, not under /v1) apply the served model's own
tokenizer and chat template.
"""

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cached_property
from typing import Any

import httpx
from django.utils.translation import gettext

from . import vllm_scoring
from .base import BackendError, BackendHealth, BackendUnavailable, Generation, PromptTooLong, TokenStep
from .budget import check_prompt, check_prompts, context_limit, refusals_first, refused_prompts
from .constraints import generate_by_constraint
from .in_flight import completed
from .pieces import tokenizer_pieces
from .vllm_wire import (  # noqa: F401 (TOKEN_ID_PREFIX: the model server imports it from here)
    TOKEN_ID_PREFIX,
    choice_steps,
    error_message,
    id_of_key,
    payload_error,
    prompt_too_long,
    sampling_fields,
    vllm_message,
)

logger = logging.getLogger(__name__)


class VllmBackend:
    name = "vllm"

    def __init__(self, *, base_url: str, model: str, api_key: str, timeout: float, tokenizer_dir: str | None,
                 max_concurrency: int | None = None, retries: int | None = None, retry_backoff: float | None = None):
        """`max_concurrency`, `retries` and `retry_backoff` shape `rollouts`; they default to the settings
        VLLM_MAX_CONCURRENCY, VLLM_REQUEST_RETRIES and VLLM_RETRY_BACKOFF_SECONDS."""
        from django.conf import settings

        self.max_concurrency = settings.VLLM_MAX_CONCURRENCY if max_concurrency is None else max_concurrency
        self.retries = settings.VLLM_REQUEST_RETRIES if retries is None else retries
        self.retry_backoff = settings.VLLM_RETRY_BACKOFF_SECONDS if retry_backoff is None else retry_backoff
        # The key lives only in the client's default headers: never on self, never in a message or log line.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # One client for every thread (httpx.Client is thread-safe). Its pool must hold the rollouts in flight
        # (httpx's default, 100 connections and 20 kept alive, would otherwise cap or churn them).
        limits = httpx.Limits(max_connections=max(100, self.max_concurrency),
                              max_keepalive_connections=max(20, self.max_concurrency))
        self._client = httpx.Client(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout, connect=min(5, timeout)), limits=limits
        )
        self._timeout = timeout
        # For error messages: the server without any user:password a URL might carry.
        self._server = str(self._client.base_url.copy_with(username=None, password=None)).rstrip("/")
        self._model = model
        self._tokenizer_dir = tokenizer_dir
        self._detokenized_pieces: dict[int, bytes] = {}
        self._max_model_len: tuple[int | None] | None = None  # (what /v1/models said,) once it has been asked

    def close(self) -> None:
        self._client.close()

    @property
    def model_id(self) -> str:
        """MODEL_NAME if configured, else the first model the server lists (asked once)."""
        if not self._model:
            self._model = self.served_models()[0]
            logger.info("vLLM model %r (first of %s/v1/models).", self._model, self._server)
        return self._model

    # --- HTTP ---------------------------------------------------------------------
    @contextmanager
    def _request(
        self, method: str, path: str, payload: dict[str, Any] | None = None, *, stream: bool = False
    ) -> Iterator[httpx.Response]:
        """Send one request and yield its successful response (read, unless `stream`).

        Every call goes through here so that failures map one way, including
        those met while the caller reads a stream or parses the body inside the
        `with` block: unreachable, timed out or 5xx is BackendUnavailable (worth
        retrying); 4xx is BackendError with the server's own message; a body of
        an unexpected shape is BackendError.
        """
        where = f"vLLM {method} {self._server}{path}"
        try:
            with self._client.stream(method, path, json=payload) as response:
                if response.is_error:
                    response.read()
                    message = error_message(response)
                    if response.status_code == 400 and (refusal := prompt_too_long(message, where)) is not None:
                        raise refusal
                    error = BackendUnavailable if response.status_code >= 500 else BackendError
                    raise error(f"{where}: HTTP {response.status_code}: {message}")
                if not stream:
                    response.read()
                yield response
        except httpx.TimeoutException as exc:
            raise BackendUnavailable(f"{where}: timed out after {self._timeout:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise BackendUnavailable(f"{where}: {type(exc).__name__}: {exc}") from exc
        except (LookupError, TypeError, ValueError) as exc:
            raise BackendError(f"{where}: unexpected response: {exc!r}") from exc

    def served_models(self) -> list[str]:
        """What GET /v1/models lists now."""
        return list(self._models())

    def _models(self) -> dict[str, dict]:
        with self._request("GET", "/v1/models") as response:
            served = {entry["id"]: entry for entry in response.json()["data"]}
        if not served:
            raise BackendError(f"vLLM at {self._server} serves no model.")
        return served

    @property
    def context_length(self) -> int | None:
        """The served model's `max_model_len` (GET /v1/models, asked once), lowered by MODEL_MAX_CONTEXT_TOKENS.
        None when the server does not say or cannot be asked now: its own check then refuses a prompt too long
        (a 400, read as PromptTooLong by `_request`)."""
        if self._max_model_len is None:
            try:
                entry = self._models().get(self.model_id, {})
            except BackendError as exc:
                logger.warning("vLLM's max_model_len is unknown for now (%s); the server checks prompts.", exc)
                return context_limit(None)
            self._max_model_len = (int(entry["max_model_len"]),) if entry.get("max_model_len") else (None,)
        return context_limit(self._max_model_len[0])

    # --- text <-> ids -------------------------------------------------------------
    def chat_prompt_ids(self, messages: list[dict], *, tools: list[dict] | None = None,
                        continue_final_message: bool = False) -> list[int]:
        # vLLM refuses both flags true: a message left open for the model gets no generation prompt after it.
        payload: dict[str, Any] = {"model": self.model_id, "messages": [vllm_message(m) for m in messages],
                                   "add_generation_prompt": not continue_final_message,
                                   "continue_final_message": continue_final_message}
        if tools is not None:
            payload["tools"] = tools
        return self._tokenize(payload)

    def tokenize(self, text: str) -> list[int]:
        return self._tokenize({"model": self.model_id, "prompt": text, "add_special_tokens": False})

    def _tokenize(self, payload: dict[str, Any]) -> list[int]:
        with self._request("POST", "/tokenize", payload) as response:
            return [int(token_id) for token_id in response.json()["tokens"]]

    def detokenize(self, ids: list[int]) -> str:
        with self._request("POST", "/detokenize", {"model": self.model_id, "tokens": list(ids)}) as response:
            return str(response.json()["prompt"])

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Known only with VLLM_TOKENIZER_DIR; without it, a picked end token does not end the response early
        (the server then stops on it by itself when it continues)."""
        tokenizer = self._tokenizer
        if tokenizer is None or tokenizer.eos_token_id is None:
            return frozenset()
        return frozenset([tokenizer.eos_token_id])

    @cached_property
    def max_token_bytes(self) -> int | None:
        """As the local backend's, from VLLM_TOKENIZER_DIR's copy of the tokenizer; None without one."""
        if self._tokenizer is None:
            return None
        return max(map(len, tokenizer_pieces(self._tokenizer, list(range(len(self._tokenizer))))))

    @property
    def tokenizer(self):
        """The copy of the served model's tokenizer (VLLM_TOKENIZER_DIR), or None without one."""
        return self._tokenizer

    def load_tokenizer(self) -> None:
        """Load the tokenizer copy now (a second or more) rather than in the first request that needs it."""
        _ = self._tokenizer

    @cached_property
    def _tokenizer(self):
        if not self._tokenizer_dir:
            return None
        from .tokenizer_files import load_tokenizer

        return load_tokenizer(self._tokenizer_dir)

    def token_pieces(self, ids: list[int]) -> list[bytes]:
        """The raw bytes of each token.

        With VLLM_TOKENIZER_DIR (a copy of the served model's tokenizer files)
        the bytes are exact, as in the local backend. Without it each distinct
        id is sent to /detokenize once and cached; the server decodes a lone
        token to text, so a piece that is only part of a UTF-8 character (byte-
        level BPE splits emoji and CJK) comes back as the bytes of U+FFFD rather
        than its real bytes. That loss is why VLLM_TOKENIZER_DIR exists.
        """
        if self._tokenizer is not None:
            return tokenizer_pieces(self._tokenizer, ids)
        for token_id in dict.fromkeys(ids):
            if token_id not in self._detokenized_pieces:
                self._detokenized_pieces[token_id] = self.detokenize([token_id]).encode("utf-8")
        return [self._detokenized_pieces[token_id] for token_id in ids]

    # --- generation ---------------------------------------------------------------
    def _sampling_payload(self, prompt_ids: list[int], *, max_tokens: int, temperature: float, seed: int | None,
                          top_k: int, stream: bool) -> dict[str, Any]:
        """A /v1/completions body for one prompt with top-k logprobs at every position (`stream` and `rollouts`)."""
        return {
            "model": self.model_id,
            "prompt": list(prompt_ids),
            "max_tokens": max_tokens,
            **sampling_fields(temperature=temperature, seed=seed),
            "logprobs": top_k,
            "return_tokens_as_token_ids": True,
            "stream": stream,
            "skip_special_tokens": False,
        }

    def stream(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, seed: int | None, top_k: int
    ) -> Iterator[TokenStep]:
        check_prompt(len(prompt_ids), context=self.context_length, max_tokens=max_tokens)
        payload = self._sampling_payload(prompt_ids, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                         top_k=top_k, stream=True)
        # One step of lookahead: vLLM may send the finish_reason in a last chunk
        # without tokens, and it belongs on the last token.
        pending: TokenStep | None = None
        with self._request("POST", "/v1/completions", payload, stream=True) as response:
            for chunk in self._stream_chunks(response):
                for choice in chunk["choices"]:  # one choice (n=1); a usage-only chunk has none
                    for step in choice_steps(choice):
                        if pending is not None:
                            yield pending
                        pending = step
                    if choice.get("finish_reason") and pending is not None:
                        pending = replace(pending, finish_reason=choice["finish_reason"])
        if pending is not None:
            yield pending

    def rollouts(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seeds: list[int | None], top_k: int
    ) -> Iterator[tuple[int, list[TokenStep]]]:
        """One request per prompt (its own `seed`: a request with a list of prompts would give all of them the
        same one), up to `max_concurrency` in flight, each retried `retries` times while vLLM is unavailable
        (in_flight.py). Not streamed: the whole completion in one body is cheaper, and its steps are those
        `stream` yields. Not a generator itself: the seeds and the model name are checked when called. A prompt
        over the context is handed out first as its PromptTooLong, and never sent; one the server refuses as too
        long (its limit lower than ours, or unknown) is handed out the same way, and the others go on."""
        if len(seeds) != len(prompts):
            raise BackendError(f"{len(seeds)} seeds for {len(prompts)} prompts.")
        refused = refused_prompts([len(ids) for ids in prompts], context=self.context_length if prompts else None,
                                  max_tokens=max_tokens)
        sent = [index for index in range(len(prompts)) if index not in refused]
        payloads = [self._sampling_payload(prompts[index], max_tokens=max_tokens, temperature=temperature,
                                           seed=seeds[index], top_k=top_k, stream=False) for index in sent]
        answers = completed(lambda row: self._completion_steps(payloads[row]), len(payloads),
                            limit=self.max_concurrency, retries=self.retries, backoff=self.retry_backoff)
        return refusals_first(refused, answers, sent)

    def _completion_steps(self, payload: dict[str, Any]) -> list[TokenStep] | PromptTooLong:
        """The steps of one non-streamed completion, its finish_reason on the last one (as `stream` puts it); the
        server's refusal of a prompt too long is returned, not raised, so that it ends this prompt alone."""
        try:
            return self._completion(payload)
        except PromptTooLong as refusal:
            return refusal

    def _completion(self, payload: dict[str, Any]) -> list[TokenStep]:
        with self._request("POST", "/v1/completions", payload) as response:
            [choice] = response.json()["choices"]
            steps = choice_steps(choice)
        if steps and choice.get("finish_reason"):
            steps[-1] = replace(steps[-1], finish_reason=choice["finish_reason"])
        return steps

    def _stream_chunks(self, response: httpx.Response) -> Iterator[dict[str, Any]]:
        """The JSON chunks of a completion stream (server-sent events) up to `data: [DONE]`."""
        where = f"vLLM POST {self._server}/v1/completions stream"
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue  # blank event separators and ": keep-alive" comments
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            # vLLM reports errors met after the 200 (e.g. a prompt too long) as a chunk.
            if (message := payload_error(chunk)) is not None:
                raise prompt_too_long(message, where) or BackendError(f"{where}: {message}")
            yield chunk
        # A clean end without [DONE] means the server went away mid-generation.
        raise BackendUnavailable(f"{where}: ended before [DONE].")

    def prompt_logprobs(self, ids: list[int], *, top_k: int) -> list[dict[int, float] | None]:
        check_prompt(len(ids), context=self.context_length)  # and the one token vLLM must generate
        payload = {
            "model": self.model_id,
            "prompt": list(ids),
            "max_tokens": 1,  # vLLM must generate something; the one token is ignored
            "prompt_logprobs": top_k,
            "return_tokens_as_token_ids": True,
            **sampling_fields(temperature=0),
        }
        with self._request("POST", "/v1/completions", payload) as response:
            entries = response.json()["choices"][0]["prompt_logprobs"]
            if len(entries) != len(ids):
                raise BackendError(f"vLLM returned {len(entries)} prompt logprobs for {len(ids)} prompt tokens.")
            # Entry 0 is null: nothing precedes the first token.
            return [
                None if entry is None else {id_of_key(key): float(value["logprob"]) for key, value in entry.items()}
                for entry in entries
            ]

    # --- batched scoring (vllm_scoring.py) ---------------------------------------------
    # Prompts (or sequences) per scoring request: one request per chunk, so a body stays a few MB at most.
    max_batch_sequences = 256
    # Whether the server answers `logprob_token_ids` (vLLM >= 0.34): None until the first next-token scoring asks.
    answers_logprob_token_ids: bool | None = None

    def next_token_logprobs(self, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]]:
        """One request per batch of prompts with `logprob_token_ids`; on a server without it, one sequence per
        (prompt, candidate) with `prompt_logprobs`."""
        return vllm_scoring.next_token_logprobs(self, prompts, candidates)

    def continuation_logprobs(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        return vllm_scoring.continuation_logprobs(self, pairs)

    supports_json_schema = True

    def generate(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        json_schema: dict | None = None, choice: list[str] | None = None,
    ) -> list[Generation]:
        """The whole batch in one request (`prompt` as a list of id lists): vLLM makes each prompt a request of
        its own and schedules them all together, so a batch past VLLM_MAX_CONCURRENCY is not split (more HTTP
        requests would add nothing). Each prompt's sampler is seeded with the one `seed`: the same prompt twice
        in a batch gets the same answer twice at any temperature (`rollouts` takes a seed per prompt).

        With a schema or a choice list, vLLM's structured outputs constrain the answer to it
        (`structured_outputs` with `json` or `choice`, the request field of current vLLM; the older
        `guided_json` / `guided_choice` fields were removed in v0.12, and vLLM now ignores them)."""
        if json_schema is not None and choice is not None:
            raise BackendError("json_schema and choice are exclusive: give one constraint, not both.")
        if not prompts:
            return []
        check_prompts([len(ids) for ids in prompts], context=self.context_length, max_tokens=max_tokens)
        # The text is read: whether it keeps special tokens is said too, or a generation_config.json could say it.
        payload: dict[str, Any] = {"model": self.model_id, "prompt": [list(ids) for ids in prompts],
                                   "max_tokens": max_tokens, **sampling_fields(temperature=temperature, seed=seed),
                                   "skip_special_tokens": True}
        if json_schema is not None:
            # No free whitespace in the JSON, as the embedded model writes it (a small model can spend its budget on
            # it). vLLM 0.34 reads this only from --structured-outputs-config (docker-compose.yml sets it there); the
            # request says it too, for a release that reads it per request.
            payload["structured_outputs"] = {"json": json_schema, "disable_any_whitespace": True}
        elif choice is not None:
            payload["structured_outputs"] = {"choice": list(choice)}
        with self._request("POST", "/v1/completions", payload) as response:
            choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
            if len(choices) != len(prompts):
                raise BackendError(f"vLLM returned {len(choices)} completions for {len(prompts)} prompts.")
            return [Generation(text=choice["text"], token_ids=[], finish_reason=choice.get("finish_reason") or "length")
                    for choice in choices]

    def generate_each(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        constraints: list[dict | None],
    ) -> list[Generation]:
        """A request carries one `structured_outputs`: one `generate` per distinct constraint, in turn."""
        return generate_by_constraint(self, prompts, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                      constraints=constraints)

    def health(self) -> BackendHealth:
        """Whether the server is up and serves the configured model. Never raises."""
        started = time.perf_counter()
        try:
            with self._request("GET", "/health"):
                pass
            served = self.served_models()
        except BackendError as exc:
            return BackendHealth(ok=False, backend=self.name, model_id=self._model, detail=str(exc))
        latency_ms = (time.perf_counter() - started) * 1000
        if self._model and self._model not in served:
            ok = False
            detail = gettext("`MODEL_NAME` %(model)s is not served by `%(server)s`; it serves %(served)s.") % {
                "model": repr(self._model), "server": self._server, "served": ", ".join(served)}
        else:
            self._model = self._model or served[0]  # resolves model_id without asking again
            ok = True
            detail = gettext("served by `%(server)s`") % {"server": self._server}
        return BackendHealth(ok=ok, backend=self.name, model_id=self._model, detail=detail, latency_ms=latency_ms)
