"""A node's six token lists stay in step whatever is done to them through TokenSequence (annotate/tokens.py):
random sequences of operations against a plain list of tokens as the oracle."""

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from annotate.models import Node, Origin
from annotate.tokens import FIELDS, Token, TokenSequence, TokensOutOfStep
from dataplatform.conversations.templates import PENDING

token_ids = st.integers(min_value=0, max_value=50_000)
logprobs = st.none() | st.floats(min_value=-30, max_value=0)
tops = st.lists(st.tuples(token_ids, st.floats(min_value=-30, max_value=0)).map(list), max_size=3)
origins = st.sampled_from(list(Origin.values))
ranks = st.none() | st.integers(min_value=1, max_value=20)
channels = st.sampled_from(["content", "reasoning", "tool_arguments", "marker", PENDING])
tokens = st.builds(Token, token_ids, logprobs, tops, origins, ranks, channels)


def as_lists(sequence: TokenSequence) -> dict[str, list]:
    return {name: list(getattr(sequence.holder, name)) for name in FIELDS}


class Tokens(RuleBasedStateMachine):
    """The node's tokens, and beside them the oracle: a list of Token."""

    def __init__(self):
        super().__init__()
        self.node = Node()
        self.tokens = TokenSequence(self.node)
        self.oracle: list[Token] = []

    @rule(token=tokens)
    def append(self, token):
        self.tokens.append(token.token_id, origin=token.origin, logprob=token.logprob, top=token.top,
                           rank=token.candidate_rank, channel=token.channel)
        self.oracle.append(token)

    @rule(ids=st.lists(token_ids, max_size=5), origin=origins, rank=ranks, data=st.data())
    def extend(self, ids, origin, rank, data):
        given = {name: data.draw(st.none() | st.lists(values, min_size=len(ids), max_size=len(ids)), label=name)
                 for name, values in (("logprobs", logprobs), ("tops", tops), ("channels", channels))}
        self.tokens.extend(ids, origin=origin, rank=rank, **given)
        for index, token_id in enumerate(ids):
            self.oracle.append(Token(
                token_id, given["logprobs"][index] if given["logprobs"] else None,
                given["tops"][index] if given["tops"] else [], origin, rank,
                given["channels"][index] if given["channels"] else PENDING))

    @rule(more=st.lists(tokens, max_size=4))
    def extend_with(self, more):
        other = TokenSequence()
        for token in more:
            other.append(token.token_id, origin=token.origin, logprob=token.logprob, top=token.top,
                         rank=token.candidate_rank, channel=token.channel)
        self.tokens.extend_with(other)
        self.oracle.extend(more)

    @rule(data=st.data())
    def cut(self, data):
        """A fork: the node keeps its first n tokens (prefix, then written back)."""
        stop = data.draw(st.integers(min_value=0, max_value=len(self.oracle)), label="stop")
        self.tokens.prefix(stop).write_to(self.node)
        self.oracle = self.oracle[:stop]

    @rule(start=st.integers(min_value=-8, max_value=12), stop=st.none() | st.integers(min_value=-8, max_value=12))
    def slice_agrees_with_a_list_slice(self, start, stop):
        cut = self.tokens.slice(start, stop)
        assert list(cut) == self.oracle[start:stop]
        assert cut.token_ids == [token.token_id for token in self.oracle[start:stop]]
        cut.append(1, origin=Origin.TYPED)  # a copy: the node does not change
        assert list(self.tokens) == self.oracle

    @precondition(lambda self: self.oracle)
    @rule(data=st.data(), facts=st.fixed_dictionaries({}, optional={
        "logprob": logprobs, "top": tops, "origin": origins, "candidate_rank": ranks, "channel": channels}))
    def set(self, data, facts):
        start = data.draw(st.integers(min_value=0, max_value=len(self.oracle) - 1), label="start")
        stop = data.draw(st.none() | st.integers(min_value=start, max_value=len(self.oracle)), label="stop")
        self.tokens.set(start, stop, **facts)
        for position in range(start, start + 1 if stop is None else stop):
            self.oracle[position] = self.oracle[position]._replace(**facts)

    @rule(data=st.data())
    def set_channels(self, data):
        read = data.draw(st.lists(channels, min_size=len(self.oracle), max_size=len(self.oracle)), label="channels")
        self.tokens.set_channels(read)
        self.oracle = [token._replace(channel=channel) for token, channel in zip(self.oracle, read, strict=True)]

    @rule(data=st.data())
    def adopt_a_parents_prefix(self, data):
        stop = data.draw(st.integers(min_value=0, max_value=len(self.oracle)), label="stop")
        parent = [token._replace(logprob=data.draw(logprobs), origin=data.draw(origins), channel="reasoning")
                  for token in self.oracle[:stop]]
        source = TokenSequence()
        for token in parent:
            source.append(token.token_id, origin=token.origin, logprob=token.logprob, top=token.top,
                          rank=token.candidate_rank, channel=token.channel)
        self.tokens.adopt(source, stop)
        self.oracle[:stop] = [token._replace(channel=mine.channel)
                              for token, mine in zip(parent, self.oracle, strict=False)]

    @rule(extra=st.integers(min_value=1, max_value=3), which=st.sampled_from(["logprobs", "tops", "channels"]),
          count=st.integers(min_value=0, max_value=3))
    def a_refused_change_changes_nothing(self, extra, which, count):
        before = as_lists(self.tokens)
        with pytest.raises(TokensOutOfStep):
            self.tokens.extend([7] * count, origin=Origin.MODEL, **{which: [None] * (count + extra)})
        with pytest.raises(TokensOutOfStep):
            self.tokens.set_channels(["content"] * (len(self.oracle) + extra))
        with pytest.raises(IndexError):
            self.tokens.set(len(self.oracle), len(self.oracle) + extra, origin=Origin.TYPED)
        assert as_lists(self.tokens) == before

    @invariant()
    def the_lists_are_in_step_and_hold_the_oracle(self):
        lengths = {name: len(getattr(self.node, name)) for name in FIELDS}
        assert set(lengths.values()) == {len(self.oracle)}, lengths
        TokenSequence(self.node)  # its own check agrees
        assert list(self.tokens) == self.oracle
        assert [self.tokens[index] for index in range(len(self.oracle))] == self.oracle
        assert self.node.token_ids == [token.token_id for token in self.oracle]


Tokens.TestCase.settings = settings(max_examples=150, stateful_step_count=25, deadline=None, derandomize=True,
                                    database=None, suppress_health_check=[HealthCheck.too_slow])
test_no_operation_leaves_the_lists_out_of_step = Tokens.TestCase


def test_lists_out_of_step_are_refused_naming_each_length():
    node = Node(pk=12, token_ids=[1, 2], logprobs=[None, None], top=[[], []], origins=["model"] * 2,
                candidate_ranks=[None], channels=["content"] * 2)
    with pytest.raises(TokensOutOfStep, match=r"node 12 .*token_ids: 2, .*candidate_ranks: 1"):
        TokenSequence(node)


def test_channels_the_template_has_not_read_yet_are_pending():
    """A stream that stopped between a token and its parse stored fewer channels than tokens."""
    node = Node(token_ids=[1, 2, 3], logprobs=[None] * 3, top=[[]] * 3, origins=["model"] * 3,
                candidate_ranks=[None] * 3, channels=["content"])
    assert [token.channel for token in TokenSequence(node)] == ["content", PENDING, PENDING]
    assert node.channels == ["content", PENDING, PENDING]
    node.channels = ["content"] * 4
    with pytest.raises(TokensOutOfStep, match="channels: 4"):
        TokenSequence(node)


def test_adopt_refuses_a_prefix_of_other_tokens():
    mine, theirs = TokenSequence(), TokenSequence()
    mine.extend([1, 2, 3], origin=Origin.TYPED)
    theirs.extend([1, 5, 3], origin=Origin.MODEL)
    with pytest.raises(ValueError, match="not the same"):
        mine.adopt(theirs, 2)
    mine.adopt(theirs, 1)
    assert [token.origin for token in mine] == [Origin.MODEL, Origin.TYPED, Origin.TYPED]
