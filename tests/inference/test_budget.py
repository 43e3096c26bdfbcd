"""Every model call has a token budget (dataplatform/inference/budget.py): a prompt whose ids plus max_tokens are
over the model's context is refused with PromptTooLong (400) before any forward pass; in a batch of rollouts it
fails that one prompt, not the batch. The local model's context is lowered to 64 tokens by the setting
MODEL_MAX_CONTEXT_TOKENS, so every case is a few ids."""

import httpx
import pytest

from dataplatform.errors import Refused, Transient
from dataplatform.inference import BackendError, PromptTooLong
from dataplatform.inference.budget import check_prompt, check_prompts, context_limit, over_context, refused_prompts
from dataplatform.inference.vllm import VllmBackend
from dataplatform.inference.vllm_wire import prompt_too_long

from .model_servers import KEY, SERVED_NAME

CONTEXT = 64


@pytest.fixture
def short_context(settings):
    settings.MODEL_MAX_CONTEXT_TOKENS = CONTEXT


class NoForwardPass:
    """Stands for the local backend's model lock, which every forward pass takes: taking it fails the test."""

    def __enter__(self):
        raise AssertionError("a forward pass ran")

    def __exit__(self, *exc):
        return False


@pytest.fixture
def no_forward_pass(local_backend, monkeypatch):
    monkeypatch.setattr(local_backend, "_lock", NoForwardPass())


# --- the rule, without a model ---------------------------------------------------------------------------

def test_a_prompt_and_its_answer_must_fit_the_context():
    assert over_context(60, context=64, max_tokens=4) is None
    refusal = over_context(60, context=64, max_tokens=5)
    assert isinstance(refusal, PromptTooLong) and refusal.tokens == 60 and refusal.limit == 59
    assert str(refusal) == ("The prompt is 60 tokens; with 5 for the response that makes 65, over the model's "
                            "context of 64 tokens.")
    # Scoring asks for no answer, but counts one (vLLM generates a token for it).
    assert over_context(64, context=64, max_tokens=0) is not None and over_context(63, context=64) is None
    assert over_context(10**9, context=None, max_tokens=10**9) is None  # an unknown context: the server checks


def test_prompt_too_long_is_a_400_never_retried_and_names_its_cause():
    refusal = over_context(100, context=64).because("The largest part is the tool result: 90 tokens.", field="text")
    assert refusal.status == 400 and refusal.retry_after is None
    assert isinstance(refusal, Refused) and isinstance(refusal, BackendError) and not isinstance(refusal, Transient)
    assert refusal.body() == {"text": [refusal.detail]} and refusal.detail.endswith("tool result: 90 tokens.")
    assert not refusal.detail.startswith("The model backend failed")


def test_the_setting_lowers_the_context_and_never_raises_it(settings):
    settings.MODEL_MAX_CONTEXT_TOKENS = 0
    assert context_limit(8192) == 8192 and context_limit(None) is None
    settings.MODEL_MAX_CONTEXT_TOKENS = 100
    assert context_limit(8192) == 100 and context_limit(50) == 50 and context_limit(None) == 100


def test_a_batch_names_the_prompt_over_and_rollouts_refuse_it_alone():
    with pytest.raises(PromptTooLong, match=r"\(prompt 2 of 3\)"):
        check_prompts([3, 9, 2], context=8)
    check_prompt(7, context=8)
    assert list(refused_prompts([3, 9, 2, 8], context=8, max_tokens=1)) == [1, 3]


def test_the_client_reads_vllms_refusals_in_each_wording():
    """vLLM's words over its releases, as its source writes them: 0.34 (vllm/renderers/params.py), 0.19's two
    (engine/serving.py) and the chat wording of older ones."""
    for message, tokens in [
        ("This model's maximum context length is 64 tokens. However, your prompt contains 70 input tokens, which "
         "exceeds this limit even without any output tokens. Please reduce the length of the input prompt.", 70),
        ("This model's maximum context length is 64 tokens. However, your prompt contains at least 65 input "
         "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input "
         "prompt.", 65),
        ("This model's maximum context length is 64 tokens. However, your request has 70 input tokens. Please "
         "reduce the length of the input messages.", 70),
        ("This model's maximum context length is 64 tokens. However, you requested 8 output tokens and your prompt "
         "contains 60 input tokens, for a total of 68 tokens. Please reduce the length of the input prompt or the "
         "number of requested output tokens.", 60),
        ("This model's maximum context length is 64 tokens. However, you requested 68 tokens (60 in the messages, "
         "8 in the completion). Please reduce the length of the messages or completion.", 60),
    ]:
        refusal = prompt_too_long(message, "vLLM POST x/v1/completions")
        assert refusal.tokens == tokens and refusal.limit == 64 and message in str(refusal)
    # 0.34 cuts max_tokens to the room a prompt leaves, and refuses a prompt that leaves none in these words.
    no_room = prompt_too_long("max_tokens must be at least 1, got 0.", "vLLM")
    assert isinstance(no_room, PromptTooLong) and no_room.tokens is None
    assert prompt_too_long("max_tokens must be at least 1, got -3.", "vLLM") is None  # the caller's own mistake
    assert prompt_too_long("logprobs must be at most 20", "vLLM") is None


# --- the local model ----------------------------------------------------------------------------------------

@pytest.mark.model
def test_the_local_context_is_the_models_own_unless_lowered(local_backend, settings):
    settings.MODEL_MAX_CONTEXT_TOKENS = 0
    assert local_backend.context_length == local_backend.model.config.max_position_embeddings == 8192
    settings.MODEL_MAX_CONTEXT_TOKENS = CONTEXT
    assert local_backend.context_length == CONTEXT


@pytest.mark.model
def test_every_local_model_call_refuses_a_prompt_over_the_context_before_a_forward_pass(
        local_backend, short_context, no_forward_pass):
    long, short = [1] * 60, [1] * 10
    with pytest.raises(PromptTooLong, match="60 tokens; with 8 for the response that makes 68, over the model's "
                                            "context of 64"):
        next(local_backend.stream(long, max_tokens=8, temperature=0, seed=0, top_k=1))
    with pytest.raises(PromptTooLong, match="64 tokens"):
        local_backend.prompt_logprobs([1] * CONTEXT, top_k=1)
    with pytest.raises(PromptTooLong, match=r"\(prompt 2 of 2\)"):
        local_backend.next_token_logprobs([short, [1] * 63], [5])
    with pytest.raises(PromptTooLong, match=r"\(prompt 1 of 1\)"):
        local_backend.continuation_logprobs([(long, [1] * 4)])
    with pytest.raises(PromptTooLong, match=r"\(prompt 1 of 2\)"):
        local_backend.generate([long, short], max_tokens=8, temperature=0, seed=0)


@pytest.mark.model
def test_a_local_rollout_batch_refuses_the_long_prompt_and_answers_the_others(local_backend, short_context):
    prompts = [[1] * 70, local_backend.chat_prompt_ids([{"role": "user", "content": "Hi"}])]
    results = dict(local_backend.rollouts(prompts, max_tokens=2, temperature=0, seeds=[0, 0], top_k=1))
    assert isinstance(results[0], PromptTooLong) and results[0].tokens == 70
    assert 1 <= len(results[1]) <= 2 and results[1][0].token_id >= 0


# --- the vLLM client against the embedded model server ----------------------------------------------------

@pytest.fixture
def client(model_server):
    backend = VllmBackend(base_url=model_server.url, model=SERVED_NAME, api_key=KEY, timeout=30, tokenizer_dir=None)
    yield backend
    backend.close()


def completions(model_server, **fields) -> httpx.Response:
    return httpx.post(f"{model_server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": SERVED_NAME, "max_tokens": 8, "temperature": 0} | fields, timeout=30)


@pytest.mark.model
def test_the_model_server_refuses_like_vllm(model_server, short_context, no_forward_pass):
    models = httpx.get(f"{model_server.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert models["data"][0]["max_model_len"] == CONTEXT
    # vLLM 0.34's refusals (vllm/renderers/params.py, then SamplingParams): a prompt over the context, a max_tokens
    # over it, and a prompt that fills it (it leaves max_tokens 0).
    answer = completions(model_server, prompt=[1] * 70)
    assert answer.status_code == 400
    assert answer.json() == {"error": {
        "message": "This model's maximum context length is 64 tokens. However, your prompt contains 70 input tokens, "
                   "which exceeds this limit even without any output tokens. Please reduce the length of the input "
                   "prompt.",
        "type": "BadRequestError", "param": "input_tokens", "code": 400}}
    over = completions(model_server, prompt=[1] * 10, max_tokens=65)
    assert over.status_code == 400 and "max_tokens=65 cannot be greater than max_model_len=64" in over.text
    full = completions(model_server, prompt=[1] * 64, stream=True)
    assert full.status_code == 400 and full.json()["error"]["message"] == "max_tokens must be at least 1, got 0."
    # Scoring: a prompt and the one token vLLM generates.
    assert completions(model_server, prompt=[1] * 64, max_tokens=1, prompt_logprobs=1).status_code == 400


@pytest.mark.model
def test_the_model_server_cuts_max_tokens_to_the_context_as_vllm_does(model_server, local_backend, short_context):
    # vLLM 0.34 refuses no prompt that fits: it lowers max_tokens to what the context leaves (get_max_tokens), so
    # the answer is the one max_tokens=4 gives.
    answer = completions(model_server, prompt=[1] * 60, max_tokens=8, temperature=0)
    assert answer.status_code == 200, answer.text
    steps = list(local_backend.stream([1] * 60, max_tokens=CONTEXT - 60, temperature=0, seed=None, top_k=1))
    assert answer.json()["usage"]["completion_tokens"] == len(steps)
    assert answer.json()["choices"][0]["finish_reason"] == steps[-1].finish_reason


@pytest.mark.model
def test_the_client_knows_max_model_len_and_refuses_before_sending(client, short_context, no_forward_pass):
    assert client.context_length == CONTEXT
    with pytest.raises(PromptTooLong, match="over the model's context of 64 tokens"):
        list(client.stream([1] * 60, max_tokens=8, temperature=0, seed=None, top_k=1))
    with pytest.raises(PromptTooLong):
        client.prompt_logprobs([1] * CONTEXT, top_k=1)


@pytest.mark.model
def test_the_servers_refusal_is_prompt_too_long_when_the_client_does_not_know(client, short_context,
                                                                               no_forward_pass, monkeypatch):
    monkeypatch.setattr(client, "_max_model_len", (None,))  # as from a server that does not say
    monkeypatch.setattr("dataplatform.inference.vllm.context_limit", lambda own: own)
    assert client.context_length is None
    with pytest.raises(PromptTooLong, match="maximum context length is 64 tokens") as raised:
        list(client.stream([1] * 70, max_tokens=8, temperature=0, seed=None, top_k=1))
    assert raised.value.tokens == 70 and raised.value.limit == 64 and raised.value.status == 400
    results = dict(client.rollouts([[1] * 65, [1] * 70], max_tokens=8, temperature=0, seeds=[0, 0], top_k=1))
    assert all(isinstance(result, PromptTooLong) for result in results.values()) and len(results) == 2
    assert results[0].tokens == 65


@pytest.mark.model
def test_a_vllm_rollout_batch_fails_only_the_long_prompt(client, local_backend, short_context):
    prompts = [local_backend.chat_prompt_ids([{"role": "user", "content": "Hi"}]), [1] * 70]
    results = dict(client.rollouts(prompts, max_tokens=2, temperature=0, seeds=[0, 0], top_k=1))
    assert isinstance(results[1], PromptTooLong) and results[1].tokens == 70
    assert 1 <= len(results[0]) <= 2
