"""onPanda's operators beyond a token correction, on the one-token-per-character scored_backend: corrections in
any channel, edit_selection, continue_generating, start_new_round, generate_new, edit_prompt, moving
around the tree, undo, and the reasoning budget. (Tool calls: test_tool_runs.py.)"""

import pytest

from annotate import corrections, services, streaming, turns
from annotate.models import Event, EventKind, Item, Node, NodeStatus, Origin
from dataplatform.errors import Missing, Refused

from ..doubles import EOS
from . import agentic
from .conftest import fake_rollout

ANSWER = agentic.REASONING_ANSWER
PROMPT = agentic.UMBRELLA_PROMPT


def annotator(members):
    return members["annotator"]


def test_the_root_knows_the_channel_of_every_token_and_the_message_they_spell(reasoning_session):
    root = reasoning_session.current_node
    assert root.message == {"role": "assistant", "content": "Take an umbrella.", "reasoning": "It rains.",
                            "finish_reason": "stop"}
    reasoning = [index for index, channel in enumerate(root.channels) if channel == "reasoning"]
    assert "".join(chr(root.token_ids[index]) for index in reasoning) == "It rains."
    assert root.context == PROMPT and root.round == 1 and root.tree == 1 and root.operator == "generate_new"


def test_a_correction_inside_the_reasoning_continues_the_reasoning(reasoning_session, members, scored_backend):
    root = reasoning_session.current_node
    position = ANSWER.index("rains")
    child = corrections.correct(session=reasoning_session, version=0, node_id=root.pk, position=position, text="snows",
                                actor=annotator(members))
    list(streaming.continue_node(node=child))
    child.refresh_from_db()
    # The model's next tokens (" and more.") land in the reasoning it was writing, which never closed.
    assert child.message["reasoning"] == "It snows and more."
    assert child.channels[position] == "reasoning" and child.finish_reason == "stop"
    event = Event.objects.get(node=child)
    assert event.kind == EventKind.CONTINUE_WITH_INPUT and event.payload["channel"] == "reasoning"


def test_the_reasoning_budget_closes_the_reasoning_and_the_model_answers(reasoning_session, members, scored_backend):
    config = services.config_for(reasoning_session.item.project)
    config.reasoning_budget = 12
    config.save()
    root = reasoning_session.current_node
    child = corrections.correct(session=reasoning_session, version=0, node_id=root.pk, position=ANSWER.index("rains"),
                                text="snows", actor=annotator(members))
    streamed = list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert child.message["reasoning"] == "It snows and"  # 12 reasoning tokens, one per character
    assert child.message["content"] == " and more."  # the model answered after the template closed it
    written = [step.text for step in streamed if step.origin == Origin.TEMPLATE]
    assert "".join(written) == "\n</think>\n\n"
    assert child.origins.count(Origin.TEMPLATE) == len("\n</think>\n\n")
    assert all(logprob is None for logprob, origin in zip(child.logprobs, child.origins, strict=True)
               if origin == Origin.TEMPLATE)


def test_streamed_tokens_carry_their_channel_and_settle_pending_ones(project, members, scored_backend):
    scored_backend.script = "<think>\nhm\n</think>\n\nyes"
    Item.objects.create(project=project, messages=PROMPT, source_sha256="b" * 64,
                        prompt_ids=scored_backend.chat_prompt_ids(PROMPT), rollout=fake_rollout([ord("x"), EOS]))
    session = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    child = corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=0,
                                token_id=ord("x") + 1000, actor=annotator(members))
    # A candidate that is not the script's start: the stream writes the script after it.
    steps = list(streaming.continue_node(node=child))
    child.refresh_from_db()
    final = dict(enumerate(child.channels))
    for step in steps:  # every channel the stream announced is final, or was pending and settled later
        later = [channel for settled in steps if settled.index > step.index for index, channel in settled.settled
                 if index == step.index]
        assert (later[-1] if later else step.channel) == final[step.index]


def test_edit_selection_keeps_the_rest_with_fresh_probabilities(reasoning_session, members, scored_backend):
    root = reasoning_session.current_node
    start = ANSWER.index("an umbrella")
    child = corrections.edit_selection(session=reasoning_session, version=0, node_id=root.pk, start=start,
                                       end=start + len("an"), text="one", actor=annotator(members))
    assert child.status == NodeStatus.COMPLETE and child.operator == EventKind.EDIT_SELECTION
    assert child.message["content"] == "Take one umbrella."
    typed = slice(start, start + 3)
    assert child.origins[typed] == ["typed"] * 3 and child.locked_until == start + 3
    kept = slice(start + 3, None)
    assert child.token_ids[kept] == root.token_ids[start + 2:]
    assert set(child.logprobs[kept]) == {-1.5}  # scored again after the new text
    assert child.top[start + 3][0] == [child.token_ids[start + 3], -1.5] and len(child.top[start + 3]) == 3
    assert Event.objects.get(node=child).payload["rejected_token_ids"] == root.token_ids[start:start + 2]


def test_edit_selection_refuses_a_span_outside_or_before_a_correction(reasoning_session, members):
    root = reasoning_session.current_node
    with pytest.raises(services.CorrectionRefused, match="not a span"):
        corrections.edit_selection(session=reasoning_session, version=0, node_id=root.pk, start=3, end=999, text="x",
                                   actor=annotator(members))


def test_continue_generating_gives_a_response_that_ran_out_another_budget(reasoning_session, members, scored_backend):
    config = services.config_for(reasoning_session.item.project)
    config.max_tokens = len(ANSWER) + 3
    config.save()
    root = reasoning_session.current_node
    with pytest.raises(services.CorrectionRefused, match="ran out of tokens"):
        corrections.continue_generating(session=reasoning_session, version=0, node_id=root.pk, actor=annotator(members))
    cut = corrections.correct(session=reasoning_session, version=0, node_id=root.pk, position=len(ANSWER) - 1, text="!",
                              actor=annotator(members))
    list(streaming.continue_node(node=cut))
    cut.refresh_from_db()
    assert cut.finish_reason == "length" and len(cut.token_ids) == config.max_tokens
    more = corrections.continue_generating(session=reasoning_session, version=1, node_id=cut.pk, actor=annotator(members))
    assert more.token_ids == cut.token_ids and more.status == NodeStatus.STREAMING
    list(streaming.continue_node(node=more))
    more.refresh_from_db()
    assert more.finish_reason == "stop" and more.token_ids[:len(cut.token_ids)] == cut.token_ids
    assert more.message["content"].startswith("Take an umbrella!")


def test_a_new_round_carries_the_earlier_rounds_as_context(reasoning_session, members, scored_backend):
    root = reasoning_session.current_node
    nxt = turns.start_new_round(session=reasoning_session, version=0, node_id=root.pk, text="And tomorrow?",
                                actor=annotator(members))
    assert nxt.parent_id == root.pk and nxt.round == 2 and nxt.tree == 1 and nxt.fork_index is None
    assert nxt.context == PROMPT + [
        {"role": "assistant", "content": "Take an umbrella.", "reasoning": "It rains."},
        {"role": "user", "content": "And tomorrow?"}]
    list(streaming.continue_node(node=nxt))
    nxt.refresh_from_db()
    assert nxt.message["content"] == " and more." and nxt.prompt_ids[-len("<assistant>"):] == scored_backend.tokenize(
        "<assistant>")
    with pytest.raises(services.AnnotationError, match="next message"):
        turns.start_new_round(session=reasoning_session, version=1, node_id=nxt.pk, text="  ", actor=annotator(members))


def test_generate_new_and_edit_prompt_start_trees_and_undo_goes_back(reasoning_session, members, scored_backend):
    root = reasoning_session.current_node
    again = turns.generate_new(session=reasoning_session, version=0, actor=annotator(members))
    assert again.parent_id is None and again.tree == 2 and again.context == PROMPT
    list(streaming.continue_node(node=again))
    edited = turns.edit_prompt(session=reasoning_session, version=1, messages=[{"role": "user", "content": "Coat?"}],
                               tools=None, actor=annotator(members))
    assert edited.tree == 3 and edited.context == [{"role": "user", "content": "Coat?"}]
    list(streaming.continue_node(node=edited))
    back = services.undo(session=reasoning_session, version=2, actor=annotator(members))
    assert back.current_node_id == again.pk  # where the annotator was when they edited the prompt
    back = services.undo(session=back, version=3, actor=annotator(members))
    assert back.current_node_id == root.pk
    with pytest.raises(services.AnnotationError, match="Nothing to undo"):
        services.undo(session=back, version=4, actor=annotator(members))


def test_edit_prompt_refuses_a_prompt_the_model_cannot_answer(reasoning_session, members):
    with pytest.raises(Refused, match=r"messages\[0\].role"):
        turns.edit_prompt(session=reasoning_session, version=0, messages=[{"role": "robot", "content": "hi"}], tools=None,
                          actor=annotator(members))
    with pytest.raises(Refused, match="end with a user message"):
        turns.edit_prompt(session=reasoning_session, version=0, messages=[{"role": "system", "content": "Be brief."}],
                          tools=None, actor=annotator(members))


def test_select_moves_to_any_node_of_the_session_and_only_of_it(reasoning_session, members, scored_backend):
    root = reasoning_session.current_node
    again = turns.generate_new(session=reasoning_session, version=0, actor=annotator(members))
    list(streaming.continue_node(node=again))
    moved = services.select_node(session=reasoning_session, version=1, node_id=root.pk, actor=annotator(members))
    assert moved.current_node_id == root.pk and moved.version == 2
    assert Event.objects.filter(kind=EventKind.SELECT_NODE).get().payload == {"from_node": again.pk}
    with pytest.raises(Missing):
        services.select_node(session=moved, version=2, node_id=Node.objects.order_by("-pk").first().pk + 1,
                             actor=annotator(members))
