"""Token-level supervision from a fork pair, as the onPanda package derives it, but on token ids.

onPanda re-tokenizes the chosen and rejected *texts*; we already hold the exact ids
the model saw and produced, so the fork and the patches are found on those ids
and text is only derived (DESIGN §8):

- `fork_token_idx` is the first position where the two responses differ.
- The patch around the fork is the smallest span of tokens that survives
  decode -> encode unchanged: byte-level BPE splits one CJK character or emoji over
  several tokens, and a lone piece of a character is not something a trainer can
  put loss on as text.
- Chunks are `[pre: ignore_loss, patch: loss, post: ignore_loss]`.
- The rejected patch gets (negative) loss only when it is exactly one token; a
  many-token rejected patch would push down tokens that were never the mistake.

A response may end at the fork (the annotator stopped it there, or the model
stopped too early). That side's "token" at the fork is then the stop: its token
id is None, its patch is empty, and, as in onPanda, it has only two chunks
`[pre, patch]`. A stop counts as one token, so a rejected stop gets loss.

Responses are passed WITHOUT the model's end-of-sequence token (`response_ids`):
the end of the list is the stop, the same for trees generated here and for trees
imported from `.panda.json`, whose text has no stop token.

Which pairs to supervise follows onPanda's `PandaTree` too (`pick_fork_pairs`).
"""

from collections.abc import Collection, Mapping
from typing import Protocol, TypedDict

from .models import Node, Origin

# Patches longer than this are not searched for: the whole response becomes the patch
# (onPanda's own fallback), so a pathological tokenization cannot cost O(n^2) round trips.
MAX_PATCH_TOKENS = 32


class Tokenizer(Protocol):
    """The part of `dataplatform.inference.Backend` this module needs."""

    def tokenize(self, text: str) -> list[int]: ...

    def detokenize(self, ids: list[int]) -> str: ...


class Chunk(TypedDict):
    token_ids: list[int]
    text: str
    ignore_loss: bool


class TokenSupervision(TypedDict):
    fork_token_idx: int
    chosen_token_id: int | None  # None: the chosen response ends at the fork (the stop is chosen)
    rejected_token_id: int | None  # None: the rejected response ended at the fork
    chosen_ends_at_fork: bool
    rejected_ends_at_fork: bool
    chosen_patch: tuple[int, int]  # [start, end) token range of the chosen patch
    rejected_patch: tuple[int, int]
    chosen_text: str  # text of the chosen patch
    rejected_text: str
    chosen_chunks: list[Chunk]
    rejected_chunks: list[Chunk]
    rejected_loss: bool


class NothingToSupervise(ValueError):
    """The two responses are the same token for token."""


def strip_stop_token(token_ids: list[int], *, origins: list[str], finish_reason: str, locked_until: int) -> list[int]:
    """The response's ids without the model's own end-of-sequence token.

    When the model stops, the backends append its end-of-sequence token as the last
    step (finish_reason "stop"). A stop made by the annotator (a forced stop, or a
    rewrite ending in <|stop|>) appends nothing and locks every token, and an imported
    tree is locked through its last token too, so the last token is the model's stop
    token exactly when the model generated it after the locked prefix.
    """
    if finish_reason == "stop" and len(token_ids) > locked_until and origins and origins[-1] == Origin.MODEL:
        return list(token_ids[:-1])
    return list(token_ids)


def response_ids(node: Node) -> list[int]:
    """A node's response ids, without the model's end-of-sequence token: what its text is made of."""
    return strip_stop_token(node.token_ids, origins=node.origins, finish_reason=node.finish_reason,
                            locked_until=node.locked_until)


def pick_fork_pairs(sequences: Mapping[int, list[int]], good: Collection[int]) -> list[tuple[int, int]]:
    """(rejected, chosen) keys: every non-good sequence with the good one(s) sharing its longest prefix.

    This is PandaTree's rule for the dialogs of one tree. Ties pair with each of the
    tied good sequences. A pair whose sequences are identical carries no signal and
    is left out (PandaTree keeps it and only warns).
    """
    pairs = []
    good_keys = [key for key in sequences if key in good]
    for key, sequence in sequences.items():
        if key in good or not good_keys:
            continue
        # The fork index is the length of the common prefix.
        lengths = {chosen: fork_token_idx(sequence, sequences[chosen]) for chosen in good_keys}
        longest = max(lengths.values())
        pairs += [(key, chosen) for chosen, length in lengths.items()
                  if length == longest and sequences[chosen] != sequence]
    return pairs


def fork_token_idx(rejected_ids: list[int], chosen_ids: list[int]) -> int:
    """The first index where the two differ; the shorter length when one is a prefix of the other.

    Equal sequences give their length (there is no fork; `token_supervision` refuses them).
    """
    for index, (rejected, chosen) in enumerate(zip(rejected_ids, chosen_ids, strict=False)):
        if rejected != chosen:
            return index
    return min(len(rejected_ids), len(chosen_ids))


def round_trips(ids: list[int], backend: Tokenizer) -> bool:
    """Whether `ids` decode to a text that encodes back to exactly `ids`."""
    return backend.tokenize(backend.detokenize(ids)) == list(ids)


def minimal_stable_patch(ids: list[int], center: int, backend: Tokenizer, *,
                         max_tokens: int = MAX_PATCH_TOKENS) -> tuple[int, int]:
    """The smallest [start, end) containing `center` whose decode -> encode gives back the same ids.

    Smaller spans are tried first; among spans of one size, the one starting at
    `center` first, then those reaching further left (as onPanda does), so a
    character split over bytes grows to cover its earlier bytes. Falls back to the
    whole sequence when nothing up to `max_tokens` long round-trips.
    """
    if not 0 <= center < len(ids):
        raise ValueError(f"Position {center} is outside the sequence ({len(ids)} tokens).")
    for size in range(1, min(len(ids), max_tokens) + 1):
        for start in range(center, center - size, -1):
            end = start + size
            if start >= 0 and end <= len(ids) and round_trips(ids[start:end], backend):
                return start, end
    return 0, len(ids)


def _chunk(ids: list[int], backend: Tokenizer, *, ignore_loss: bool) -> Chunk:
    return {"token_ids": list(ids), "text": backend.detokenize(ids) if ids else "", "ignore_loss": ignore_loss}


def _patch(ids: list[int], fork: int, backend: Tokenizer) -> tuple[int, int]:
    # A side that stops at the fork gets an empty patch standing for the stop.
    return (fork, fork) if fork >= len(ids) else minimal_stable_patch(ids, fork, backend)


def _chunks(ids: list[int], patch: tuple[int, int], backend: Tokenizer, *, patch_loss: bool) -> list[Chunk]:
    start, end = patch
    chunks = [_chunk(ids[:start], backend, ignore_loss=True), _chunk(ids[start:end], backend, ignore_loss=not patch_loss)]
    if start < len(ids):  # onPanda leaves out the (empty) post chunk when the side stops at the fork
        chunks.append(_chunk(ids[end:], backend, ignore_loss=True))
    return chunks


def token_supervision(rejected_ids: list[int], chosen_ids: list[int], backend: Tokenizer) -> TokenSupervision:
    """Token-level supervision for a (rejected, chosen) pair of response token ids.

    Raises NothingToSupervise when the two are identical.
    """
    rejected_ids, chosen_ids = list(rejected_ids), list(chosen_ids)
    if rejected_ids == chosen_ids:
        raise NothingToSupervise("The chosen and rejected responses are identical; there is no fork.")
    fork = fork_token_idx(rejected_ids, chosen_ids)
    chosen_ends, rejected_ends = fork >= len(chosen_ids), fork >= len(rejected_ids)

    chosen_patch, rejected_patch = _patch(chosen_ids, fork, backend), _patch(rejected_ids, fork, backend)
    rejected_loss = rejected_ends or rejected_patch[1] - rejected_patch[0] == 1  # a stop counts as one token
    chosen_chunks = _chunks(chosen_ids, chosen_patch, backend, patch_loss=True)
    rejected_chunks = _chunks(rejected_ids, rejected_patch, backend, patch_loss=rejected_loss)
    return {
        "fork_token_idx": fork,
        "chosen_token_id": None if chosen_ends else chosen_ids[fork],
        "rejected_token_id": None if rejected_ends else rejected_ids[fork],
        "chosen_ends_at_fork": chosen_ends,
        "rejected_ends_at_fork": rejected_ends,
        "chosen_patch": chosen_patch,
        "rejected_patch": rejected_patch,
        "chosen_text": chosen_chunks[1]["text"],
        "rejected_text": rejected_chunks[1]["text"],
        "chosen_chunks": chosen_chunks,
        "rejected_chunks": rejected_chunks,
        "rejected_loss": rejected_loss,
    }
