"""Batched decoding with top-k logprobs for `LocalBackend.rollouts`: many prompts, one forward pass per step.

A batch is left-padded, with each row's own position ids (from 0 at its first real token) and an attention
mask that hides the padding, so a row decodes exactly as it would alone: at temperature 0 its tokens are
those `LocalBackend.stream` gives for the prompt alone. After the prefill every step feeds each running row
its last token through the KV cache. A row leaves the batch when it ends (end token or max_tokens): its
steps are handed out at once, and its slice of the cache, mask and positions is dropped, so the rows still
running do not pay for it.
"""

import os
from collections.abc import Iterator

from .base import TokenStep


def plan_batches(lengths: list[int], *, max_tokens: int, max_rows: int, max_padded_tokens: int) -> list[list[int]]:
    """The prompts' indices cut into batches: longest first, so rows of a batch have similar lengths (little
    padding), each batch at most `max_rows` rows and `max_padded_tokens` padded tokens (rows x (longest prompt
    + max_tokens): what its KV cache grows to). A prompt longer than the budget goes alone."""
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        # Descending lengths: the first of a batch is its longest.
        if batches and len(batches[-1]) < max_rows and \
                (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + max_tokens) <= max_padded_tokens:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


class DecodingBatch:
    """The rows of one batch still being decoded, with their cache, mask, positions and random generators.

    `step()` runs one forward pass (under `lock`: the model is shared by the threads of the process) and
    returns the rows it finished. Its tensor work runs inside its own inference mode, which ends before the
    caller's generator yields (the mode is per thread: held across a yield it would leak into the caller)."""

    def __init__(self, model, lock, prompts: dict[int, list[int]], *, seeds: dict[int, int | None], max_tokens: int,
                 temperature: float, top_k: int, eos_token_ids: frozenset[int], pad_id: int):
        import torch

        self.model, self.lock = model, lock
        self.max_tokens, self.temperature, self.top_k = max_tokens, temperature, max(1, top_k)
        self.eos_token_ids = eos_token_ids
        self.rows = list(prompts)  # batch row -> the caller's index of its prompt
        width = max(len(ids) for ids in prompts.values())
        self.inputs = torch.tensor([[pad_id] * (width - len(ids)) + ids for ids in prompts.values()], dtype=torch.long)
        self.attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts.values()],
                                      dtype=torch.long)
        self.positions = (self.attention.cumsum(-1) - 1).clamp(min=0)
        # One generator per row, seeded as `stream` seeds its own: a row samples as it would alone.
        self.generators = [torch.Generator().manual_seed(_seed_or_random(seeds[index])) for index in self.rows]
        self.steps: dict[int, list[TokenStep]] = {index: [] for index in self.rows}
        self.cache = None
        self.produced = 0

    def step(self) -> list[tuple[int, list[TokenStep]]]:
        import torch

        with torch.inference_mode():
            with self.lock:
                # The logits of the last position only (left padding puts every row's last token there).
                output = self.model(input_ids=self.inputs, attention_mask=self.attention, position_ids=self.positions,
                                    cache=self.cache, use_cache=True, logits_to_keep=1)
            self.cache = output.cache
            logits = output.logits[:, -1].float()
            logprobs = torch.log_softmax(logits, dim=-1)
            tokens = self._pick(logits)
            chosen = logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)
            values, indices = torch.topk(logprobs, k=self.top_k, dim=-1)
            self.produced += 1
            # Plain lists once per step: indexing tensors element by element in Python costs more than the pass.
            finished, running = self._record(tokens.tolist(), chosen.tolist(), indices.tolist(), values.tolist())
            if running:
                self._advance(tokens, running, dropped=bool(finished))
            else:
                self.rows = []
        return finished

    def _pick(self, logits):
        import torch

        if self.temperature <= 0:
            return torch.argmax(logits, dim=-1)
        probs = torch.softmax(logits / self.temperature, dim=-1)
        return torch.cat([torch.multinomial(row, 1, generator=generator)
                          for row, generator in zip(probs, self.generators, strict=True)])

    def _record(self, tokens, chosen, top_ids, top_values) -> tuple[list[tuple[int, list[TokenStep]]], list[int]]:
        """Append each row's step; return the rows that ended, with their steps, and the batch rows still running."""
        finished, running = [], []
        for row, (index, token_id, logprob, ids, values) in enumerate(
                zip(self.rows, tokens, chosen, top_ids, top_values, strict=True)):
            top = list(zip(ids, values, strict=True))
            if token_id not in ids:  # the sampled token is always listed, after the top k (as vLLM does)
                top.append((token_id, logprob))
            ended = "stop" if token_id in self.eos_token_ids else ("length" if self.produced == self.max_tokens else None)
            self.steps[index].append(TokenStep(token_id=token_id, logprob=logprob, top=top, finish_reason=ended))
            if ended:
                finished.append((index, self.steps.pop(index)))
            else:
                running.append(row)
        return finished, running

    def _advance(self, tokens, running: list[int], *, dropped: bool) -> None:
        """The next step's input: each running row's last token, one more mask column and position."""
        import torch

        if dropped:
            keep = torch.tensor(running, dtype=torch.long)
            self.cache.batch_select_indices(keep)
            self.attention, self.positions, tokens = self.attention[keep], self.positions[keep], tokens[keep]
            self.rows = [self.rows[row] for row in running]
            self.generators = [self.generators[row] for row in running]
        self.inputs = tokens.unsqueeze(1)
        self.attention = torch.cat([self.attention, self.attention.new_ones((len(running), 1))], dim=1)
        self.positions = self.positions[:, -1:] + 1


def decode_batches(model, lock, prompts: list[list[int]], plan: list[list[int]], *, seeds: list[int | None],
                   **options) -> Iterator[tuple[int, list[TokenStep]]]:
    """(index into `prompts`, steps) of every prompt as its row ends, batch after batch of `plan`; `options`
    are DecodingBatch's. A batch's tensors are built only when its turn comes."""
    for indices in plan:
        batch = DecodingBatch(model, lock, {i: list(prompts[i]) for i in indices}, seeds={i: seeds[i] for i in indices},
                              **options)
        while batch.rows:
            yield from batch.step()


def _seed_or_random(seed: int | None) -> int:
    return seed if seed is not None else int.from_bytes(os.urandom(4), "little")
