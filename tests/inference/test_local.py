"""The embedded backend with the real SmolLM2-135M model (loaded once per session)."""

import pytest

from dataplatform.inference import BackendError
from dataplatform.inference.text import group_pieces
from tests.inference.utf8 import is_whole_utf8

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "List three fruits."}]


@pytest.fixture(scope="module")
def prompt_ids(local_backend):
    return local_backend.chat_prompt_ids(QUESTION)


def generate(backend, ids, **options):
    settings = {"max_tokens": 12, "temperature": 0.0, "seed": 0, "top_k": 5} | options
    return list(backend.stream(ids, **settings))


def test_chat_template_adds_the_default_system_prompt_and_generation_prompt(local_backend, prompt_ids):
    text = local_backend.detokenize(prompt_ids)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert "List three fruits." in text


def test_greedy_continuation_is_deterministic(local_backend, prompt_ids):
    first = [s.token_id for s in generate(local_backend, prompt_ids)]
    second = [s.token_id for s in generate(local_backend, prompt_ids, seed=123)]  # greedy ignores the seed
    assert first == second and len(first) == 12


def test_sampling_is_reproducible_by_seed(local_backend, prompt_ids):
    runs = [[s.token_id for s in generate(local_backend, prompt_ids, temperature=1.2, seed=seed)] for seed in (7, 7, 8)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_top_k_is_sorted_and_contains_the_sampled_token(local_backend, prompt_ids):
    for step in generate(local_backend, prompt_ids, temperature=1.0, seed=1, top_k=8):
        logprobs = [lp for _, lp in step.top]
        assert logprobs == sorted(logprobs, reverse=True)
        assert len(step.top) in (8, 9)  # 9 when the sampled token was outside the top 8
        assert dict(step.top)[step.token_id] == pytest.approx(step.logprob)
        assert all(lp <= 0 for lp in logprobs)


def test_greedy_token_is_the_top_candidate(local_backend, prompt_ids):
    for step in generate(local_backend, prompt_ids):
        assert step.top[0][0] == step.token_id


def test_prompt_logprobs_match_the_streamed_logprobs(local_backend, prompt_ids):
    steps = generate(local_backend, prompt_ids, max_tokens=24, temperature=0.9, seed=5, top_k=5)
    sequence = prompt_ids + [s.token_id for s in steps]
    scored = local_backend.prompt_logprobs(sequence, top_k=5)
    assert scored[0] is None and len(scored) == len(sequence)
    for offset, step in enumerate(steps):
        entry = scored[len(prompt_ids) + offset]
        assert entry[step.token_id] == pytest.approx(step.logprob, abs=1e-4)
        for token_id, logprob in step.top[:5]:
            assert entry[token_id] == pytest.approx(logprob, abs=1e-4)


def test_continuing_from_a_replaced_token_diverges_after_it(local_backend, prompt_ids):
    original = generate(local_backend, prompt_ids, max_tokens=16)
    position = 3
    alternative = next(token_id for token_id, _ in original[position].top if token_id != original[position].token_id)
    prefix = prompt_ids + [s.token_id for s in original[:position]] + [alternative]
    continued = generate(local_backend, prefix, max_tokens=13)
    corrected = [s.token_id for s in original[:position]] + [alternative] + [s.token_id for s in continued]
    assert corrected[:position] == [s.token_id for s in original[:position]]  # the prefix is untouched
    assert corrected[position] != original[position].token_id
    assert corrected != [s.token_id for s in original]
    # The continuation is exactly what the model does from the corrected id prefix.
    assert [s.token_id for s in continued] == [s.token_id for s in generate(local_backend, prefix, max_tokens=13)]


def test_generation_stops_at_the_end_token_with_reason_stop(local_backend):
    ids = local_backend.chat_prompt_ids([{"role": "user", "content": "Reply with just the word yes."}])
    steps = generate(local_backend, ids, max_tokens=64)
    assert steps[-1].finish_reason == "stop" and steps[-1].token_id in local_backend.eos_token_ids
    assert all(s.finish_reason is None for s in steps[:-1])


def test_max_tokens_ends_with_reason_length(local_backend, prompt_ids):
    steps = generate(local_backend, prompt_ids, max_tokens=3)
    assert len(steps) == 3 and steps[-1].finish_reason == "length"


def test_cjk_and_emoji_round_trip_through_pieces_into_whole_characters(local_backend):
    text = "你好，世界！🙂🦩 naïve café"
    ids = local_backend.tokenize(text)
    pieces = local_backend.token_pieces(ids)
    assert b"".join(pieces) == text.encode("utf-8")
    assert any(not is_whole_utf8(piece) for piece in pieces)  # some tokens really are partial characters
    groups = group_pieces(pieces)
    assert "".join(g.text for g in groups) == text
    assert all("\ufffd" not in g.text for g in groups)
    assert groups[-1].end == len(ids)


def test_special_tokens_have_their_text_as_bytes(local_backend):
    assert local_backend.token_pieces([2]) == [b"<|im_end|>"]


def test_bad_ids_are_refused_clearly(local_backend):
    with pytest.raises(BackendError, match="token ids"):
        generate(local_backend, [10**9])
    with pytest.raises(BackendError, match="token ids"):
        local_backend.prompt_logprobs([], top_k=3)


def test_health_reports_the_loaded_model(local_backend):
    health = local_backend.health()
    assert health.ok and health.model_id == "SmolLM2-135M-Instruct" and "loaded" in health.detail


@pytest.mark.model
def test_generate_a_batch_matches_one_by_one_greedy(local_backend):
    """A left-padded batch gives each prompt the same greedy answer it gets alone."""
    prompts = [local_backend.chat_prompt_ids([{"role": "user", "content": text}])
               for text in ("Name a colour.", "What is 2 + 2? Answer briefly, please.")]
    together = local_backend.generate(prompts, max_tokens=8, temperature=0.0, seed=0)
    alone = [local_backend.generate([ids], max_tokens=8, temperature=0.0, seed=0)[0] for ids in prompts]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    assert all(g.text == local_backend.detokenize(g.token_ids) for g in together)
    assert all(g.finish_reason in ("stop", "length") for g in together)
