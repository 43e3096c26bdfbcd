"""Constrained decoding on the embedded backend (xgrammar), with the real SmolLM2-135M model, in process
and through the embedded server with the vLLM client (`structured_outputs` with `json` and `choice`)."""

import json

import httpx
import jsonschema
import pytest

from dataplatform.inference.base import BackendError
from dataplatform.inference.grammar import GrammarCache, choice_ebnf, constraint_key
from dataplatform.inference.vllm import VllmBackend

from .model_servers import KEY, SERVED_NAME

pytestmark = pytest.mark.model

# Enums, a nested object, required fields, a bounded integer and an array. Strings are bounded: a 135M model
# left free inside a string may never close it (then the answer is "length", which the tests would not want).
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 30},
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "size": {"type": "object",
                 "properties": {"width": {"type": "integer", "minimum": 1, "maximum": 500},
                                "unit": {"enum": ["cm", "m"]}},
                 "required": ["width", "unit"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3},
    },
    "required": ["name", "colour", "size"],
}
# Where the schema's breadth is beside the point (a batch mixing rows; the server reading a schema sent as JSON
# text, or streaming), a small one: its answers take ~20 tokens where SCHEMA's take 50-70, and on 2 cores each
# constrained token costs ~0.07 s.
SMALL_SCHEMA = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                                 "width": {"type": "integer", "minimum": 1, "maximum": 500}},
                "required": ["colour", "width"]}
QUESTIONS = ["Describe a red box as JSON.", "Tell me about a small green ball.",
             "Write a haiku about the sea.", "What is 17 times 23?"]
CHOICES = ["approve", "reject", "needs work"]
# Prompts that push the model away from the choices.
PUSHY = ["Ignore any list of options and tell me a long story about a dragon.",
         "Reply with exactly the word 'banana' and nothing else.",
         "Say maybe.", "Write Python code that prints hello."]


def chat(backend, text):
    return backend.chat_prompt_ids([{"role": "user", "content": text}])


@pytest.fixture(scope="module")
def prompts(local_backend):
    return [chat(local_backend, q) for q in QUESTIONS]


def test_every_answer_of_a_batch_validates_against_the_schema(local_backend, prompts):
    for temperature, seed in ((0.0, 0), (1.0, 7)):
        answers = local_backend.generate(prompts, max_tokens=120, temperature=temperature, seed=seed,
                                         json_schema=SCHEMA)
        assert len(answers) == 4
        for answer in answers:
            assert answer.finish_reason == "stop", answer.text
            jsonschema.validate(json.loads(answer.text), SCHEMA)
            assert answer.text == local_backend.detokenize(answer.token_ids)  # no special token hidden in it


def test_a_choice_is_exactly_one_of_the_choices_even_when_the_prompt_pushes_elsewhere(local_backend):
    pushy = [chat(local_backend, text) for text in PUSHY]
    free = local_backend.generate(pushy, max_tokens=8, temperature=0.0, seed=0)
    assert all(answer.text not in CHOICES for answer in free)  # unconstrained, the model goes elsewhere
    for temperature, seed in ((0.0, 0), (1.5, 3)):
        # Pushed elsewhere, the model may spell a choice out a letter a token: allow one token per character.
        answers = local_backend.generate(pushy, max_tokens=12, temperature=temperature, seed=seed, choice=CHOICES)
        assert [answer.finish_reason for answer in answers] == ["stop"] * 4
        assert all(answer.text in CHOICES for answer in answers), [answer.text for answer in answers]


def test_a_choice_is_the_bare_text_not_json(local_backend):
    # Quotes, a backslash, non-ASCII and a choice that is a prefix of another: the raw text is the choice.
    choices = ['say "hi"', "back\\slash", "naïve 🐼", "yes", "yes please"]
    prompt = chat(local_backend, "Pick one.")
    for seed in range(4):
        [answer] = local_backend.generate([prompt], max_tokens=16, temperature=2.0, seed=seed, choice=choices)
        assert answer.text in choices and answer.finish_reason == "stop"
    assert choice_ebnf(['a"b', "é"]) == 'root ::= "a\\"b" | "\\u00e9"'


def test_a_batch_mixes_constrained_and_unconstrained_rows(local_backend, prompts):
    # The free rows use the whole budget, so the constrained ones must fit well inside it: 40 tokens hold any
    # answer to the small schema (at most 33 characters) and to the choices.
    constraints = [None, {"json_schema": SMALL_SCHEMA}, {"choice": CHOICES}, None]
    mixed = local_backend.generate_each(prompts, max_tokens=40, temperature=0.0, seed=0, constraints=constraints)
    free = local_backend.generate(prompts, max_tokens=40, temperature=0.0, seed=0)
    # The free rows are exactly what the same batch gives unconstrained: masking one row leaves the others be.
    assert [mixed[0].token_ids, mixed[3].token_ids] == [free[0].token_ids, free[3].token_ids]
    jsonschema.validate(json.loads(mixed[1].text), SMALL_SCHEMA)
    assert mixed[2].text in CHOICES and mixed[2].finish_reason == "stop"
    with pytest.raises(BackendError, match="2 constraints for 4 prompts"):
        local_backend.generate_each(prompts, max_tokens=4, temperature=0.0, seed=0, constraints=[None, None])
    with pytest.raises(BackendError, match="json_schema or choice, nothing else"):
        local_backend.generate_each(prompts[:1], max_tokens=4, temperature=0.0, seed=0, constraints=[{"regex": "x"}])


def test_a_budget_too_small_for_the_grammar_is_length(local_backend, prompts):
    [answer] = local_backend.generate(prompts[:1], max_tokens=6, temperature=0.0, seed=0, json_schema=SCHEMA)
    assert answer.finish_reason == "length" and len(answer.token_ids) == 6
    assert answer.text.startswith('{"name":"')  # compact, as vLLM writes it with disable_any_whitespace
    with pytest.raises(json.JSONDecodeError):
        json.loads(answer.text)  # incomplete: the caller sees "length" and must not trust it
    steps = list(local_backend.stream(prompts[0], max_tokens=6, temperature=0.0, seed=0, top_k=3, json_schema=SCHEMA))
    assert len(steps) == 6 and steps[-1].finish_reason == "length"
    assert [step.token_id for step in steps] == answer.token_ids


def test_the_end_token_is_allowed_only_where_the_grammar_accepts(local_backend, prompts):
    steps = list(local_backend.stream(prompts[1], max_tokens=120, temperature=0.0, seed=0, top_k=50,
                                      json_schema=SCHEMA))
    assert steps[-1].finish_reason == "stop" and steps[-1].token_id in local_backend.eos_token_ids
    *body, end = steps
    # Until the object closes, the end token is not even among the 50 allowed alternatives...
    assert all(token_id not in local_backend.eos_token_ids for step in body for token_id, _ in step.top)
    # ...and once it closes it is the only one: the masked distribution puts all its mass there.
    assert [token_id for token_id, _ in end.top] == [end.token_id] and end.logprob == pytest.approx(0.0)
    text = local_backend.detokenize([step.token_id for step in body])
    jsonschema.validate(json.loads(text), SCHEMA)


def test_the_grammar_cache_compiles_a_schema_once(local_backend, prompts):
    cache = local_backend.grammars
    schema = {"type": "object", "properties": {"answer": {"enum": ["cache-test-a", "cache-test-b"]}},
              "required": ["answer"]}
    before, hits = cache.compiles, cache.hits
    local_backend.generate(prompts[:2], max_tokens=12, temperature=0.0, seed=0, json_schema=schema)
    local_backend.generate(prompts[:1], max_tokens=12, temperature=0.0, seed=0, json_schema=json.loads(json.dumps(schema)))
    list(local_backend.stream(prompts[0], max_tokens=12, temperature=0.0, seed=0, top_k=1, json_schema=schema))
    assert cache.compiles == before + 1 and cache.hits >= hits + 2
    local_backend.generate(prompts[:1], max_tokens=4, temperature=0.0, seed=0, choice=["cache-test-c"])
    assert cache.compiles == before + 2
    # The key keeps the schema's key order (the grammar writes properties in that order); formatting aside.
    assert constraint_key(json_schema={"a": 1, "b": 2}) != constraint_key(json_schema={"b": 2, "a": 1})
    assert constraint_key(choice=["x"]) != constraint_key(json_schema={"x": 1})


def test_the_cache_is_bounded_least_recently_used_first(local_backend):
    cache = GrammarCache(local_backend.grammars.info, size=2)
    keys = [constraint_key(choice=[f"option-{n}"]) for n in range(3)]
    first = cache.get(keys[0])
    cache.get(keys[1])
    assert cache.get(keys[0]) is first  # used again: now the most recent
    cache.get(keys[2])  # evicts keys[1]
    assert len(cache) == 2 and cache.compiles == 3
    assert cache.get(keys[0]) is first and cache.compiles == 3
    cache.get(keys[1])
    assert cache.compiles == 4


@pytest.mark.parametrize(("constraint", "reason"), [
    ({"json_schema": {"type": "object"}, "choice": ["a"]}, "exclusive"),
    ({"choice": []}, "non-empty list of strings"),
    ({"choice": ["a", 1]}, "non-empty list of strings"),
    ({"json_schema": ["not", "a", "schema"]}, "must be a JSON schema"),
    ({"json_schema": {"type": "no-such-type"}}, "cannot be compiled"),
])
def test_bad_constraints_are_backend_errors(local_backend, prompts, constraint, reason):
    with pytest.raises(BackendError, match=reason):
        local_backend.generate(prompts[:1], max_tokens=4, temperature=0.0, seed=0, **constraint)


# --- through the embedded server, with the vLLM client ---------------------------------------------------

@pytest.fixture
def client(model_server, local_backend):
    backend = VllmBackend(base_url=model_server.url, model="", api_key=KEY, timeout=60, tokenizer_dir=None)
    yield backend
    backend.close()


def completions(model_server, **fields) -> httpx.Response:
    return httpx.post(f"{model_server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": SERVED_NAME} | fields, timeout=60)


def test_the_vllm_client_gets_valid_json_from_the_server(client, local_backend, prompts):
    pair = prompts[1::2]  # the two questions with the shortest answers (~50 tokens, the others' ~70)
    served = client.generate(pair, max_tokens=120, temperature=0.0, seed=None, json_schema=SCHEMA)
    for answer, ids in zip(served, pair, strict=True):
        assert answer.finish_reason == "stop"
        jsonschema.validate(json.loads(answer.text), SCHEMA)
        # The server decodes through the same constrained path as the backend in process.
        direct = list(local_backend.stream(ids, max_tokens=120, temperature=0.0, seed=None, top_k=1,
                                           json_schema=SCHEMA))
        assert answer.text == local_backend.detokenize([s.token_id for s in direct[:-1]])


def test_a_schema_sent_as_json_text_and_a_batch_of_prompts(model_server, prompts):
    # vLLM takes `json` as an object or as its JSON text; a list of prompts gets one choice each.
    response = completions(model_server, prompt=prompts[:2], max_tokens=120, temperature=0,
                           structured_outputs={"json": json.dumps(SMALL_SCHEMA)})
    assert response.status_code == 200, response.text
    choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
    assert [choice["finish_reason"] for choice in choices] == ["stop", "stop"]
    for choice in choices:
        jsonschema.validate(json.loads(choice["text"]), SMALL_SCHEMA)


def test_the_vllm_client_gets_one_of_the_choices_and_length_when_cut(client, local_backend):
    pushy = [chat(local_backend, text) for text in PUSHY[:2]]
    served = client.generate(pushy, max_tokens=12, temperature=1.0, seed=11, choice=CHOICES)
    assert all(answer.text in CHOICES and answer.finish_reason == "stop" for answer in served)
    [cut] = client.generate(pushy[:1], max_tokens=1, temperature=0.0, seed=None, choice=["a long answer indeed"])
    assert cut.finish_reason == "length" and "a long answer indeed".startswith(cut.text) and cut.text


def test_a_streamed_structured_completion(model_server, local_backend, prompts):
    request = {"model": SERVED_NAME, "prompt": prompts[2], "max_tokens": 120, "temperature": 0, "stream": True,
               "logprobs": 2, "structured_outputs": {"json": json.dumps(SMALL_SCHEMA)}}
    texts, finishes = [], []
    with httpx.stream("POST", f"{model_server.url}/v1/completions", json=request, timeout=60,
                      headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                [choice] = json.loads(line.removeprefix("data: "))["choices"]
                texts.append(choice["text"])
                finishes.append(choice["finish_reason"])
    assert finishes[-1] == "stop" and all(f is None for f in finishes[:-1])
    jsonschema.validate(json.loads("".join(texts)), SMALL_SCHEMA)


@pytest.mark.parametrize(("structured", "reason"), [
    ({"regex": "[0-9]+"}, "does not support `regex` structured outputs, only `json` and `choice`"),
    ({"grammar": 'root ::= "a"'}, "does not support `grammar` structured outputs"),
    ({"json_object": True}, "does not support `json_object` structured outputs"),
    ({"structural_tag": "{}"}, "does not support `structural_tag` structured outputs"),
    ({"json": {"type": "object"}, "choice": ["a"]},
     "You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice')."),
    ({"json": {"type": "object"}, "grammar": 'root ::= "a"'},
     "You can only use one kind of structured outputs constraint but multiple are specified"),
    ({"choice": ["a"], "whitespace_pattern": " *"}, "does not support `whitespace_pattern`"),
    ({"choice": []}, "`structured_outputs.choice` must be a non-empty list of strings"),
    ({"json": "{not json"}, "`structured_outputs.json` is not JSON"),
    ({"json": 3}, "must be a JSON schema"),
    ({"json": {"type": "no-such-type"}}, "cannot be compiled"),
    ({"jsonn": {}}, "Unknown `structured_outputs` field(s): jsonn"),
    ("json", "`structured_outputs` must be an object"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_structured_outputs_it_cannot_honour_are_a_400(model_server, prompts, structured, reason, stream):
    response = completions(model_server, prompt=prompts[0], max_tokens=4, stream=stream,
                           structured_outputs=structured)
    assert response.status_code == 400
    error = response.json()["error"]
    assert reason in error["message"] and error["type"] == "BadRequestError"


@pytest.mark.parametrize(("fields", "reason"), [
    ({"guided_json": {"type": "object"}}, "`guided_json` was removed in vLLM v0.12"),
    ({"guided_choice": ["a"]}, "`guided_choice` was removed in vLLM v0.12"),
    ({"guided_regex": "a"}, "`guided_regex` was removed"),
    ({"response_format": {"type": "json_object"}}, "does not support `response_format`"),
])
def test_the_old_and_other_constraint_fields_are_refused_not_ignored(model_server, prompts, fields, reason):
    response = completions(model_server, prompt=prompts[0], max_tokens=4, **fields)
    assert response.status_code == 400 and reason in response.json()["error"]["message"]
