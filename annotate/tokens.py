"""A node's tokens: six lists with one entry per token, changed together through TokenSequence.

A Node stores its response as six JSON columns, one entry per token: `token_ids` (the truth), `logprobs`
(None for a typed token), `top` (the model's top-k there, best first; [] for a typed token), `origins` (an
Origin value), `candidate_ranks` (the rank in the top-k of a picked candidate, else None) and `channels`
(what the response template read the token as). Every operator appends to them, cuts them at a fork or
rewrites some entries; done by hand at each site, one list forgotten leaves a node whose token i carries
another token's logprob. TokenSequence is the only code that changes them, and it refuses to work on lists
out of step (TokensOutOfStep).

A token's channel is the template's reading of the whole response, so a token added here is `pending`
until the node is parsed again (nodes.parse_into, which sets every channel at once). The channels may lag
behind the tokens in what is stored (a stream that stopped between a token and its parse, a node saved
before nodes had channels, a test standing in for the model): the tokens the template has not read yet
are pending too. The other five lists are always written together, so a gap in them is an error.
"""

from typing import Any, NamedTuple

from dataplatform.conversations.templates import PENDING

FIELDS = ("token_ids", "logprobs", "top", "origins", "candidate_ranks", "channels")
# A token's facts by name (Token's fields) -> the node's list that holds them.
COLUMNS = {"token_id": "token_ids", "logprob": "logprobs", "top": "top", "origin": "origins",
           "candidate_rank": "candidate_ranks", "channel": "channels"}
# What the model said about a token, and how it came to be there: what a fork's prefix keeps of its parent.
FACTS = ("logprob", "top", "origin", "candidate_rank")


class TokensOutOfStep(ValueError):
    """A node's token lists do not have one entry per token each."""


class Token(NamedTuple):
    token_id: int
    logprob: float | None
    top: list
    origin: str
    candidate_rank: int | None
    channel: str


class _Lists:
    """The six lists and nothing else: what a sequence cut from a node holds."""

    def __init__(self, **lists: list):
        for name in FIELDS:
            setattr(self, name, lists.get(name, []))


class TokenSequence:
    """The tokens of `holder` (a Node, or anything with the six lists; none: a new empty sequence).

    It reads and changes the holder's own lists, so a change shows on the node at once and a save stores it.
    The cuts (`prefix`, `slice`) are copies, detached from the holder."""

    def __init__(self, holder: Any = None):
        self.holder = _Lists() if holder is None else holder
        unread = len(self.holder.token_ids) - len(self.holder.channels)
        if unread > 0:  # tokens the template has not read yet (see the module's docstring)
            self.holder.channels = [*self.holder.channels, *[PENDING] * unread]
        self.check()

    def check(self) -> None:
        lengths = {name: len(getattr(self.holder, name)) for name in FIELDS}
        if len(set(lengths.values())) > 1:
            what = f"node {self.holder.pk}" if getattr(self.holder, "pk", None) else "a node"
            raise TokensOutOfStep(f"The token lists of {what} are out of step ("
                                  + ", ".join(f"{name}: {length}" for name, length in lengths.items())
                                  + "): each must hold one entry per token.")

    def _list(self, name: str) -> list:
        return getattr(self.holder, name)

    def __len__(self) -> int:
        return len(self.holder.token_ids)

    def __getitem__(self, position: int) -> Token:
        return Token(*(self._list(name)[position] for name in FIELDS))

    def __iter__(self):
        return map(Token._make, zip(*(self._list(name) for name in FIELDS), strict=True))

    @property
    def token_ids(self) -> list[int]:
        return list(self.holder.token_ids)

    # --- growing --------------------------------------------------------------------------------------

    def append(self, token_id: int, *, origin: str, logprob: float | None = None, top=(), rank: int | None = None,
               channel: str = PENDING) -> None:
        self.extend([token_id], origin=origin, logprobs=[logprob], tops=[top], rank=rank, channels=[channel])

    def extend(self, token_ids: list[int], *, origin: str, logprobs: list | None = None, tops: list | None = None,
               rank: int | None = None, channels: list[str] | None = None) -> None:
        """Add tokens of one origin (and rank): logprobs, tops and channels, when given, one per token (else
        None, [] and pending)."""
        count = len(token_ids)
        given = {"logprobs": logprobs, "tops": tops, "channels": channels}
        wrong = {name: len(values) for name, values in given.items() if values is not None and len(values) != count}
        if wrong:
            raise TokensOutOfStep(f"{count} tokens to add, but " + ", ".join(
                f"{length} {name}" for name, length in wrong.items()) + ".")
        additions = {
            "token_ids": list(token_ids),
            "logprobs": list(logprobs) if logprobs is not None else [None] * count,
            "top": [[list(pair) for pair in top] for top in tops] if tops is not None else [[] for _ in range(count)],
            "origins": [origin] * count,
            "candidate_ranks": [rank] * count,
            "channels": list(channels) if channels is not None else [PENDING] * count,
        }
        for name in FIELDS:
            self._list(name).extend(additions[name])

    def extend_with(self, other: "TokenSequence") -> None:
        """Add every token of `other`, as it is there."""
        for name in FIELDS:
            self._list(name).extend(other._list(name))

    # --- cutting --------------------------------------------------------------------------------------

    def slice(self, start: int, stop: int | None = None) -> "TokenSequence":
        """A copy of tokens [start, stop) (as a list slice: a bound past the end stops at the end)."""
        return TokenSequence(_Lists(**{name: self._list(name)[start:stop] for name in FIELDS}))

    def prefix(self, stop: int) -> "TokenSequence":
        """A copy of the first `stop` tokens: what a fork keeps of its parent."""
        return self.slice(0, stop)

    def write_to(self, node) -> None:
        """Give `node` these tokens (copies of the lists: the two never share one)."""
        for name in FIELDS:
            setattr(node, name, list(self._list(name)))

    # --- rewriting ------------------------------------------------------------------------------------

    def set(self, start: int, stop: int | None = None, **facts) -> None:
        """Set facts of tokens [start, stop) (stop: start + 1), e.g. `set(4, origin=Origin.TYPED)`; the ids stay."""
        stop = start + 1 if stop is None else stop
        if not 0 <= start <= stop <= len(self):
            raise IndexError(f"Tokens [{start}, {stop}) are not inside the response ({len(self)} tokens).")
        if unknown := set(facts) - set(FACTS) - {"channel"}:
            raise TypeError(f"Not a token fact that may change: {', '.join(sorted(unknown))}.")
        for fact, value in facts.items():
            values = self._list(COLUMNS[fact])
            for position in range(start, stop):
                values[position] = list(value) if isinstance(value, list) else value

    def adopt(self, source: "TokenSequence", stop: int) -> None:
        """Tokens [0, stop) take `source`'s facts (logprob, top-k, origin, rank) where both hold the same ids: a
        fork's prefix is its parent's, as in a correction made here. Ids and channels stay."""
        if self.token_ids[:stop] != source.token_ids[:stop] or stop > len(self):
            raise ValueError(f"The first {stop} tokens are not the same in both sequences.")
        for fact in FACTS:
            self._list(COLUMNS[fact])[:stop] = source._list(COLUMNS[fact])[:stop]

    def set_channels(self, channels: list[str]) -> None:
        """Every token's channel, as the response template read them (one per token)."""
        if len(channels) != len(self):
            raise TokensOutOfStep(f"{len(channels)} channels for {len(self)} tokens.")
        self.holder.channels = list(channels)

