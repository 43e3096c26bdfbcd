from dataplatform.inference.base import TokenStep
from dataplatform.inference.sampling import sampled_texts

END = 0


class Reversed:
    """Answers each prompt with its own ids, the last row first; a prompt ending in 9 stops with the end token."""

    def __init__(self):
        self.calls = []

    def rollouts(self, prompts, *, max_tokens, temperature, seeds, top_k):
        self.calls.append((len(prompts), seeds, max_tokens, temperature, top_k))
        for index in reversed(range(len(prompts))):
            ids = list(prompts[index])
            steps = [TokenStep(token_id=i, logprob=0.0) for i in ids]
            if ids[-1] == 9:
                steps.append(TokenStep(token_id=END, logprob=0.0, finish_reason="stop"))
            else:
                steps[-1] = TokenStep(token_id=ids[-1], logprob=0.0, finish_reason="length")
            yield index, steps

    def detokenize(self, ids):
        return "-".join(map(str, ids))


def test_one_text_per_prompt_in_order_from_one_call_without_the_end_token():
    backend = Reversed()
    texts = sampled_texts(backend, [[1, 2], [3, 9], [4]], seeds=[7, 8, None], max_tokens=5, temperature=0.5)
    assert texts == ["1-2", "3-9", "4"]
    assert backend.calls == [(3, [7, 8, None], 5, 0.5, 1)]
