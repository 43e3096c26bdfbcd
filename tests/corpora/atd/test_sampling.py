"""ATD candidate sampling (corpora/atd/services.py `sample_candidates`): both candidates of every prompt in one
batched rollout, each row with its own seed. With a double, then with the real model behind the vLLM-shaped
model server, where one seed for the batch made the two candidates of a prompt the same answer."""

import pytest

from corpora.atd import services
from corpora.atd.models import AtdPrompt
from dataplatform.inference import TokenStep
from dataplatform.inference.server import build_app
from dataplatform.inference.vllm import VllmBackend
from tests.inference.model_servers import SERVED_NAME, ThreadedServer

from ...doubles import RecordingProgress

pytestmark = pytest.mark.django_db
END = 0  # the double's end token


class RolloutDouble:
    """Answers each rollouts call from a list of texts (one per row, in order), a letter per token, each answer
    ended by the end token; records the rows and seeds of every call."""

    model_id = "rollout-double"

    def __init__(self, calls):
        self.calls, self.seen = list(calls), []

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        return [len(messages[-1]["content"])]

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        self.seen.append({"rows": len(prompts), "seeds": seeds, "temperature": temperature, "top_k": top_k})
        texts = self.calls.pop(0)
        assert len(texts) == len(prompts)
        for index in reversed(range(len(prompts))):  # in an order of their own, as requests finish
            ids = [ord(c) for c in texts[index]]
            yield index, [TokenStep(token_id=i, logprob=-1.0) for i in ids] + [
                TokenStep(token_id=END, logprob=-0.1, finish_reason="stop")]

    def detokenize(self, ids):
        assert END not in ids, "the end token is not part of the answer"
        return "".join(map(chr, ids))


def missing(project, n: int) -> AtdPrompt:
    return AtdPrompt.objects.create(project=project, external_id=f"m{n}", candidates_origin="missing",
                                    messages=[{"role": "user", "content": f"Name a colour ({n})."}],
                                    source_sha256=f"{n:064d}")


def test_both_candidates_of_a_batch_go_in_one_rollout_with_a_seed_per_row(project, use_backend):
    first, second = missing(project, 0), missing(project, 1)
    backend = RolloutDouble([[" one", "two ", "same", "same"],  # try 1: the second prompt's samples are equal
                             ["three", "four"]])                # try 2: only the second prompt is asked again
    use_backend(backend)
    result = services.sample_candidates(project=project, progress=RecordingProgress(), temperature=0.9, seed=5)
    assert result == {"sampled": 2, "gave_up": 0, "model_id": "rollout-double"}
    assert [(call["rows"], call["temperature"]) for call in backend.seen] == [(4, 0.9), (2, 0.9)]
    seeds = [seed for call in backend.seen for seed in call["seeds"]]
    assert len(set(seeds)) == 6  # every row its own seed: no two samples share their randomness
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.candidate_a, first.candidate_b, first.candidates_origin) == ("one", "two", "sampled")
    assert (second.candidate_a, second.candidate_b) == ("three", "four") and second.meta["sampling"]["tries"] == 2


def test_a_rerun_draws_the_same_seeds_whatever_shares_the_batch(project, use_backend):
    prompts = [missing(project, n) for n in range(3)]
    together = RolloutDouble([["x", "y"] * 3])
    use_backend(together)
    services.sample_candidates(project=project, progress=RecordingProgress(), seed=7)
    AtdPrompt.objects.filter(pk=prompts[1].pk).update(candidates_origin="missing")
    alone = RolloutDouble([["x", "y"]])
    use_backend(alone)
    services.sample_candidates(project=project, progress=RecordingProgress(), seed=7)
    assert alone.seen[0]["seeds"] == together.seen[0]["seeds"][2:4]


@pytest.fixture(scope="module")
def model_server(local_backend):
    with ThreadedServer(build_app(local_backend, served_model_name=SERVED_NAME)) as server:
        yield server


@pytest.mark.model
def test_on_vllm_the_two_candidates_are_two_samples(project, model_server, local_backend, use_backend):
    client = VllmBackend(base_url=model_server.url, model=SERVED_NAME, api_key="", timeout=60, tokenizer_dir=None)
    prompt = local_backend.chat_prompt_ids([{"role": "user", "content": "Name a colour (0)."}])
    # The cause: vLLM seeds every prompt of one request with its seed, so the same prompt twice is one answer twice.
    twice = client.generate([prompt, prompt], max_tokens=6, temperature=1.0, seed=3)
    assert twice[0].text == twice[1].text
    prompts = [missing(project, n) for n in range(2)]
    use_backend(client)
    result = services.sample_candidates(project=project, progress=RecordingProgress(), temperature=1.0, max_tokens=6,
                                        seed=1, tries=1)
    assert result["sampled"] + result["gave_up"] == 2
    for prompt in AtdPrompt.objects.filter(pk__in=[p.pk for p in prompts], candidates_origin="sampled"):
        ids = local_backend.chat_prompt_ids(prompt.messages)
        for side, text in zip("ab", (prompt.candidate_a, prompt.candidate_b), strict=True):
            # Each candidate is the sample `stream` draws for the prompt alone with that row's seed.
            steps = list(local_backend.stream(ids, max_tokens=6, temperature=1.0, top_k=1,
                                              seed=services._candidate_seed(1, 0, prompt, side)))
            alone = [s.token_id for s in steps if s.token_id not in local_backend.eos_token_ids]
            assert text == local_backend.detokenize(alone).strip()
    assert result["sampled"] >= 1  # distinct samples: on one shared seed every prompt gave up
    client.close()
