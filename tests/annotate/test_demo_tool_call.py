"""The demo's tool prompt answers with a call of the time server's tool that waits for the annotator (annotate/demo.py):
the call is written for the demo, each of its tokens scored by the real model, and approved it runs on the time
server; an item someone already claimed keeps the model's own answer."""

import math

import pytest

from annotate import demo, services, turns
from annotate.models import Item
from annotate.nodes import template_of
from annotate.presenting import tool_calls_to_decide
from annotate.prompts import render_prompt, stored_prompt

from .conftest import fake_rollout

pytestmark = [pytest.mark.django_db, pytest.mark.model]


@pytest.fixture
def tool_item(project, members, local_backend, time_server):
    """The demo's prompts imported as bootstrap_demo imports them; the tool prompt answered (a stand-in for the
    model's own answer, on the prompt ids the rollout job renders), the others left unanswered, so that the next
    claim is the tool prompt's."""
    demo.prepare(project=project, user=members["admin"])
    item = Item.objects.get(project=project, external_id=demo.TOOL_ITEM)
    template = template_of(services.config_for(project), local_backend)
    item.prompt_ids = render_prompt(local_backend, stored_prompt(item.messages, item.tools), template)
    item.rollout = fake_rollout(local_backend.tokenize("It is morning in Tokyo.") + [2])
    item.save()
    return item


def test_the_tool_prompt_answers_with_a_call_waiting_for_approval(project, members, tool_item, local_backend):
    line = demo.finish(project=project, user=members["admin"])
    assert demo.TOOL_ITEM in line and "get_current_time" in line
    tool_item.refresh_from_db()
    assert "written_for_demo" in tool_item.meta  # the item says the model did not choose the call

    claim = services.claim_next(project=project, annotator=members["annotator"])
    assert claim.item_id == tool_item.pk
    root = services.open_session(claim=claim).current_node
    calls = tool_calls_to_decide(root)
    assert [(call["name"], "Asia/Tokyo" in call["arguments"]) for call in calls] == [("get_current_time", True)]

    # The probabilities are the model's: the first token's logprob is what a stream after the same prompt gives it.
    rollout = tool_item.rollout
    first = next(iter(local_backend.stream(tool_item.prompt_ids, max_tokens=1, temperature=0, seed=0,
                                           top_k=len(rollout["top"][0]))))
    streamed = dict(first.top)
    assert rollout["token_ids"][0] in streamed
    assert math.isclose(rollout["logprobs"][0], streamed[rollout["token_ids"][0]], abs_tol=1e-3)
    assert all(top[0][1] >= logprob for top, logprob in zip(rollout["top"], rollout["logprobs"], strict=True))

    assert demo.finish(project=project, user=members["admin"]) is None  # written once
    assert Item.objects.get(pk=tool_item.pk).rollout == rollout


def test_approved_the_call_runs_on_the_time_server(project, members, tool_item):
    demo.finish(project=project, user=members["admin"])
    assert services.config_for(project).tool_servers == [demo.TIME_SERVER]  # prepare allow-listed it
    session = services.open_session(claim=services.claim_next(project=project, annotator=members["admin"]))
    made = turns.run_tool_calls(session=session, version=session.version, node_id=session.current_node_id,
                                actor=members["admin"])
    [result] = made.results
    assert result["server"] == demo.TIME_SERVER and not result["is_error"]
    assert "Asia/Tokyo" in result["content"]
    assert made.node.context[-1]["role"] == "tool"  # the next turn answers the result


def test_an_item_already_claimed_keeps_the_models_answer(project, members, tool_item):
    session = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    before = Item.objects.get(pk=tool_item.pk).rollout
    line = demo.finish(project=project, user=members["admin"])
    assert "keeps the model's own answer" in line
    assert Item.objects.get(pk=tool_item.pk).rollout == before
    assert tool_calls_to_decide(session.current_node) == []
