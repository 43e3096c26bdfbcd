"""Every request the vLLM client sends, read by the pinned vLLM release's own code (requirements/vllm.txt).

The client talks to the embedded model server (the module's `model_server`) and every body is recorded on its way
out. vLLM's request models then read each as vLLM's server does: a /v1/completions body becomes the SamplingParams
vLLM would draw with, under a served model whose generation_config.json sets every sampling field, so a field the
client leaves out shows up as the model's value rather than the platform's; a /tokenize body goes through vLLM's
chat parser, which reads past reasoning from `reasoning` alone. To check a newer vLLM, change the pin and run this
module (docs/operations.md, section 5).
"""

import json
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from pydantic import TypeAdapter

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.token_masks import PROBE_MESSAGES, PROBE_TOOLS, describe_chat_template
from dataplatform.inference.vllm import VllmBackend

from ..lazy_module import LazyModule
from .model_servers import KEY, SERVED_NAME

# vLLM's own code, imported when a test first reads it.
structured_outputs = LazyModule("vllm.config.structured_outputs")
completion_protocol = LazyModule("vllm.entrypoints.openai.completion.protocol")
tokenize_protocol = LazyModule("vllm.entrypoints.serve.tokenize.protocol")
chat_message = LazyModule("vllm.renderers.chat_utils.chat_message")

ROOT = Path(__file__).resolve().parents[2]


def neutral() -> dict:
    """The fields vLLM fills from the served model's generation_config.json when a request leaves them out (its
    `to_sampling_params` reads them from a request's own copy), each at vLLM's neutral value."""
    return completion_protocol.CompletionRequest.model_construct()._DEFAULT_SAMPLING_PARAMS

# What `ModelConfig.get_diff_sampling_param` hands the server for a typical instruct model's generation_config.json
# (plus the penalties): every field unlike the neutral one, and unlike any temperature the calls below ask for.
GENERATION_CONFIG = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.05,
                     "presence_penalty": 0.5, "frequency_penalty": 0.3, "skip_special_tokens": False}
# The parts of vLLM's ModelConfig its chat parser reads for text-only messages.
TEXT_ONLY_MODEL = SimpleNamespace(enable_prompt_embeds=False, multimodal_config=None, is_multimodal_model=False)

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
TOOLS = ({"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},)
CONVERSATION = Conversation(messages=(
    Message(role="system", content="Be brief."),
    Message(role="user", content="Weather in Oslo?"),
    Message(role="assistant", reasoning="The tool knows the weather.",
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),)),
    Message(role="tool", tool_call_id="call_1", name="get_weather", content="12 C"),
    Message(role="assistant", content="Twelve degrees.", reasoning="Say it plainly."),
    Message(role="user", content="And tomorrow?"),
), tools=TOOLS)

# Each completion call: what it runs, its temperature and the seeds it sends (one per request).
COMPLETIONS = {
    "stream": (lambda c, ids: list(c.stream(ids, max_tokens=2, temperature=0.7, seed=3, top_k=5)), 0.7, {3}),
    "rollouts": (lambda c, ids: list(c.rollouts([ids, ids[:-1]], max_tokens=2, temperature=0.9, seeds=[11, None],
                                                top_k=3)), 0.9, {11, None}),
    "generate": (lambda c, ids: c.generate([ids], max_tokens=2, temperature=0.8, seed=5), 0.8, {5}),
    "generate_json": (lambda c, ids: c.generate([ids], max_tokens=8, temperature=0.0, seed=None, json_schema=SCHEMA),
                      0.0, {None}),
    "generate_choice": (lambda c, ids: c.generate([ids], max_tokens=4, temperature=0.0, seed=7, choice=["yes", "no"]),
                        0.0, {7}),
    "prompt_logprobs": (lambda c, ids: c.prompt_logprobs(ids, top_k=4), 0, {None}),
    "next_token_logprobs": (lambda c, ids: c.next_token_logprobs([ids], [ids[-1], ids[1]]), 0, {None}),
    "continuation_logprobs": (lambda c, ids: c.continuation_logprobs([(ids[:-2], ids[-2:])]), 0, {None}),
}
OTHERS = {
    "chat": lambda c, ids: (c.chat_prompt_ids(CONVERSATION.for_training(), tools=[dict(t) for t in TOOLS]),
                            c.chat_prompt_ids([*CONVERSATION.for_training(), {"role": "assistant", "content": "It"}],
                                              tools=[dict(t) for t in TOOLS], continue_final_message=True)),
    "probe": lambda c, ids: describe_chat_template(c),
    "tokenize": lambda c, ids: c.tokenize("Hello world"),
    "detokenize": lambda c, ids: c.detokenize(ids),
    "models": lambda c, ids: c.served_models(),
    "health": lambda c, ids: c.health(),
}


@pytest.fixture(scope="module")
def sent(model_server, local_backend) -> dict[str, list[tuple[str, str, bytes]]]:
    """(method, path, body) of every request each call above sent, recorded as httpx sends it."""
    client = VllmBackend(base_url=model_server.url, model=SERVED_NAME, api_key=KEY, timeout=60, tokenizer_dir=None)
    ids = local_backend.tokenize("Is the sky blue? Yes or no:")  # short: the bodies matter here, not the answers
    assert client.context_length  # asked once, before the recording: the calls below send their own requests only
    requests: dict[str, list[tuple[str, str, bytes]]] = {}
    calls = {**{label: call[0] for label, call in COMPLETIONS.items()}, **OTHERS}
    try:
        for label, run in calls.items():
            requests[label] = []
            client._client.event_hooks["request"] = [
                lambda request, into=requests[label]: into.append((request.method, request.url.path, request.content))]
            run(client, ids)
    finally:
        client.close()
    return requests


def bodies(sent, label: str, path: str) -> list[dict]:
    """The JSON bodies `label` sent, all of them POSTs to `path` (and at least one)."""
    requests = sent[label]
    assert requests and all(method == "POST" and at == path for method, at, _ in requests), requests
    return [json.loads(body) for _, _, body in requests]


def drawn_with(body: dict):
    """The SamplingParams vLLM makes of `body` for a model whose generation_config.json is GENERATION_CONFIG."""
    request = completion_protocol.CompletionRequest.model_validate(body)
    return request.to_sampling_params(request.max_tokens, default_sampling_params=GENERATION_CONFIG)


def test_the_generation_config_differs_from_neutral_in_every_field_vllm_fills_from_it():
    # Else a field the client forgot could go unnoticed; a vLLM that fills one more field fails here first.
    assert neutral().keys() <= GENERATION_CONFIG.keys()
    assert all(GENERATION_CONFIG[name] != value for name, value in neutral().items())


@pytest.mark.model
@pytest.mark.parametrize("label", COMPLETIONS)
def test_every_completion_is_drawn_with_the_platforms_sampling_whatever_the_models_generation_config(sent, label):
    _, temperature, seeds = COMPLETIONS[label]
    drawn = []
    for body in bodies(sent, label, "/v1/completions"):
        # vLLM ignores a field it does not know (it only logs it): a misspelt one would be dropped silently.
        assert body.keys() <= completion_protocol.CompletionRequest.model_fields.keys()
        params = drawn_with(body)
        assert {name: getattr(params, name) for name in neutral()} == neutral() | {"temperature": temperature}
        drawn.append(params)
    assert {params.seed for params in drawn} == seeds


@pytest.mark.model
def test_streams_and_rollouts_ask_for_their_top_k_and_keep_special_tokens(sent):
    [stream] = bodies(sent, "stream", "/v1/completions")
    assert drawn_with(stream).logprobs == 5 and stream["stream"] and not drawn_with(stream).skip_special_tokens
    rollouts = [drawn_with(body) for body in bodies(sent, "rollouts", "/v1/completions")]
    assert len(rollouts) == 2 and all(params.logprobs == 3 and params.prompt_logprobs is None for params in rollouts)


@pytest.mark.model
def test_generate_reads_text_without_special_tokens_and_asks_vllm_for_compact_json(sent):
    [plain] = [drawn_with(body) for body in bodies(sent, "generate", "/v1/completions")]
    assert plain.skip_special_tokens and plain.structured_outputs is None and plain.logprobs is None
    [json_body] = bodies(sent, "generate_json", "/v1/completions")
    constraint = drawn_with(json_body).structured_outputs
    assert constraint.json == SCHEMA and constraint.disable_any_whitespace
    [choice_body] = bodies(sent, "generate_choice", "/v1/completions")
    assert drawn_with(choice_body).structured_outputs.choice == ["yes", "no"]


@pytest.mark.model
def test_prompt_logprobs_asks_for_its_top_k_at_every_prompt_position(sent):
    [body] = bodies(sent, "prompt_logprobs", "/v1/completions")
    params = drawn_with(body)
    assert params.prompt_logprobs == 4 and params.max_tokens == 1 and not body.get("stream")


@pytest.mark.model
def test_past_reasoning_and_tool_calls_reach_vllms_chat_template_as_they_reach_the_local_one(sent):
    """The local backend hands transformers the training shape; vLLM's parser must hand its template the same."""
    plain, left_open = bodies(sent, "chat", "/tokenize")
    for body in (plain, left_open):
        assert body.keys() <= tokenize_protocol.TokenizeChatRequest.model_fields.keys()
        request = tokenize_protocol.TokenizeChatRequest.model_validate(body)
        seen, _, _ = chat_message.parse_chat_messages(request.messages, TEXT_ONLY_MODEL, "string")
        expected = [*CONVERSATION.for_training(), *([{"role": "assistant", "content": "It"}] if body is left_open else [])]
        assert [_template_view(message) for message in seen] == [_template_view(message) for message in expected]
        # vLLM hands the reasoning to the template under both names.
        assert [m.get("reasoning") for m in seen] == [m.get("reasoning_content") for m in expected]
        assert [tool.function.name for tool in request.tools] == ["get_weather"]
    assert (plain["add_generation_prompt"], plain["continue_final_message"]) == (True, False)
    assert (left_open["add_generation_prompt"], left_open["continue_final_message"]) == (False, True)


@pytest.mark.model
def test_the_chat_template_probe_reaches_vllms_chat_template_whole(sent):
    """The probe that tells the manifest what a served model's template renders is a request vLLM reads, and its
    chat parser hands the template the probe's tools, reasoning, tool call and result."""
    [body] = [json.loads(body) for _, path, body in sent["probe"] if path == "/tokenize"]
    request = tokenize_protocol.TokenizeChatRequest.model_validate(body)
    seen, _, _ = chat_message.parse_chat_messages(request.messages, TEXT_ONLY_MODEL, "string")
    assert [_template_view(message) for message in seen] == [_template_view(message) for message in PROBE_MESSAGES]
    assert [tool.model_dump(exclude_none=True) for tool in request.tools] == PROBE_TOOLS


def _template_view(message: dict) -> tuple:
    """What a chat template reads of a message."""
    calls = [(call["id"], call["function"]["name"], call["function"]["arguments"])
             for call in message.get("tool_calls") or []]
    return (message["role"], message.get("content") or "", message.get("reasoning_content"), calls,
            message.get("tool_call_id"), message.get("name"))


@pytest.mark.model
def test_tokenize_detokenize_models_and_health_are_requests_vllm_reads(sent):
    [text] = bodies(sent, "tokenize", "/tokenize")
    assert text.keys() <= tokenize_protocol.TokenizeCompletionRequest.model_fields.keys()
    assert tokenize_protocol.TokenizeCompletionRequest.model_validate(text).add_special_tokens is False
    [ids] = bodies(sent, "detokenize", "/detokenize")
    assert ids.keys() <= tokenize_protocol.DetokenizeRequest.model_fields.keys() and tokenize_protocol.DetokenizeRequest.model_validate(ids).tokens
    assert sent["models"] == [("GET", "/v1/models", b"")]
    assert sent["health"] == [("GET", "/health", b""), ("GET", "/v1/models", b"")]


def test_compose_starts_the_tested_vllm_adding_no_sampling_defaults_and_compact_json():
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))["services"]["vllm"]
    command = service["command"]
    flags = dict(zip(command[::2], command[1::2], strict=True))
    assert service["image"] == f"vllm/vllm-openai:v{version('vllm')}"  # the release these tests read
    assert flags["--generation-config"] == "vllm"
    # Parsed as vLLM's command line parses the flag's JSON.
    structured = TypeAdapter(structured_outputs.StructuredOutputsConfig).validate_json(flags["--structured-outputs-config"])
    assert structured.backend == "xgrammar" and structured.disable_any_whitespace


@pytest.mark.model
@pytest.mark.parametrize("kind, spec", [
    ("json", SCHEMA),
    ("json", {"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {
        "type": "integer"}}, "extra": {"type": "object"}}, "required": ["name", "tags"]}),
    ("choice", ["yes", "no"]),
    ("choice", ['say "hi"', "back\\slash", "line\nbreak", "tab\there", "naïve", "🐼"]),
])
def test_the_embedded_models_grammars_are_the_ones_vllms_xgrammar_backend_compiles(local_backend, kind, spec):
    """The same JSON and the same choices under both backends: vLLM's own xgrammar backend, configured as
    docker-compose.yml starts it (`disable_any_whitespace`), compiles each constraint to the grammar the embedded
    model decodes under."""
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions
    from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

    from dataplatform.inference.grammar import GrammarCache, constraint_key, tokenizer_info

    tokenizer = local_backend.tokenizer
    served = SimpleNamespace(structured_outputs_config=SimpleNamespace(disable_any_whitespace=True),
                             model_config=None, speculative_config=None)
    vllm_backend = XgrammarBackend(vllm_config=served, tokenizer=tokenizer, vocab_size=len(tokenizer))
    option = StructuredOutputOptions.JSON if kind == "json" else StructuredOutputOptions.CHOICE
    theirs = vllm_backend.compile_grammar(option, json.dumps(spec)).ctx.grammar
    info = tokenizer_info(tokenizer, vocab_size=len(tokenizer), stop_token_ids=[tokenizer.eos_token_id])
    key = constraint_key(json_schema=spec) if kind == "json" else constraint_key(choice=spec)
    ours = GrammarCache(info).get(key).grammar
    assert str(ours) == str(theirs)
