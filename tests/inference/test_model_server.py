"""The embedded model server (dataplatform/inference/server.py) driven by the real vLLM client.

The server runs the session's real local model on a free port (uvicorn in a thread); `VllmBackend`
talks to it over HTTP exactly as it talks to vLLM. Every answer is checked against the same model
called in-process: what crosses the wire must be what the model said.
"""

import json
import math
from types import SimpleNamespace

import httpx
import pytest
from starlette.testclient import TestClient
from transformers import AutoTokenizer

from dataplatform.conversations.token_masks import describe_chat_template
from dataplatform.inference.base import BackendError
from dataplatform.inference.local import converted_dir
from dataplatform.inference.server import build_app
from dataplatform.inference.server_chat import BOTH_PROMPT_FLAGS, UNTRUSTED_TEMPLATE
from dataplatform.inference.vllm import VllmBackend

from .model_servers import KEY, SERVED_NAME, SMOLLM2_TEMPLATE, ThreadedServer

pytestmark = pytest.mark.model

@pytest.fixture
def client(model_server, local_backend):
    backend = VllmBackend(base_url=model_server.url, model="", api_key=KEY, timeout=30,
                          tokenizer_dir=str(local_backend.data_dir / "models" / local_backend.model_id))
    yield backend
    backend.close()


@pytest.fixture
def prompt_ids(local_backend):
    return local_backend.chat_prompt_ids([{"role": "user", "content": "Name a prime number."}])


def test_health_and_the_served_name(client):
    health = client.health()
    assert health.ok, health.detail
    assert client.model_id == SERVED_NAME


def test_text_and_ids_round_trip_like_the_model(client, local_backend):
    messages = [{"role": "user", "content": "Héllo <b>wörld</b> 🐼"}]
    assert client.chat_prompt_ids(messages) == local_backend.chat_prompt_ids(messages)
    ids = client.tokenize("def f(x):\n    return x + 1")
    assert ids == local_backend.tokenize("def f(x):\n    return x + 1")
    assert client.detokenize(ids) == "def f(x):\n    return x + 1"


PARTIAL = [{"role": "user", "content": "What is the capital of France?"},
           {"role": "assistant", "content": "The capital of France is"}]
FINISHED = [PARTIAL[0], {"role": "assistant", "content": "The capital of France is Paris."}]
TOOLS = [{"type": "function", "function": {
    "name": "lookup_capital", "description": "The capital city of a country.",
    "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]}}}]


def tokenize_request(model_server, **fields) -> httpx.Response:
    return httpx.post(f"{model_server.url}/tokenize", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": SERVED_NAME} | fields)


def test_a_partial_assistant_message_renders_as_the_model_does(client, local_backend):
    ids = client.chat_prompt_ids(PARTIAL, tools=TOOLS, continue_final_message=True)
    assert ids == local_backend.chat_prompt_ids(PARTIAL, tools=TOOLS, continue_final_message=True)
    # Left open: the message's own words end the prompt, with no end of turn and no new assistant header.
    assert local_backend.detokenize(ids).endswith("<|im_end|>\n<|im_start|>assistant\nThe capital of France is")
    finished = local_backend.tokenizer.apply_chat_template(FINISHED, tools=TOOLS, tokenize=True, return_dict=False)
    assert finished[:len(ids)] == ids


def test_a_continuation_of_the_open_message_finishes_it(client, local_backend):
    ids = client.chat_prompt_ids(PARTIAL, continue_final_message=True)
    steps = list(client.stream(ids, max_tokens=10, temperature=0.0, seed=None, top_k=1))
    assert steps[-1].finish_reason == "stop"
    # The model goes on with the same message (" Paris.", end of turn), as if it had written all of it.
    finished = local_backend.tokenizer.apply_chat_template(FINISHED, tokenize=True, return_dict=False)
    assert ids + [step.token_id for step in steps] == finished[:len(ids) + len(steps)]


def test_what_the_chat_template_sees_is_what_vllm_hands_it(local_backend):
    # A template that prints its inputs, on the embedded tokenizer; the app is served in-process.
    tokenizer = AutoTokenizer.from_pretrained(converted_dir(local_backend.data_dir))
    tokenizer.chat_template = ("{{ tools | tojson }}\n{% for m in messages %}{{ m | tojson }}\n{% endfor %}"
                               "{% if add_generation_prompt %}<gen>{% endif %}{{ mood }}")
    app = build_app(SimpleNamespace(tokenizer=tokenizer, model=local_backend.model, context_length=8192),
                    served_model_name=SERVED_NAME)
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}]},
        {"role": "user", "content": "Weather in Oslo?", "source_line": 7},
        {"role": "assistant", "content": None, "reasoning": "The tool knows.", "finish_reason": "tool_calls",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "12 C"},
        {"role": "assistant", "content": "Twelve", "tool_calls": []},
    ]
    tools = [{"function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    template_kwargs = {"mood": "calm", "add_generation_prompt": False}
    with TestClient(app) as http:
        response = http.post("/tokenize", json={"messages": messages, "tools": tools,
                                                "chat_template_kwargs": template_kwargs})
    assert response.status_code == 200, response.text
    *lines, last = tokenizer.decode(response.json()["tokens"]).split("\n")
    assert json.loads(lines[0]) == [{"type": "function", "function": {"name": "get_weather", "description": None,
                                                                      "parameters": {"type": "object"}}}]
    assert [json.loads(line) for line in lines[1:]] == [
        {"role": "system", "content": "Be brief.\nUse tools."},
        {"role": "user", "content": "Weather in Oslo?"},
        # vLLM copies `reasoning` to `reasoning_content`; transformers itself adds `thinking` (locally too).
        {"role": "assistant", "content": "", "reasoning": "The tool knows.", "reasoning_content": "The tool knows.",
         "thinking": "The tool knows.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "12 C", "tool_call_id": "call_1", "name": "get_weather"},
        {"role": "assistant", "content": "Twelve"},
    ]
    # The request's own add_generation_prompt (true by default) wins over the same name in chat_template_kwargs.
    assert last == "<gen>calm"


def renders(described: dict) -> dict:
    return {key: value for key, value in described.items() if key.startswith("renders_")}


def test_a_served_models_template_is_described_by_what_the_server_renders(client, local_backend):
    """What the manifest says of a served model's chat template is what the server's /tokenize renders of a probe
    conversation: all of it for the embedded model's template; nothing of tools, reasoning and calls for SmolLM2's
    own, served with a tokenizer copy that has the platform's (whose hash then names nothing)."""
    described = describe_chat_template(client)
    assert described["name"].startswith("the platform's chatml-think template")
    assert set(renders(described).values()) == {True} and described["tokenizer_copy_renders_the_same"]
    tokenizer = AutoTokenizer.from_pretrained(converted_dir(local_backend.data_dir))
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    app = build_app(SimpleNamespace(tokenizer=tokenizer, model=local_backend.model, context_length=8192,
                                    model_id="smollm2", detokenize=local_backend.detokenize), served_model_name="smollm2-as-released")
    with ThreadedServer(app) as server:
        other = VllmBackend(base_url=server.url, model="", api_key="", timeout=30,
                            tokenizer_dir=str(converted_dir(local_backend.data_dir)))
        try:
            described = describe_chat_template(other)
        finally:
            other.close()
    assert described["name"] == "smollm2-as-released's own chat template, as the server renders it"
    assert renders(described) == {"renders_tools": False, "renders_reasoning": False, "renders_tool_calls": False,
                                  "renders_tool_results": True}  # a tool message's content, as any message's
    assert not described["tokenizer_copy_renders_the_same"]


@pytest.mark.parametrize(("fields", "reason"), [
    ({"add_generation_prompt": True, "continue_final_message": True}, BOTH_PROMPT_FLAGS),
    # Alone, continue_final_message meets the default add_generation_prompt in the template renderer.
    ({"continue_final_message": True}, "continue_final_message and add_generation_prompt are not compatible"),
    ({"add_generation_prompt": False, "continue_final_message": "yes"},
     "`continue_final_message` must be true or false"),
    ({"chat_template": "{{ messages }}"}, UNTRUSTED_TEMPLATE),
    ({"chat_template_kwargs": {"chat_template": "{{ messages }}"}}, UNTRUSTED_TEMPLATE),
    ({"chat_template_kwargs": {"tokenize": True}}, "Found unexpected chat template kwargs from request: {'tokenize'}"),
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "`tools[0]` must be"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x.png"}}]}]},
     "`messages[0].content`: the embedded model reads text only"),
    # OpenAI's request schema, which vLLM validates, wants the arguments as JSON text (text that is not JSON
    # becomes {}: tests/inference/test_server_conformance.py).
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]},
     "`messages[0].tool_calls`: each call must be"),
    ({"messages": []}, "Cannot apply chat template to an empty conversation"),
])
def test_chat_requests_vllm_refuses_are_refused_in_its_shape(model_server, fields, reason):
    response = tokenize_request(model_server, **({"messages": PARTIAL} | fields))
    assert response.status_code == 400
    error = response.json()["error"]
    assert reason in error["message"] and error["type"] == "BadRequestError" and error["code"] == 400


def test_a_refused_chat_request_is_a_backend_error_with_the_servers_reason(client):
    with pytest.raises(BackendError, match=r"HTTP 400: `messages\[0\]\.content`: the embedded model reads text only"):
        client.chat_prompt_ids([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}])


def test_token_strings_when_asked(model_server):
    assert tokenize_request(model_server, prompt="Hello world").json()["token_strs"] is None
    answer = tokenize_request(model_server, prompt="Hello world", return_token_strs=True).json()
    assert answer["token_strs"] == ["Hello", "Ġworld"] and len(answer["tokens"]) == 2


def test_greedy_stream_is_the_models_own(client, local_backend, prompt_ids):
    served = list(client.stream(prompt_ids, max_tokens=10, temperature=0.0, seed=None, top_k=5))
    direct = list(local_backend.stream(prompt_ids, max_tokens=10, temperature=0.0, seed=None, top_k=5))
    assert [s.token_id for s in served] == [s.token_id for s in direct]
    assert [s.finish_reason for s in served] == [s.finish_reason for s in direct]
    for got, want in zip(served, direct, strict=True):
        assert math.isclose(got.logprob, want.logprob, abs_tol=1e-5)
        assert [token for token, _ in got.top] == [token for token, _ in want.top]


def test_a_seeded_sample_is_reproduced(client, local_backend, prompt_ids):
    options = {"max_tokens": 8, "temperature": 1.0, "seed": 1234, "top_k": 3}
    served = [s.token_id for s in client.stream(prompt_ids, **options)]
    assert served == [s.token_id for s in local_backend.stream(prompt_ids, **options)]
    assert served == [s.token_id for s in client.stream(prompt_ids, **options)]


def test_prompt_logprobs_match(client, local_backend, prompt_ids):
    served = client.prompt_logprobs(prompt_ids, top_k=3)
    direct = local_backend.prompt_logprobs(prompt_ids, top_k=3)
    assert served[0] is None and len(served) == len(direct) == len(prompt_ids)
    for position, (got, want) in enumerate(zip(served[1:], direct[1:], strict=True), start=1):
        assert math.isclose(got[prompt_ids[position]], want[prompt_ids[position]], abs_tol=1e-4)
        assert sorted(got, key=got.get)[-1] == sorted(want, key=want.get)[-1]


def test_scoring_matches_the_batched_local_scores(client, local_backend, prompt_ids):
    yes, no = local_backend.tokenize(" yes")[0], local_backend.tokenize(" no")[0]
    prompts = [prompt_ids, prompt_ids[:-3]]
    served = client.next_token_logprobs(prompts, [yes, no])
    direct = local_backend.next_token_logprobs(prompts, [yes, no])
    for got, want in zip(served, direct, strict=True):
        assert got.keys() == want.keys() == {yes, no}
        assert all(math.isclose(got[t], want[t], abs_tol=1e-3) for t in got)
    pairs = [(prompt_ids, local_backend.tokenize(" Seven is prime.")), (prompt_ids, [])]
    served_rows = client.continuation_logprobs(pairs)
    direct_rows = local_backend.continuation_logprobs(pairs)
    assert served_rows[1] == [] and len(served_rows[0]) == len(pairs[0][1])
    assert all(math.isclose(a, b, abs_tol=1e-3) for a, b in zip(served_rows[0], direct_rows[0], strict=True))


def test_generate_a_batch(client, local_backend, prompt_ids):
    other = local_backend.chat_prompt_ids([{"role": "user", "content": "Say hi."}])
    served = client.generate([prompt_ids, other], max_tokens=6, temperature=0.0, seed=None)
    assert len(served) == 2
    direct = [local_backend.stream(ids, max_tokens=6, temperature=0.0, seed=None, top_k=1) for ids in (prompt_ids, other)]
    for generation, steps in zip(served, direct, strict=True):
        ids = [s.token_id for s in steps if s.token_id not in local_backend.eos_token_ids]
        assert generation.text == local_backend.detokenize(ids)


def test_structured_outputs_it_cannot_honour_are_refused_not_ignored(model_server, prompt_ids):
    # `json` and `choice` are served (tests/inference/test_structured.py); the other kinds get a 400.
    response = httpx.post(f"{model_server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                          json={"model": SERVED_NAME, "prompt": prompt_ids, "max_tokens": 4,
                                "structured_outputs": {"regex": "[0-9]+"}})
    assert response.status_code == 400
    assert "does not support `regex` structured outputs" in response.json()["error"]["message"]


def test_bad_requests_get_the_servers_reason(client, model_server):
    with pytest.raises(BackendError, match=r"HTTP 400: Token id 1000000000 is out of vocabulary"):
        list(client.stream([10**9], max_tokens=2, temperature=0.0, seed=None, top_k=1))
    response = httpx.post(f"{model_server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                          json={"model": SERVED_NAME, "prompt": [1, 2], "max_tokens": 0})
    assert response.status_code == 400
    assert response.json()["error"] == {"message": "max_tokens must be at least 1, got 0.", "type": "BadRequestError",
                                        "param": "max_tokens", "code": 400}
    headers = {"Authorization": f"Bearer {KEY}"}
    response = httpx.post(f"{model_server.url}/v1/completions", headers=headers, content=b"{not json")
    assert response.status_code == 400 and "Only 'application/json' is allowed" in response.json()["error"]["message"]
    response = httpx.post(f"{model_server.url}/v1/completions", content=b"{not json",
                          headers=headers | {"Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 400 and "not JSON" in response.json()["error"]["message"]


def test_an_unknown_model_is_a_404(model_server, prompt_ids):
    backend = VllmBackend(base_url=model_server.url, model="other-model", api_key=KEY, timeout=30, tokenizer_dir=None)
    with pytest.raises(BackendError, match=f"HTTP 404: The model `other-model` does not exist. Valid aliases: "
                                           f"{SERVED_NAME}."):
        backend.tokenize("hello")
    health = backend.health()
    assert not health.ok and "is not served" in health.detail


def test_the_key_is_required_except_for_health(model_server):
    assert httpx.get(f"{model_server.url}/health").status_code == 200
    assert httpx.get(f"{model_server.url}/v1/models").status_code == 401
    wrong = httpx.get(f"{model_server.url}/v1/models", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and KEY not in wrong.text
    backend = VllmBackend(base_url=model_server.url, model=SERVED_NAME, api_key="", timeout=30, tokenizer_dir=None)
    with pytest.raises(BackendError, match="HTTP 401"):
        backend.tokenize("hello")


def test_a_client_that_leaves_mid_stream_does_not_stop_the_server(client, model_server, prompt_ids):
    with httpx.stream("POST", f"{model_server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": SERVED_NAME, "prompt": prompt_ids, "max_tokens": 200, "stream": True,
                            "logprobs": 1, "temperature": 0}) as response:
        first = next(line for line in response.iter_lines() if line.startswith("data:"))
        assert '"choices"' in first
    steps = list(client.stream(prompt_ids, max_tokens=3, temperature=0.0, seed=None, top_k=1))
    assert len(steps) == 3 or steps[-1].finish_reason == "stop"


def test_text_offsets_count_from_the_start_of_the_completion(model_server, prompt_ids):
    headers = {"Authorization": f"Bearer {KEY}"}
    request = {"model": SERVED_NAME, "prompt": prompt_ids, "max_tokens": 6, "temperature": 0, "logprobs": 1}
    whole = httpx.post(f"{model_server.url}/v1/completions", headers=headers, json=request).json()["choices"][0]
    with httpx.stream("POST", f"{model_server.url}/v1/completions", headers=headers,
                      json=request | {"stream": True}) as response:
        chunks = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines()
                  if line.startswith("data: {")]
    streamed = [chunk["choices"][0] for chunk in chunks]
    assert [c["logprobs"]["text_offset"][0] for c in streamed] == whole["logprobs"]["text_offset"]
    offsets = whole["logprobs"]["text_offset"]
    assert offsets[0] == 0 and offsets == sorted(offsets)
    assert "".join(c["text"] for c in streamed) == whole["text"]


# A Qwen-style template that prints everything an agentic turn holds: the tools, each assistant turn's reasoning
# (`reasoning_content`, as Qwen3's and DeepSeek's templates read it), its tool calls' arguments and the tool results.
AGENTIC_TEMPLATE = """{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>
{% endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}
{{ m.content or '' }}
{%- for call in m.tool_calls or [] %}<tool_call>{{ call.function.name }} {{ call.function.arguments | tojson }}</tool_call>
{%- endfor %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def test_one_conversation_is_one_prompt_on_the_local_backend_and_through_vllms_api(local_backend):
    """Reasoning, tool calls, tool results and tools: the local backend and the vLLM client (through the embedded
    model server, which reads messages as vLLM's parser does) render the same conversation to the same ids."""
    from dataplatform.conversations.model import Conversation, Message, ToolCall
    from dataplatform.inference.local import LocalBackend

    from .model_servers import ThreadedServer

    tokenizer = AutoTokenizer.from_pretrained(converted_dir(local_backend.data_dir))
    tokenizer.chat_template = AGENTIC_TEMPLATE
    conversation = Conversation(messages=(
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Oslo and Lyon?"),
        Message(role="assistant", reasoning="Two cities: two calls.", tool_calls=(
            ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),
            ToolCall(id="call_2", name="get_weather", arguments='{"city": "Lyon", "unit": "C"}'))),
        Message(role="tool", tool_call_id="call_1", name="get_weather", content="12 C"),
        Message(role="tool", tool_call_id="call_2", name="get_weather", content="19 C"),
        Message(role="assistant", content="Oslo 12, Lyon 19.", reasoning="Report both."),
        Message(role="user", content="Warmer?"),
    ), tools=tuple(TOOLS))
    messages, tools = conversation.for_training(), [dict(tool) for tool in TOOLS]
    local = LocalBackend.chat_prompt_ids(SimpleNamespace(tokenizer=tokenizer), messages, tools=tools)
    rendered = tokenizer.decode(local)
    assert "<think>Two cities: two calls.</think>" in rendered and "<think>Report both.</think>" in rendered
    assert '<tool_call>get_weather {"city": "Lyon", "unit": "C"}</tool_call>' in rendered
    assert "19 C" in rendered and "lookup_capital" in rendered
    served = SimpleNamespace(tokenizer=tokenizer, model=local_backend.model, context_length=8192)
    with ThreadedServer(build_app(served, served_model_name=SERVED_NAME)) as server:
        client = VllmBackend(base_url=server.url, model=SERVED_NAME, api_key="", timeout=30, tokenizer_dir=None)
        try:
            assert client.chat_prompt_ids(messages, tools=tools) == local
            left_open = [*messages[:-1], {"role": "assistant", "content": "Lyon", "reasoning_content": "Compare."}]
            assert (client.chat_prompt_ids(left_open, tools=tools, continue_final_message=True)
                    == LocalBackend.chat_prompt_ids(SimpleNamespace(tokenizer=tokenizer), left_open, tools=tools,
                                                    continue_final_message=True))
        finally:
            client.close()
