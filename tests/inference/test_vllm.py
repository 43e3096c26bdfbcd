"""VllmBackend against a fake vLLM server serving the payload shapes of vLLM's OpenAI-compatible API."""

import json
import shutil
import threading
import time

import pytest
from werkzeug import Request, Response

from dataplatform.inference.base import BackendError, BackendUnavailable, TokenStep
from dataplatform.inference.vllm import VllmBackend
from dataplatform.inference.vllm_wire import NEUTRAL_SAMPLING
from tests.inference.utf8 import is_whole_utf8
from tests.net import closed_port

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


@pytest.fixture
def make_backend(httpserver):
    backends = []

    def make(**overrides) -> VllmBackend:
        options = {
            "base_url": httpserver.url_for(""), "model": MODEL, "api_key": "", "timeout": 5, "tokenizer_dir": None,
        }
        backend = VllmBackend(**(options | overrides))
        backends.append(backend)
        return backend

    yield make
    for backend in backends:
        backend.close()


@pytest.fixture
def backend(make_backend) -> VllmBackend:
    return make_backend()


def sent_json(httpserver, index: int = -1) -> dict:
    request, _ = httpserver.log[index]
    return json.loads(request.data)


def closed_port_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


# --- payload builders (shapes of vLLM's CompletionStreamResponse) -------------------
def chunk(*tokens: tuple[int, float, dict[int, float]], finish_reason: str | None = None) -> dict:
    """A stream chunk carrying `tokens` as (id, logprob, top) with vLLM's "token_id:N" strings."""
    return {
        "id": "cmpl-8f1c",
        "object": "text_completion",
        "created": 1732900000,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "text": "".join(f"<{token_id}>" for token_id, _, _ in tokens),
            "logprobs": {
                "text_offset": list(range(len(tokens))),
                "token_logprobs": [logprob for _, logprob, _ in tokens],
                "tokens": [f"token_id:{token_id}" for token_id, _, _ in tokens],
                "top_logprobs": [{f"token_id:{k}": v for k, v in top.items()} for _, _, top in tokens],
            },
            "finish_reason": finish_reason,
            "stop_reason": None,
        }],
        "usage": None,
    }


def sse(*events: dict, done: bool = True) -> str:
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
    return body + ("data: [DONE]\n\n" if done else "")


def serve_stream(httpserver, body: str) -> None:
    httpserver.expect_request("/v1/completions", method="POST").respond_with_data(
        body, content_type="text/event-stream"
    )


# --- text <-> ids ------------------------------------------------------------------
def test_chat_prompt_ids(httpserver, backend):
    messages = [{"role": "user", "content": "Hi"}]
    httpserver.expect_request("/tokenize", method="POST").respond_with_json(
        {"count": 4, "max_model_len": 8192, "tokens": [1, 4093, 198, 2]}
    )
    assert backend.chat_prompt_ids(messages) == [1, 4093, 198, 2]
    assert sent_json(httpserver) == {"model": MODEL, "messages": messages, "add_generation_prompt": True,
                                     "continue_final_message": False}


def test_chat_prompt_ids_of_a_partial_assistant_message_with_tools(httpserver, backend):
    messages = [{"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": "Let me check", "reasoning": "The user wants"}]
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                               "parameters": {"type": "object", "properties": {}}}}]
    httpserver.expect_request("/tokenize", method="POST").respond_with_json(
        {"count": 3, "max_model_len": 8192, "tokens": [1, 4093, 198], "token_strs": None}
    )
    assert backend.chat_prompt_ids(messages, tools=tools, continue_final_message=True) == [1, 4093, 198]
    # Left open for the model: no generation prompt, which vLLM refuses together with continue_final_message.
    assert sent_json(httpserver) == {"model": MODEL, "messages": messages, "tools": tools,
                                     "add_generation_prompt": False, "continue_final_message": True}


def test_chat_prompt_ids_sends_an_empty_tool_list(httpserver, backend):
    httpserver.expect_request("/tokenize", method="POST").respond_with_json(
        {"count": 1, "max_model_len": 8192, "tokens": [1]}
    )
    backend.chat_prompt_ids([{"role": "user", "content": "Hi"}], tools=[])
    assert sent_json(httpserver)["tools"] == []


def test_tool_call_arguments_go_as_json_text_as_openais_request_schema_has_them(httpserver, backend):
    """The training shape carries arguments as objects; vLLM validates OpenAI's schema, which wants text."""
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": "é"}}}
    messages = [{"role": "user", "content": "1 + é"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    httpserver.expect_request("/tokenize", method="POST").respond_with_json({"count": 1, "tokens": [1]})
    backend.chat_prompt_ids(messages)
    sent = sent_json(httpserver)["messages"][1]["tool_calls"][0]["function"]
    assert sent == {"name": "add", "arguments": '{"a": 1, "b": "é"}'}
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": "é"}  # the caller's stays as it was


def test_past_reasoning_goes_under_the_key_vllms_chat_parser_reads(httpserver, backend):
    """The training shape carries it as `reasoning_content`, which vLLM ignores (test_vllm_conformance.py runs
    vLLM's own parser on the body)."""
    messages = [{"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."},
                {"role": "user", "content": "Bye"}]
    httpserver.expect_request("/tokenize", method="POST").respond_with_json({"count": 1, "tokens": [1]})
    backend.chat_prompt_ids(messages)
    assert sent_json(httpserver)["messages"] == [
        messages[0], {"role": "assistant", "content": "Hello", "reasoning": "Greet back."}, messages[2]]
    assert messages[1]["reasoning_content"] == "Greet back."  # the caller's stays as it was


def test_tokenize(httpserver, backend):
    httpserver.expect_request("/tokenize", method="POST").respond_with_json(
        {"count": 2, "max_model_len": 8192, "tokens": [19556, 905]}
    )
    assert backend.tokenize("Hello world") == [19556, 905]
    assert sent_json(httpserver) == {"model": MODEL, "prompt": "Hello world", "add_special_tokens": False}


def test_detokenize(httpserver, backend):
    httpserver.expect_request("/detokenize", method="POST").respond_with_json({"prompt": "Hello world"})
    assert backend.detokenize([19556, 905]) == "Hello world"
    assert sent_json(httpserver) == {"model": MODEL, "tokens": [19556, 905]}


@pytest.mark.model
def test_token_pieces_from_tokenizer_dir(httpserver, make_backend, tmp_path, local_backend):
    from transformers import AutoTokenizer

    from dataplatform.inference.local import converted_dir

    # The converted embedded model (made by the local_backend fixture) provides real tokenizer files.
    for name in TOKENIZER_FILES:
        shutil.copy(converted_dir(local_backend.data_dir) / name, tmp_path / name)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    text = "Hi 🦩"  # the flamingo is split over three tokens, none of them a whole character
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]

    pieces = make_backend(tokenizer_dir=str(tmp_path)).token_pieces(ids)

    assert b"".join(pieces[:-1]) == text.encode("utf-8")
    assert pieces[-1] == b"<|im_end|>"
    assert sum(1 for piece in pieces if not is_whole_utf8(piece)) >= 2
    assert httpserver.log == []  # exact bytes come from the files, not the server


def test_load_tokenizer_loads_it_once_without_the_server(httpserver, make_backend, tmp_path, local_backend):
    from dataplatform.inference.local import converted_dir

    for name in TOKENIZER_FILES:
        shutil.copy(converted_dir(local_backend.data_dir) / name, tmp_path / name)
    backend = make_backend(tokenizer_dir=str(tmp_path))
    assert "_tokenizer" not in backend.__dict__  # lazy until asked
    backend.load_tokenizer()
    loaded = backend.__dict__["_tokenizer"]
    assert loaded is not None and loaded.eos_token_id is not None
    backend.load_tokenizer()
    assert backend.__dict__["_tokenizer"] is loaded
    assert httpserver.log == []



def test_token_pieces_fall_back_to_detokenize_once_per_id(httpserver, backend):
    texts = {19556: "Hello", 10813: "\ufffd"}  # vLLM decodes a partial character to U+FFFD

    def detokenize(request: Request) -> Response:
        (token_id,) = request.get_json()["tokens"]
        return Response(json.dumps({"prompt": texts[token_id]}), content_type="application/json")

    httpserver.expect_request("/detokenize", method="POST").respond_with_handler(detokenize)

    assert backend.token_pieces([19556, 10813, 19556]) == [b"Hello", "\ufffd".encode(), b"Hello"]
    assert sorted(sent_json(httpserver, i)["tokens"][0] for i in range(len(httpserver.log))) == [10813, 19556]
    assert backend.token_pieces([10813, 19556]) == ["\ufffd".encode(), b"Hello"]
    assert len(httpserver.log) == 2  # cached: no new request


# --- generation --------------------------------------------------------------------
def test_stream_yields_one_step_per_token(httpserver, backend):
    # vLLM puts the sampled token first in top_logprobs, then the top k; it may rank below them.
    serve_stream(httpserver, sse(
        chunk((42, -1.2, {42: -1.2, 7: -0.4})),
        chunk((5, -3.1, {5: -3.1, 8: -0.2, 11: -1.9}), (8, -0.1, {8: -0.1, 3: -2.5})),
        chunk(finish_reason="length"),  # finish-only: no tokens
    ))

    steps = list(backend.stream([1, 4093, 198], max_tokens=3, temperature=0.7, seed=3, top_k=2))

    assert steps == [
        TokenStep(token_id=42, logprob=-1.2, top=[(7, -0.4), (42, -1.2)]),
        TokenStep(token_id=5, logprob=-3.1, top=[(8, -0.2), (11, -1.9), (5, -3.1)]),
        TokenStep(token_id=8, logprob=-0.1, top=[(8, -0.1), (3, -2.5)], finish_reason="length"),
    ]
    assert sent_json(httpserver) == {
        "model": MODEL,
        "prompt": [1, 4093, 198],
        "max_tokens": 3,
        "temperature": 0.7,
        **NEUTRAL_SAMPLING,
        "seed": 3,
        "logprobs": 2,
        "return_tokens_as_token_ids": True,
        "stream": True,
        "skip_special_tokens": False,
    }


def test_stream_finish_in_token_chunk_and_no_seed(httpserver, backend):
    serve_stream(httpserver, sse(chunk((9, -0.3, {9: -0.3})), chunk((2, -0.05, {2: -0.05}), finish_reason="stop")))

    steps = list(backend.stream([1], max_tokens=10, temperature=0, seed=None, top_k=1))

    assert [(step.token_id, step.finish_reason) for step in steps] == [(9, None), (2, "stop")]
    assert "seed" not in sent_json(httpserver)


def test_stream_error_object_raises_backend_error(httpserver, backend):
    error = {"error": {"message": "This model's maximum context length is 8192 tokens.", "type": "BadRequestError",
                       "param": None, "code": 400}}
    serve_stream(httpserver, sse(chunk((9, -0.3, {9: -0.3})), error))

    with pytest.raises(BackendError, match="maximum context length") as raised:
        list(backend.stream([1], max_tokens=10, temperature=0, seed=None, top_k=1))
    assert not isinstance(raised.value, BackendUnavailable)


def test_stream_cut_before_done_is_unavailable(httpserver, backend):
    serve_stream(httpserver, sse(chunk((9, -0.3, {9: -0.3})), done=False))

    with pytest.raises(BackendUnavailable, match=r"\[DONE\]"):
        list(backend.stream([1], max_tokens=10, temperature=0, seed=None, top_k=1))


def test_prompt_logprobs(httpserver, backend):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json({
        "id": "cmpl-3a0e",
        "object": "text_completion",
        "created": 1732900000,
        "model": MODEL,
        "choices": [{
            "index": 0,
            "text": "token_id:28",
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
            # Plain "504" keys and "token_id:17" keys: vLLM versions differ; both are accepted.
            "prompt_logprobs": [
                None,
                {"504": {"logprob": -2.5, "rank": 3, "decoded_token": "token_id:504"},
                 "28": {"logprob": -0.7, "rank": 1, "decoded_token": "token_id:28"}},
                {"token_id:17": {"logprob": -0.2, "rank": 1, "decoded_token": "token_id:17"}},
            ],
        }],
        "usage": {"prompt_tokens": 3, "total_tokens": 4, "completion_tokens": 1},
    })

    assert backend.prompt_logprobs([1, 504, 17], top_k=1) == [None, {504: -2.5, 28: -0.7}, {17: -0.2}]
    assert sent_json(httpserver) == {
        "model": MODEL,
        "prompt": [1, 504, 17],
        "max_tokens": 1,
        "prompt_logprobs": 1,
        "return_tokens_as_token_ids": True,
        "temperature": 0,
        **NEUTRAL_SAMPLING,
    }


# --- model and health --------------------------------------------------------------
MODELS = {"object": "list", "data": [
    {"id": MODEL, "object": "model", "created": 1732900000, "owned_by": "vllm", "max_model_len": 8192},
    {"id": "other-lora", "object": "model", "created": 1732900000, "owned_by": "vllm", "max_model_len": 8192},
]}


def test_model_id_from_v1_models_asked_once(httpserver, make_backend):
    httpserver.expect_request("/v1/models", method="GET").respond_with_json(MODELS)
    backend = make_backend(model="")

    assert backend.model_id == MODEL
    assert backend.model_id == MODEL
    assert len(httpserver.log) == 1


def test_health_ok(httpserver, backend):
    httpserver.expect_request("/health", method="GET").respond_with_data("")
    httpserver.expect_request("/v1/models", method="GET").respond_with_json(MODELS)

    health = backend.health()

    assert (health.ok, health.backend, health.model_id) == (True, "vllm", MODEL)
    assert health.latency_ms is not None and health.latency_ms >= 0


def test_health_model_not_served(httpserver, make_backend):
    httpserver.expect_request("/health", method="GET").respond_with_data("")
    httpserver.expect_request("/v1/models", method="GET").respond_with_json(MODELS)

    health = make_backend(model="meta-llama/Llama-3.1-8B-Instruct").health()

    assert not health.ok
    assert "'meta-llama/Llama-3.1-8B-Instruct' is not served" in health.detail
    assert MODEL in health.detail


def test_health_server_down(make_backend):
    health = make_backend(base_url=closed_port_url(), model="").health()

    assert (health.ok, health.backend, health.model_id) == (False, "vllm", "")
    assert "/health" in health.detail and "ConnectError" in health.detail


# --- failures ----------------------------------------------------------------------
def test_connection_refused_is_unavailable(make_backend):
    with pytest.raises(BackendUnavailable, match=r"/tokenize: ConnectError"):
        make_backend(base_url=closed_port_url()).tokenize("Hi")


def test_timeout_is_unavailable(httpserver, make_backend):
    release = threading.Event()

    def slow(request: Request) -> Response:
        release.wait(1)  # released at the end of the test so the single-threaded server is free again
        return Response("{}", content_type="application/json")

    httpserver.expect_request("/tokenize", method="POST").respond_with_handler(slow)
    backend = make_backend(timeout=0.3)
    started = time.perf_counter()
    try:
        with pytest.raises(BackendUnavailable, match=r"/tokenize: timed out after 0.3 s"):
            backend.tokenize("Hi")
    finally:
        release.set()
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize("call", ["tokenize", "stream"])
def test_503_is_unavailable(httpserver, backend, call):
    body = {"object": "error", "message": "The engine is overloaded.", "type": "ServiceUnavailableError", "code": 503}
    for path in ("/tokenize", "/v1/completions"):
        httpserver.expect_request(path, method="POST").respond_with_json(body, status=503)

    with pytest.raises(BackendUnavailable, match="HTTP 503: The engine is overloaded"):
        _call(backend, call)


@pytest.mark.parametrize("call", ["tokenize", "stream"])
def test_400_is_backend_error_with_server_message(httpserver, backend, call):
    body = {"error": {"message": "logprobs must be at most 20", "type": "BadRequestError", "param": None, "code": 400}}
    for path in ("/tokenize", "/v1/completions"):
        httpserver.expect_request(path, method="POST").respond_with_json(body, status=400)

    with pytest.raises(BackendError, match="HTTP 400: logprobs must be at most 20") as raised:
        _call(backend, call)
    assert not isinstance(raised.value, BackendUnavailable)


def _call(backend: VllmBackend, call: str) -> object:
    if call == "tokenize":
        return backend.tokenize("Hi")
    return list(backend.stream([1], max_tokens=4, temperature=0, seed=None, top_k=50))


def test_unexpected_body_is_backend_error(httpserver, backend):
    httpserver.expect_request("/tokenize", method="POST").respond_with_data("<html>proxy</html>")

    with pytest.raises(BackendError, match="unexpected response") as raised:
        backend.tokenize("Hi")
    assert not isinstance(raised.value, BackendUnavailable)


# --- construction as build_backend does it -----------------------------------------
def test_api_key_sent_as_bearer_and_never_in_errors(httpserver):
    backend = VllmBackend(base_url=httpserver.url_for(""), model="m", api_key="sekrit", timeout=5, tokenizer_dir=None)
    try:
        httpserver.expect_oneshot_request("/tokenize", method="POST").respond_with_json({"tokens": [1]})
        assert backend.tokenize("Hi") == [1]
        request, _ = httpserver.log[-1]
        assert request.headers["Authorization"] == "Bearer sekrit"

        # vLLM's --api-key middleware answers a wrong key like this.
        httpserver.expect_oneshot_request("/tokenize", method="POST").respond_with_json(
            {"error": "Unauthorized"}, status=401
        )
        with pytest.raises(BackendError, match="HTTP 401: Unauthorized") as raised:
            backend.tokenize("Hi")
        assert "sekrit" not in str(raised.value)
    finally:
        backend.close()


def test_no_authorization_header_without_key(httpserver, backend):
    httpserver.expect_request("/tokenize", method="POST").respond_with_json({"tokens": [1]})
    backend.tokenize("Hi")
    request, _ = httpserver.log[-1]
    assert "Authorization" not in request.headers


def test_generate_sends_the_batch_in_one_request_with_a_schema(httpserver, backend):
    seen = []

    def completions(request: Request) -> Response:
        body = json.loads(request.data)
        seen.append(body)
        # vLLM may answer the choices of a batch in any order; `index` says which prompt each is for.
        choices = [{"index": 1, "text": '{"b": 2}', "finish_reason": "stop"},
                   {"index": 0, "text": '{"a": 1', "finish_reason": "length"}]
        return Response(json.dumps({"choices": choices}), content_type="application/json")

    httpserver.expect_request("/v1/completions", method="POST").respond_with_handler(completions)
    schema = {"type": "object"}
    answers = backend.generate([[1, 2], [3]], max_tokens=16, temperature=0.0, seed=5, json_schema=schema)
    assert [(a.text, a.finish_reason) for a in answers] == [('{"a": 1', "length"), ('{"b": 2}', "stop")]
    assert len(seen) == 1 and seen[0]["prompt"] == [[1, 2], [3]] and seen[0]["seed"] == 5
    assert seen[0]["structured_outputs"] == {"json": schema, "disable_any_whitespace": True}
    assert seen[0]["max_tokens"] == 16 and seen[0]["temperature"] == 0.0 and seen[0]["skip_special_tokens"]
    assert NEUTRAL_SAMPLING.items() <= seen[0].items()


def test_generate_with_a_choice_list_sends_vllms_choice_field(httpserver, backend):
    seen = []

    def completions(request: Request) -> Response:
        seen.append(json.loads(request.data))
        return Response(json.dumps({"choices": [{"index": 0, "text": "no", "finish_reason": "stop"}]}),
                        content_type="application/json")

    httpserver.expect_request("/v1/completions", method="POST").respond_with_handler(completions)
    [answer] = backend.generate([[1, 2]], max_tokens=4, temperature=0.0, seed=None, choice=["yes", "no"])
    assert answer.text == "no" and seen[0]["structured_outputs"] == {"choice": ["yes", "no"]}
    with pytest.raises(BackendError, match="exclusive"):
        backend.generate([[1]], max_tokens=4, temperature=0.0, seed=None, json_schema={}, choice=["a"])
    assert len(seen) == 1


def test_generate_with_a_missing_choice_is_an_error(httpserver, backend):
    httpserver.expect_request("/v1/completions", method="POST").respond_with_json(
        {"choices": [{"index": 0, "text": "x", "finish_reason": "stop"}]})
    with pytest.raises(BackendError, match="1 completions for 2 prompts"):
        backend.generate([[1], [2]], max_tokens=4, temperature=0.0, seed=None)
    assert backend.supports_json_schema


def test_generate_each_sends_one_request_per_distinct_constraint_and_answers_in_row_order(httpserver, backend):
    """A request carries one `structured_outputs`: rows sharing a constraint go together, in the order each
    constraint first appears, and each row gets its own answer back (the labeler's stage two on vLLM)."""
    seen = []

    def completions(request: Request) -> Response:
        body = json.loads(request.data)
        seen.append(body)
        return Response(json.dumps({"choices": [{"index": n, "text": f"{len(seen)}:{prompt[0]}", "finish_reason": "stop"}
                                                for n, prompt in enumerate(body["prompt"])]}),
                        content_type="application/json")

    httpserver.expect_request("/v1/completions", method="POST").respond_with_handler(completions)
    first, second = {"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}
    answers = backend.generate_each([[10], [11], [12], [13]], max_tokens=8, temperature=0.0, seed=0,
                                    constraints=[{"json_schema": first}, None, {"json_schema": first},
                                                 {"json_schema": second}])
    assert [answer.text for answer in answers] == ["1:10", "2:11", "1:12", "3:13"]
    assert [(body["prompt"], body.get("structured_outputs")) for body in seen] == [
        ([[10], [12]], {"json": first, "disable_any_whitespace": True}), ([[11]], None),
        ([[13]], {"json": second, "disable_any_whitespace": True})]
    assert all(body["seed"] == 0 and body["max_tokens"] == 8 for body in seen)
    for bad, message in (([{"regex": "x"}], "nothing else"), ([{"json_schema": {}, "choice": ["a"]}], "exclusive"),
                         ([None, None], "2 constraints for 1 prompts")):
        with pytest.raises(BackendError, match=message):
            backend.generate_each([[1]], max_tokens=4, temperature=0.0, seed=0, constraints=bad)
    assert len(seen) == 3
