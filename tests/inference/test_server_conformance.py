"""The embedded model server (dataplatform/inference/server.py, server_fields.py, server_chat.py) against vLLM 0.34's
own code, installed without its dependencies (requirements/vllm.txt): the same request bodies go through vLLM's
request models and checks and through the server, and both accept or both refuse; every answer of the server
validates against vLLM's response models, with no field they lack; chat messages reach the template as vLLM's own
parser hands them. What the server refuses on purpose (what vLLM honours and it cannot) is checked to be refused,
never answered as if it had not been asked. To check against a newer vLLM, see docs/operations.md.
"""

import json
from types import SimpleNamespace
from typing import NamedTuple

import httpx
import pytest
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from transformers import AutoTokenizer
from vllm.entrypoints.openai.completion.protocol import (
    CompletionRequest,
    CompletionResponse,
    CompletionStreamResponse,
)
from vllm.entrypoints.serve.engine.protocol import ErrorResponse, ModelList
from vllm.entrypoints.serve.middleware.authenticate import AuthenticationMiddleware
from vllm.entrypoints.serve.tokenize.protocol import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeResponse,
)
from vllm.exceptions import VLLMValidationError
from vllm.renderers.base import BaseRenderer
from vllm.renderers.chat_utils.chat_message import parse_chat_messages

from dataplatform.inference.base import BackendError, TokenStep
from dataplatform.inference.local import converted_dir
from dataplatform.inference.server import build_app
from dataplatform.inference.server_fields import IGNORED, SERVED, UNSERVED

from .model_servers import KEY, SERVED_NAME

pytestmark = pytest.mark.model

PROMPT = [504, 3458, 282, 9729, 30]  # any ids of the vocabulary: only the answers' shapes and refusals matter here
CONTEXT = 64  # the context the verdicts are taken at (MODEL_MAX_CONTEXT_TOKENS), so that a prompt over it is short
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


# --- vLLM's side ------------------------------------------------------------------------------------------------

class Refusal(NamedTuple):
    words: str | None  # vLLM's own sentence, None for a type error pydantic words
    param: str | None  # the field vLLM names, if any


def vllm_refusal(body: dict, *, max_model_len: int, vocab_size: int) -> Refusal | None:
    """How vLLM 0.34 refuses a /v1/completions body before its engine runs, None when it takes it: its request model
    (FastAPI validates the body with it), its renderer's context and vocabulary checks, its sampling parameters.
    Its `get_max_tokens` is written out (its module needs orjson, a server dependency): the context left after the
    prompt, at most `max_tokens`."""
    config = SimpleNamespace(max_model_len=max_model_len, get_vocab_size=lambda: vocab_size)
    try:
        request = CompletionRequest.model_validate(body)
        prompts = request.prompt if request.prompt and isinstance(request.prompt[0], list) else [request.prompt]
        for ids in prompts:
            request.build_tok_params(config).apply_post_tokenization(None, {"prompt_token_ids": ids})
            BaseRenderer.validate_token_ids(SimpleNamespace(tokenizer=None, model_config=config), ids)
            request.to_sampling_params(min(max_model_len - len(ids), request.max_tokens), {})
    except VLLMValidationError as exc:
        return _refusal(exc)
    except ValidationError as exc:  # a validator's VLLMValidationError is inside, as FastAPI's handler finds it
        inner = [error["ctx"]["error"] for error in exc.errors()
                 if isinstance(error.get("ctx", {}).get("error"), VLLMValidationError)]
        return _refusal(inner[0]) if inner else Refusal(None, None)
    return None


def _refusal(exc: VLLMValidationError) -> Refusal:
    # Its message without the request's own values vLLM appends (its dataclass's fields after ": {").
    return Refusal(exc.args[0].split(": {")[0], exc.parameter)


def vllm_conversation(body: dict) -> tuple[list[dict], list[dict] | None]:
    """The conversation and tools vLLM 0.34 hands the chat template for a /tokenize chat body: its request model,
    then its chat parser in the "string" content format (the embedded model's template's), on a text-only model
    (a stand-in for its ModelConfig: the real one inspects the model's architecture, which needs vLLM's GPU stack).
    Raises what vLLM refuses the body with."""
    request = TokenizeChatRequest.model_validate(body)
    text_only = SimpleNamespace(multimodal_config=None, enable_prompt_embeds=False, is_multimodal_model=False)
    conversation, _, _ = parse_chat_messages(request.messages, text_only, "string")
    return conversation, None if request.tools is None else [tool.model_dump() for tool in request.tools]


def assert_vllm_shape(model: type[BaseModel], payload: dict) -> BaseModel:
    """`payload` validates as vLLM's `model`, and carries no field the model lacks (vLLM's models take extra
    fields silently, so validation alone would not see an invented one)."""
    parsed = model.model_validate(payload)
    assert _extra_fields(parsed) == [], f"fields vLLM's {model.__name__} does not have"
    return parsed


def _extra_fields(value, path: str = "") -> list[str]:
    if isinstance(value, BaseModel):
        found = [f"{path}.{name}" for name in (value.model_extra or {})]
        return found + [extra for name in type(value).model_fields
                        for extra in _extra_fields(getattr(value, name), f"{path}.{name}")]
    if isinstance(value, list | tuple):
        return [extra for index, item in enumerate(value) for extra in _extra_fields(item, f"{path}[{index}]")]
    if isinstance(value, dict):
        return [extra for key, item in value.items() for extra in _extra_fields(item, f"{path}[{key}]")]
    return []


# --- the server's side ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(model_server, local_backend):
    """The module's model server, its client, and what vLLM's checks need to know of its model."""
    http = httpx.Client(base_url=model_server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    [card] = http.get("/v1/models").json()["data"]
    yield SimpleNamespace(http=http, max_model_len=card["max_model_len"],
                          vocab_size=local_backend.model.config.vocab_size)
    http.close()


def complete(server, body: dict) -> httpx.Response:
    return server.http.post("/v1/completions", json={"model": SERVED_NAME} | body)


def stream_chunks(response: httpx.Response) -> list[dict]:
    lines = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def assert_answer_is_vllms(response: httpx.Response, body: dict) -> None:
    if body.get("stream"):
        for chunk in stream_chunks(response):
            assert_vllm_shape(CompletionStreamResponse, chunk)
    else:
        assert_vllm_shape(CompletionResponse, response.json())


# --- /v1/completions: the same verdicts ---------------------------------------------------------------------------

def test_every_field_of_vllms_completion_request_is_served_refused_or_ignored_on_purpose():
    # A newer vLLM's new field fails this until it is sorted into one of the three (server_fields.py).
    fields = set(CompletionRequest.model_fields)
    assert set(SERVED) | set(UNSERVED) | set(IGNORED) == fields
    assert not (set(SERVED) & set(UNSERVED) or set(SERVED) & set(IGNORED) or set(UNSERVED) & set(IGNORED))
    # Leaving an unserved field out asks what its neutral value asks.
    for field, neutral in UNSERVED.items():
        assert CompletionRequest.model_fields[field].get_default(call_default_factory=True) in (None, neutral), field


BODIES = {
    "plain": {"prompt": PROMPT, "max_tokens": 2, "temperature": 0},
    "token ids and top-k logprobs": {"prompt": PROMPT, "max_tokens": 2, "logprobs": 3,
                                     "return_tokens_as_token_ids": True, "skip_special_tokens": False},
    "every sampling field, neutral": {"prompt": PROMPT, "max_tokens": 2, "temperature": 0.7, "seed": 1, "top_p": 1.0,
                                      "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                                      "frequency_penalty": 0.0},
    "top_k -1 is off": {"prompt": PROMPT, "max_tokens": 1, "top_k": -1},
    "greedy ignores top_p, top_k, min_p": {"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "top_p": 0.5,
                                           "top_k": 5, "min_p": 0.2},
    "a tiny temperature": {"prompt": PROMPT, "max_tokens": 1, "temperature": 0.001},
    "a negative seed": {"prompt": PROMPT, "max_tokens": 1, "seed": -5},
    "seed -1": {"prompt": PROMPT, "max_tokens": 1, "seed": -1},
    "the largest seed": {"prompt": PROMPT, "max_tokens": 1, "seed": 2**63 - 1},
    "n samples": {"prompt": PROMPT, "max_tokens": 1, "n": 2, "seed": 3},
    "two prompts": {"prompt": [PROMPT, PROMPT[:3]], "max_tokens": 1, "temperature": 0},
    "text": {"prompt": "Name a prime.", "max_tokens": 1, "temperature": 0},
    "json without whitespace": {"prompt": PROMPT, "max_tokens": 2, "temperature": 0,
                                "structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}},
    "choice": {"prompt": PROMPT, "max_tokens": 2, "temperature": 0, "structured_outputs": {"choice": ["yes", "no"]}},
    "prompt logprobs": {"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1},
    "stream with usage": {"prompt": PROMPT, "max_tokens": 2, "stream": True, "logprobs": 1,
                          "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    "stream of n samples": {"prompt": PROMPT, "max_tokens": 2, "stream": True, "n": 2,
                            "stream_options": {"include_usage": True}},
    "stream with prompt_logprobs 0": {"prompt": PROMPT, "max_tokens": 1, "stream": True, "prompt_logprobs": 0},
    "null max_tokens and bookkeeping": {"prompt": [PROMPT[0]] * 60, "max_tokens": None, "temperature": 0,
                                        "user": "u", "request_id": "r-1", "cache_salt": "salt", "priority": 0},
    "max_tokens cut to the context": {"prompt": [PROMPT[0]] * 60, "max_tokens": 8, "temperature": 0},
    # refused by both
    "no constraint": {"prompt": PROMPT, "structured_outputs": {}},
    "options only": {"prompt": PROMPT, "structured_outputs": {"disable_any_whitespace": True}},
    "two constraints": {"prompt": PROMPT, "structured_outputs": {"json": SCHEMA, "choice": ["a"]}},
    "prompt_logprobs in a stream": {"prompt": PROMPT, "stream": True, "prompt_logprobs": 1},
    "stream_options without a stream": {"prompt": PROMPT, "stream_options": {"include_usage": True}},
    "temperature over 2": {"prompt": PROMPT, "temperature": 2.5},
    "negative temperature": {"prompt": PROMPT, "temperature": -1},
    "top_p 0": {"prompt": PROMPT, "top_p": 0},
    "top_p over 1": {"prompt": PROMPT, "top_p": 1.5},
    "top_k -2": {"prompt": PROMPT, "top_k": -2},
    "min_p over 1": {"prompt": PROMPT, "min_p": 1.5},
    "repetition_penalty 0": {"prompt": PROMPT, "repetition_penalty": 0},
    "presence_penalty 3": {"prompt": PROMPT, "presence_penalty": 3},
    "frequency_penalty -3": {"prompt": PROMPT, "frequency_penalty": -3},
    "n 0": {"prompt": PROMPT, "n": 0},
    "n samples of a greedy pick": {"prompt": PROMPT, "n": 2, "temperature": 0},
    "a seed past int64": {"prompt": PROMPT, "seed": 2**63},
    "max_tokens 0": {"prompt": PROMPT, "max_tokens": 0},
    "max_tokens over the context": {"prompt": PROMPT, "max_tokens": CONTEXT + 1},
    "a prompt over the context": {"prompt": [PROMPT[0]] * (CONTEXT + 6), "max_tokens": 1},
    "a prompt just over the context": {"prompt": [PROMPT[0]] * (CONTEXT + 1), "max_tokens": 1},
    "a prompt that fills the context": {"prompt": [PROMPT[0]] * CONTEXT, "max_tokens": 1},
    "no prompt": {"max_tokens": 1},
    "an empty text": {"prompt": "", "max_tokens": 1},
    "a negative id": {"prompt": [-1], "max_tokens": 1},
    "an id past the vocabulary": {"prompt": [10**9], "max_tokens": 1},
    "negative logprobs": {"prompt": PROMPT, "logprobs": -2},
    "too many prompts": {"prompt": [PROMPT[:1]] * 1025, "max_tokens": 1},
}


@pytest.mark.parametrize("name", BODIES)
def test_the_server_takes_and_refuses_what_vllm_does(server, local_backend, settings, name):
    settings.MODEL_MAX_CONTEXT_TOKENS = CONTEXT  # read at each request: the bodies over it stay a few ids
    body = BODIES[name]
    vllm_body = body | ({"prompt": local_backend.tokenizer.encode(body["prompt"])}
                        if isinstance(body.get("prompt"), str) and body["prompt"] else {})
    refusal = vllm_refusal(vllm_body, max_model_len=CONTEXT, vocab_size=server.vocab_size)
    response = complete(server, body)
    if refusal is None:
        assert response.status_code == 200, f"vLLM takes it; the server says {response.text}"
        assert_answer_is_vllms(response, body)
    else:
        assert response.status_code == 400, f"vLLM refuses it ({refusal}); the server says {response.text[:300]}"
        error = assert_vllm_shape(ErrorResponse, response.json()).error
        # In vLLM's words, about the field vLLM names.
        assert refusal.words is None or refusal.words in error.message
        assert refusal.param is None or error.param == refusal.param


UNHONOURED = {
    # Sampling the local backend does not do (it draws from the whole distribution at the temperature).
    "top_p": {"top_p": 0.9}, "top_k": {"top_k": 20}, "min_p": {"min_p": 0.1},
    "repetition_penalty": {"repetition_penalty": 1.05, "temperature": 0},  # it changes even a greedy pick
    "presence_penalty": {"presence_penalty": 0.5}, "frequency_penalty": {"frequency_penalty": 0.5},
    # Constraints it has no grammar for.
    "regex": {"structured_outputs": {"regex": "[0-9]+"}},
    "response_format": {"response_format": {"type": "json_object"}},
    # Every other field it does not implement, at a value vLLM would act on.
    "echo": {"echo": True}, "logit_bias": {"logit_bias": {"11": 5}}, "stop": {"stop": ["\n"]},
    "suffix": {"suffix": "x"}, "use_beam_search": {"use_beam_search": True}, "watermarking": {"watermarking": True},
    "stop_token_ids": {"stop_token_ids": [11]}, "include_stop_str_in_output": {"include_stop_str_in_output": True},
    "ignore_eos": {"ignore_eos": True}, "min_tokens": {"min_tokens": 1},
    "spaces_between_special_tokens": {"spaces_between_special_tokens": False},
    "truncate_prompt_tokens": {"truncate_prompt_tokens": 3}, "truncation_side": {"truncation_side": "left"},
    "allowed_token_ids": {"allowed_token_ids": [11, 12]}, "bad_words": {"bad_words": ["x"]},
    "prompt_embeds": {"prompt_embeds": "AAAA"}, "priority": {"priority": 1},
    "return_token_ids": {"return_token_ids": True}, "return_weight_versions": {"return_weight_versions": True},
    "repetition_detection": {"repetition_detection": {"max_pattern_size": 4, "min_count": 3}},
    "thinking_token_budget": {"thinking_token_budget": 5}, "stream_interval": {"stream_interval": 4},
}


def test_every_unserved_field_has_a_case_below():
    assert set(UNSERVED) <= set(UNHONOURED)


@pytest.mark.parametrize("field", UNHONOURED)
def test_what_vllm_would_honour_and_the_server_cannot_is_refused_not_ignored(server, field):
    body = {"prompt": PROMPT, "max_tokens": 1} | UNHONOURED[field]
    CompletionRequest.model_validate(body)  # a request vLLM takes as asked
    response = complete(server, body)
    assert response.status_code == 400
    message = assert_vllm_shape(ErrorResponse, response.json()).error.message
    assert f"`{field}`" in message


# --- /v1/completions: the answers ---------------------------------------------------------------------------------

def test_neutral_sampling_fields_change_nothing(server):
    plain = {"prompt": PROMPT, "max_tokens": 4, "temperature": 1.0, "seed": 42, "logprobs": 0,
             "return_tokens_as_token_ids": True}
    neutral = plain | {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                       "frequency_penalty": 0.0}
    tokens = [complete(server, body).json()["choices"][0]["logprobs"]["tokens"] for body in (plain, neutral)]
    assert tokens[0] == tokens[1] and len(tokens[0]) >= 1


def test_n_samples_are_numbered_and_seeded_as_vllm_does(server):
    # vLLM numbers the choices prompt by prompt and gives a seeded request's samples seed, seed + 1, ...
    other = PROMPT[:3]
    body = {"prompt": [PROMPT, other], "n": 2, "seed": 7, "temperature": 1.0, "max_tokens": 2, "logprobs": 0,
            "return_tokens_as_token_ids": True}
    answer = assert_vllm_shape(CompletionResponse, complete(server, body).json())
    assert [choice.index for choice in answer.choices] == [0, 1, 2, 3]
    for choice, (prompt, seed) in zip(answer.choices, [(PROMPT, 7), (PROMPT, 8), (other, 7), (other, 8)], strict=True):
        alone = complete(server, body | {"prompt": prompt, "n": 1, "seed": seed}).json()["choices"][0]
        assert choice.logprobs.tokens == alone["logprobs"]["tokens"]
    generated = sum(len(choice.logprobs.tokens) for choice in answer.choices)
    assert answer.usage.model_dump(exclude_none=True) == {
        "prompt_tokens": len(PROMPT) + len(other), "completion_tokens": generated,
        "total_tokens": len(PROMPT) + len(other) + generated}


def test_a_stream_ends_with_vllms_usage_chunk(server):
    body = {"prompt": PROMPT, "n": 2, "seed": 1, "max_tokens": 3, "stream": True, "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    chunks = [assert_vllm_shape(CompletionStreamResponse, chunk) for chunk in stream_chunks(complete(server, body))]
    *tokens, last = chunks
    assert last.choices == [] and {chunk.choices[0].index for chunk in tokens} == {0, 1}
    per_choice = {index: [c for c in tokens if c.choices[0].index == index] for index in (0, 1)}
    for choice_chunks in per_choice.values():
        # continuous_usage_stats: each chunk counts its choice's tokens so far
        assert [c.usage.completion_tokens for c in choice_chunks] == list(range(1, len(choice_chunks) + 1))
    assert last.usage.prompt_tokens == len(PROMPT)  # a prompt counts once, whatever its n
    assert last.usage.completion_tokens == len(tokens)


def test_streamed_text_adds_up_to_the_whole_even_inside_a_character(server, local_backend):
    # No token spells all four bytes of "🐼": vLLM's incremental detokenizer writes nothing for a token that ends inside
    # it, and the character once the rest has come (the choice makes the model spell it).
    panda = "🐼"
    assert local_backend.detokenize(local_backend.tokenizer.encode(panda)[:1]).endswith("\ufffd")
    body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 0, "structured_outputs": {"choice": [panda]}}
    assert complete(server, body).json()["choices"][0]["text"] == panda
    texts = [chunk["choices"][0]["text"] for chunk in stream_chunks(complete(server, body | {"stream": True}))]
    assert "".join(texts) == panda and "" in texts[:-1]


def test_tokenize_detokenize_and_models_answer_in_vllms_shapes(server):
    text = {"prompt": "Hello world", "return_token_strs": True}
    chat = {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}
    TokenizeCompletionRequest.model_validate(text)
    TokenizeChatRequest.model_validate(chat)
    tokens = assert_vllm_shape(TokenizeResponse, server.http.post("/tokenize", json=text).json())
    assert_vllm_shape(TokenizeResponse, server.http.post("/tokenize", json=chat).json())
    DetokenizeRequest.model_validate({"tokens": tokens.tokens})
    answer = server.http.post("/detokenize", json={"tokens": tokens.tokens}).json()
    assert assert_vllm_shape(DetokenizeResponse, answer).prompt == "Hello world"
    models = assert_vllm_shape(ModelList, server.http.get("/v1/models").json())
    assert [card.id for card in models.data] == [SERVED_NAME] and models.data[0].max_model_len == server.max_model_len


@pytest.mark.parametrize(("method", "path", "body", "status"), [
    ("POST", "/v1/completions", {"prompt": PROMPT, "top_p": 2}, 400),
    ("POST", "/tokenize", {"messages": [{"role": 5}]}, 400),
    ("POST", "/tokenize", {"model": "another", "prompt": "x"}, 404),
    ("GET", "/no/such/route", None, 404),
    ("GET", "/v1/completions", None, 405),
])
def test_errors_are_vllms_error_response(server, method, path, body, status):
    response = server.http.request(method, path, json=body)
    assert response.status_code == status
    assert assert_vllm_shape(ErrorResponse, response.json()).error.code == status


def test_a_missing_key_gets_what_vllms_own_middleware_answers(model_server):
    # vLLM's API-key middleware, around an app that answers every guarded route.
    guarded = Starlette(routes=[Route("/v1/models", lambda request: JSONResponse({}))],
                        middleware=[Middleware(AuthenticationMiddleware, tokens=[KEY])])
    with TestClient(guarded) as vllm:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"},
                        {"Authorization": f"bearer {KEY}"}):
            want = vllm.get("/v1/models", headers=headers)
            got = httpx.get(f"{model_server.url}/v1/models", headers=headers)
            assert got.status_code == want.status_code
            if want.status_code == 401:
                assert got.json() == want.json()


class Scripted:
    """The session's model with a scripted generation: `steps` in turn, then `error` raised if given."""

    def __init__(self, local_backend, steps: list[TokenStep], error: BackendError | None = None):
        self.local, self.script, self.error = local_backend, steps, error
        self.tokenizer, self.model = local_backend.tokenizer, local_backend.model
        self.eos_token_ids, self.context_length = local_backend.eos_token_ids, 8192

    def stream(self, prompt_ids, **options):
        yield from self.script
        if self.error is not None:
            raise self.error

    def detokenize(self, ids):
        return self.local.detokenize(ids)


def test_an_error_after_the_200_is_vllms_error_chunk(local_backend):
    first = TokenStep(token_id=PROMPT[0], logprob=-0.5, top=[(PROMPT[0], -0.5)])
    app = build_app(Scripted(local_backend, [first], BackendError("the model went away")),
                    served_model_name=SERVED_NAME)
    with TestClient(app) as http:
        response = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4, "stream": True})
    token, failure = stream_chunks(response)
    assert_vllm_shape(CompletionStreamResponse, token)
    assert assert_vllm_shape(ErrorResponse, failure).error.message == "the model went away"


def test_special_tokens_stay_in_the_text_only_when_asked(local_backend):
    # vLLM drops special tokens from the text unless skip_special_tokens is false, and the end token always.
    start = local_backend.tokenizer.convert_tokens_to_ids("<|im_start|>")
    [end] = local_backend.eos_token_ids
    word = local_backend.tokenizer.encode("Hi")
    steps = [TokenStep(token_id=i, logprob=-1.0, top=[(i, -1.0)]) for i in [start, *word]]
    steps.append(TokenStep(token_id=end, logprob=-1.0, top=[(end, -1.0)], finish_reason="stop"))
    app = build_app(Scripted(local_backend, steps), served_model_name=SERVED_NAME)
    with TestClient(app) as http:
        texts = [http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 8} | skip).json()["choices"][0]
                 ["text"] for skip in ({}, {"skip_special_tokens": False})]
    assert texts == ["Hi", "<|im_start|>Hi"]


# --- /tokenize: the messages as vLLM's parser reads them -----------------------------------------------------------

@pytest.fixture(scope="module")
def printing(local_backend):
    """The server on the embedded tokenizer with a template that prints what it is handed: tools, then each
    message, as JSON."""
    tokenizer = AutoTokenizer.from_pretrained(converted_dir(local_backend.data_dir))
    tokenizer.chat_template = ("{{ tools | tojson }}\n{% for m in messages %}{{ m | tojson }}\n{% endfor %}"
                               "{% if add_generation_prompt %}<gen>{% endif %}")
    app = build_app(SimpleNamespace(tokenizer=tokenizer, model=local_backend.model, context_length=8192),
                    served_model_name=SERVED_NAME)
    with TestClient(app) as http:
        yield SimpleNamespace(http=http, tokenizer=tokenizer)


def _call(arguments, **fields) -> dict:
    return {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}} | fields


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                                 "parameters": {"type": "object"}}}
CONVERSATIONS = {
    "reasoning, tool calls, tool results, tools": (
        [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Weather in Oslo?", "source_line": 7},
         {"role": "assistant", "content": None, "reasoning": "The tool knows.", "finish_reason": "tool_calls",
          "tool_calls": [_call('{"city": "Oslo"}')]},
         {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
          "content": [{"type": "text", "text": "12"}, {"type": "text", "text": "C"}]},
         {"role": "assistant", "content": "Twelve.", "tool_calls": []}],
        [WEATHER_TOOL, {"function": {"name": "bare"}}]),
    "reasoning under the old key is not read": (
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello", "reasoning_content": "greet"},
         {"role": "user", "content": "Again"}], None),
    "arguments vLLM coerces to {}": (
        [{"role": "user", "content": "?"},
         {"role": "assistant", "content": "", "reasoning": 5,
          "tool_calls": [_call(""), _call("{not json", id="c2"), _call("[1, 2]", id="c3"), _call("42", id="c4"),
                         _call('{"a": {"b": [1]}}', id="c5", extra="kept")]}], None),
    "text parts, names, tasks and no content": (
        [{"role": "user", "content": ["plain", {"type": "text", "text": "part"}, {"type": "refusal", "refusal": "no"},
                                      {"type": "thinking", "thinking": "hm"}, {"type": "input_text", "text": "in"}],
          "name": "ann", "task": "t"},
         {"role": "user"},
         {"role": "tool", "content": "x", "tool_call_id": None},
         {"role": "user", "content": "tool calls here are not read", "tool_calls": [_call("{}")]}], None),
    "arguments as an object": ([{"role": "assistant", "content": "", "tool_calls": [_call({"city": "Oslo"})]}], None),
    "a call without its id": ([{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}], None),
    "a call of another type": ([{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "custom", "custom": {"name": "f", "input": "x"}}]}], None),
    "a name that is not text": ([{"role": "user", "content": "Hi", "name": None}], None),
    "content that is not text": ([{"role": "user", "content": 5}], None),
    "a role that is not text": ([{"role": 3, "content": "Hi"}], None),
    "a tool without its name": ([{"role": "user", "content": "Hi"}], [{"type": "function", "function": {}}]),
}


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_messages_reach_the_template_as_vllms_parser_hands_them(printing, name):
    messages, tools = CONVERSATIONS[name]
    body = {"messages": messages} | ({"tools": tools} if tools is not None else {})
    response = printing.http.post("/tokenize", json=json.loads(json.dumps(body)))
    try:
        conversation, dumped_tools = vllm_conversation(json.loads(json.dumps(body)))
    except (ValidationError, VLLMValidationError, ValueError) as exc:
        assert response.status_code == 400, f"vLLM refuses it ({str(exc)[:200]}); the server took it"
        return
    assert response.status_code == 200, f"vLLM takes it; the server says {response.text}"
    # Both conversations through the same template, read back as data (key order aside).
    want = printing.tokenizer.apply_chat_template(conversation, tools=dumped_tools, tokenize=False,
                                                   add_generation_prompt=True)
    got = printing.tokenizer.decode(response.json()["tokens"])
    assert [json.loads(line) for line in got.split("\n")[:-1]] == [json.loads(line) for line in want.split("\n")[:-1]]
