"""`LocalBackend.rollouts`: batched decoding with top-k, checked against `stream` of each prompt alone."""

from dataclasses import replace

import pytest

from dataplatform.inference import BackendError
from dataplatform.inference.batch_decoding import plan_batches

# Prompts of different lengths (31-51 tokens with the chat template); at MAX_TOKENS some answers end on their
# own and others run out of tokens (the fixtures check it: the tests need both kinds of row).
QUESTIONS = ["Hi", "List three fruits.", "Reply with one word: is the sky blue?",
             "Write a long poem about the sea, the wind and the ships that sail at night under the stars."]
MAX_TOKENS, TOP_K = 12, 5


@pytest.fixture(scope="module")
def prompts(local_backend):
    return [local_backend.chat_prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]


@pytest.fixture(scope="module")
def sequential(local_backend, prompts):
    """Today's one-at-a-time path, greedy: the reference."""
    runs = [list(local_backend.stream(ids, max_tokens=MAX_TOKENS, temperature=0.0, seed=0, top_k=TOP_K))
            for ids in prompts]
    reasons = {steps[-1].finish_reason for steps in runs}
    assert reasons == {"stop", "length"}, "the prompts must give rows that end early and rows that run to length"
    assert len({len(ids) for ids in prompts}) == len(prompts), "the prompts must have different lengths"
    return runs


@pytest.fixture(scope="module")
def batched(local_backend, prompts):
    """One greedy batch of all the prompts: its yields in order, and the rows of each forward pass."""
    rows_per_pass = []
    hook = local_backend.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows_per_pass.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    try:
        yields = list(local_backend.rollouts(prompts, max_tokens=MAX_TOKENS, temperature=0.0, seeds=[0] * len(prompts),
                                             top_k=TOP_K))
    finally:
        hook.remove()
    return {"yields": yields, "rows_per_pass": rows_per_pass}


def assert_same_steps(batched_steps, alone_steps):
    assert [s.token_id for s in batched_steps] == [s.token_id for s in alone_steps]
    assert [s.finish_reason for s in batched_steps] == [s.finish_reason for s in alone_steps]
    for mine, theirs in zip(batched_steps, alone_steps, strict=True):
        assert [i for i, _ in mine.top] == [i for i, _ in theirs.top]
        assert [lp for _, lp in mine.top] == pytest.approx([lp for _, lp in theirs.top], abs=1e-4)
        assert mine.logprob == pytest.approx(theirs.logprob, abs=1e-4)


@pytest.mark.model
def test_greedy_batch_gives_each_prompt_what_stream_gives_it_alone(batched, sequential):
    results = dict(batched["yields"])
    assert sorted(results) == list(range(len(QUESTIONS)))
    for index, alone in enumerate(sequential):
        assert_same_steps(results[index], alone)


@pytest.mark.model
def test_rows_are_yielded_as_they_end_and_leave_the_batch(batched, sequential):
    lengths = [len(steps) for _, steps in batched["yields"]]
    assert lengths == sorted(lengths) and lengths[0] < MAX_TOKENS
    # One forward pass per step for the whole batch, and each pass only for the rows still running.
    running = [sum(len(steps) >= step for steps in sequential) for step in range(1, MAX_TOKENS + 1)]
    assert batched["rows_per_pass"] == running


@pytest.mark.model
def test_one_token_each_in_batches_of_two(local_backend, prompts, sequential, monkeypatch):
    monkeypatch.setattr(local_backend, "max_rollout_batch", 2)
    results = dict(local_backend.rollouts(prompts, max_tokens=1, temperature=0.0, seeds=[None] * len(prompts),
                                          top_k=TOP_K))
    for index, alone in enumerate(sequential):
        (step,) = results[index]
        assert step.finish_reason == ("stop" if alone[0].token_id in local_backend.eos_token_ids else "length")
        assert_same_steps([step], [replace(alone[0], finish_reason=step.finish_reason)])


@pytest.mark.model
def test_sampling_follows_each_rows_seed(local_backend, prompts):
    options = {"max_tokens": 8, "temperature": 1.0, "top_k": TOP_K}
    seeds = [7, 8]
    batched = dict(local_backend.rollouts(prompts[:2], seeds=seeds, **options))
    for index, seed in enumerate(seeds):
        # A row draws from its own generator, seeded as `stream` seeds its one: the same tokens as alone, whatever
        # rows share its batch (and so the same on every run: test_local.py checks that `stream` is).
        alone = list(local_backend.stream(prompts[index], seed=seed, **options))
        assert [s.token_id for s in batched[index]] == [s.token_id for s in alone]
        assert all(s.token_id in dict(s.top) for s in batched[index])  # listed even when outside the top k


@pytest.mark.model
def test_no_prompts_no_rollouts(local_backend):
    assert list(local_backend.rollouts([], max_tokens=4, temperature=0.0, seeds=[], top_k=TOP_K)) == []


@pytest.mark.model
@pytest.mark.parametrize("prompts, seeds, max_tokens", [
    ([[1, 2], [-1]], [0, 0], 4),
    ([[1, 2], [10 ** 6]], [0, 0], 4),
    ([[1, 2], []], [0, 0], 4),
    ([[1, 2]], [0, 0], 4),
    ([[1, 2]], [0], 0),
])
def test_bad_input_is_refused_at_the_call(local_backend, prompts, seeds, max_tokens):
    with pytest.raises(BackendError):
        local_backend.rollouts(prompts, max_tokens=max_tokens, temperature=0.0, seeds=seeds, top_k=TOP_K)


def test_batches_take_the_longest_first_within_rows_and_padded_tokens():
    lengths = [10, 40, 20, 30, 500]
    plan = plan_batches(lengths, max_tokens=10, max_rows=2, max_padded_tokens=120)
    # 500 + 10 is past the budget: alone. 40 and 30: 2 x 50 = 100 tokens; 20 and 10: 2 x 30.
    assert plan == [[4], [1, 3], [2, 0]]
    assert plan_batches(lengths, max_tokens=10, max_rows=8, max_padded_tokens=100) == [[4], [1, 3], [2, 0]]
    assert plan_batches([], max_tokens=10, max_rows=2, max_padded_tokens=100) == []
