"""The rollouts the continuation bench writes itself (bench/benchlib.py): a fixed text scored by the model into
the shape of a real rollout, and the tokens that lie inside its reasoning."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' helpers
import benchlib  # noqa: E402

pytestmark = pytest.mark.model

QUESTION = [{"role": "user", "content": "Tell me one fact about the moon."}]


@pytest.fixture(scope="module")
def prompt_ids(local_backend):
    return local_backend.chat_prompt_ids(QUESTION)


def test_a_scored_text_reads_like_the_stream_that_wrote_it(local_backend, prompt_ids):
    """Scoring the model's own greedy answer gives back the stream's tokens, logprobs and top k."""
    steps = list(local_backend.stream(prompt_ids, max_tokens=12, temperature=0.0, seed=0, top_k=5))
    text = local_backend.detokenize([step.token_id for step in steps])
    rollout = benchlib.scored_rollout(local_backend, prompt_ids, text, top_k=5)
    assert rollout["token_ids"] == [step.token_id for step in steps]
    assert rollout["model_id"] == local_backend.model_id and rollout["finish_reason"] == "stop"
    for step, logprob, top in zip(steps, rollout["logprobs"], rollout["top"], strict=True):
        assert logprob == pytest.approx(step.logprob, abs=1e-4)
        assert [candidate for candidate, _ in top] == [candidate for candidate, _ in step.top]
        assert [value for _, value in top] == pytest.approx([value for _, value in step.top], abs=1e-4)


def test_a_token_the_model_would_not_write_is_added_after_the_top_k(local_backend, prompt_ids):
    rollout = benchlib.scored_rollout(local_backend, prompt_ids, "<think>\nzebra quantum marmalade", top_k=3)
    for token_id, logprob, top in zip(rollout["token_ids"], rollout["logprobs"], rollout["top"], strict=True):
        values = [value for _, value in top[:3]]
        assert values == sorted(values, reverse=True) and len(top) in (3, 4)
        assert dict(top)[token_id] == pytest.approx(logprob)
        if len(top) == 4:  # outside the top 3: the text's own token comes last, as in a stream's step
            assert top[3][0] == token_id and top[3][1] <= values[-1]


def test_the_reasoning_span_holds_the_reasoning_tokens_only(local_backend):
    text = "<think>\nThe moon has no air, so sound cannot travel there.\n</think>\n\nIt is silent."
    ids = local_backend.tokenize(text)
    first, end = benchlib.reasoning_span(local_backend, ids)
    assert local_backend.detokenize(ids[first:end]) in "The moon has no air, so sound cannot travel there."
    assert "<think>" in local_backend.detokenize(ids[:first]) and "</think>" in local_backend.detokenize(ids[end:])
    assert end - first >= 8
    with pytest.raises(ValueError):
        benchlib.reasoning_span(local_backend, local_backend.tokenize("No reasoning here."))
