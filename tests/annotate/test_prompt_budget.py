"""The token budget of a node, checked by the operator that makes it (annotate/budget.py): a prompt over the
project's max_prompt_tokens, or over the model's context with the tokens its stream may write, is refused at the
write (PromptTooLong, 400), naming what made it long, and nothing is written. Each case is a few hundred
characters against a tiny budget, on the one-token-per-character backend."""

import pytest
from django.db import connection

from annotate import corrections, services, streaming, turns
from annotate.models import Event, Item, Node, NodeStatus, Session
from dataplatform import tools as mcp
from dataplatform.inference import PromptTooLong
from dataplatform.tools.client import ToolResult
from dataplatform.tools.schema import Tool

from ..doubles import CharBackend
from .conftest import session_answering

pytestmark = pytest.mark.django_db


def small_budget(project, tokens: int):
    config = services.config_for(project)
    config.max_prompt_tokens = tokens
    config.save()
    return config


def unchanged(session: Session, nodes: int, events: int) -> bool:
    session.refresh_from_db()
    return session.version == 0 and Node.objects.count() == nodes and Event.objects.count() == events


def test_a_long_new_round_is_refused_at_the_write_naming_the_text(project, members, session, chars):
    small_budget(project, 100)
    nodes, events = Node.objects.count(), Event.objects.count()
    with pytest.raises(PromptTooLong) as refused:
        turns.start_new_round(session=session, version=0, node_id=session.current_node_id, text="A" * 200,
                              actor=members["annotator"])
    assert refused.value.field == "text" and refused.value.status == 400
    assert "over this project's limit of 100 (max_prompt_tokens" in refused.value.detail
    assert "the longest part is the user message messages[2]: 200 tokens" in refused.value.detail
    assert unchanged(session, nodes, events)


def test_a_long_prompt_edit_names_the_message_and_many_rounds_are_counted(project, members, session, chars):
    small_budget(project, 150)
    nodes, events = Node.objects.count(), Event.objects.count()
    messages = [{"role": "system", "content": "Be brief."}]
    for n in range(10):
        messages += [{"role": "user", "content": f"Question {n}?"}, {"role": "assistant", "content": f"Answer {n}."}]
    messages.append({"role": "user", "content": "Why?" + "B" * 60})
    with pytest.raises(PromptTooLong) as refused:
        turns.edit_prompt(session=session, version=0, messages=messages, tools=None, actor=members["annotator"])
    assert refused.value.field == "messages"
    assert "It has 22 messages in 11 rounds; the longest part is the user message messages[21]: 64 tokens." \
        in refused.value.detail
    assert unchanged(session, nodes, events)


def test_a_long_typed_correction_is_refused_naming_the_text(project, members, session, chars):
    small_budget(project, 50)
    nodes = Node.objects.count()
    with pytest.raises(PromptTooLong) as refused:
        corrections.correct(session=session, version=0, node_id=session.current_node_id, position=2,
                            text="C" * 80, actor=members["annotator"])
    assert refused.value.field == "text" and refused.value.tokens == 3 + 2 + 80
    assert "the text typed, 80" in refused.value.detail
    assert unchanged(session, nodes, 1)
    # A stop (which the model does not continue) is never over budget.
    small_budget(project, 1)
    stopped = corrections.correct(session=session, version=0, node_id=session.current_node_id, position=1,
                                  stop=True, actor=members["annotator"])
    assert stopped.status == NodeStatus.COMPLETE


def test_continuing_a_long_response_and_rescoring_after_an_edit_are_refused_before_the_model(
        project, members, session, scored_backend, monkeypatch):
    Node.objects.filter(pk=session.current_node_id).update(finish_reason="length")
    session.refresh_from_db()
    small_budget(project, 8)  # the prompt (3) and the response (6) read 9
    with pytest.raises(PromptTooLong, match="the response before the change, 6"):
        corrections.continue_generating(session=session, version=0, node_id=session.current_node_id,
                                        actor=members["annotator"])
    monkeypatch.setattr(scored_backend, "prompt_logprobs", lambda *a, **k: pytest.fail("the model scored it"))
    with pytest.raises(PromptTooLong, match="the response after the edited span, 4") as refused:
        corrections.edit_selection(session=session, version=0, node_id=session.current_node_id, start=1, end=2,
                                   text="xyz", actor=members["annotator"])
    assert refused.value.tokens == 3 + 1 + 3 + 4
    assert unchanged(session, 1, 1)


def test_the_models_context_counts_the_tokens_the_stream_may_write(project, members, session, chars, settings):
    chars.context_length = 40
    settings.ANNOTATE_STREAM_MAX_TOKENS = 30
    config = services.config_for(project)
    config.max_tokens = 50
    config.save()
    with pytest.raises(PromptTooLong, match="with 30 for the response that makes 41, over the model's context of "
                                            "40 tokens") as refused:
        corrections.correct(session=session, version=0, node_id=session.current_node_id, position=4,
                            text="abcd", actor=members["annotator"])
    assert refused.value.field == "text"  # the typed text is the longest part of it
    settings.ANNOTATE_STREAM_MAX_TOKENS = 20
    child = corrections.correct(session=session, version=0, node_id=session.current_node_id, position=4,
                                text="abcd", actor=members["annotator"])
    assert child.status == NodeStatus.STREAMING


@pytest.fixture
def fake_time_tool(monkeypatch, settings):
    """The time server's tool, answering `answer["text"]`, with no server started."""
    answer = {"text": "{}"}
    tool = Tool("time", "get_current_time", "", {"type": "object", "properties": {"timezone": {"type": "string"}}})
    monkeypatch.setattr(mcp, "list_tools", lambda servers: [tool])
    monkeypatch.setattr(mcp, "call_tool", lambda server, name, arguments: ToolResult(
        server=server, name=name, text=answer["text"], is_error=False, structured=None, latency_ms=1.0))
    return answer


def test_a_long_tool_result_is_refused_naming_its_call(project, members, fake_time_tool, use_backend):
    backend = CharBackend()
    use_backend(backend)
    session = session_answering(project, members, backend)
    small_budget(project, 300)
    fake_time_tool["text"] = "T" * 400
    nodes, events = Node.objects.count(), Event.objects.count()
    with pytest.raises(PromptTooLong) as refused:
        turns.run_tool_calls(session=session, version=0, node_id=session.current_node_id,
                             actor=members["annotator"])
    assert refused.value.field == "decisions[0]"
    assert "the tool result of call" in refused.value.detail and "(get_current_time, messages[2]): 400 tokens" \
        in refused.value.detail
    assert unchanged(session, nodes, events)


def test_long_edited_arguments_are_refused_before_the_tool_runs(project, members, fake_time_tool, monkeypatch, use_backend):
    backend = CharBackend()
    use_backend(backend)
    session = session_answering(project, members, backend)
    small_budget(project, 300)
    monkeypatch.setattr(mcp, "call_tool", lambda *args: pytest.fail("the tool ran"))
    with pytest.raises(PromptTooLong) as refused:
        turns.run_tool_calls(session=session, version=0, node_id=session.current_node_id, actor=members["annotator"],
                             decisions=[{"action": "edit", "arguments": {"timezone": "A" * 2_000}}])
    assert refused.value.field == "decisions[0].arguments" and "alone are 2,016 tokens" in refused.value.detail
    assert unchanged(session, 1, 1)


def test_the_prompt_is_rendered_outside_the_sessions_lock(project, members, session, chars, monkeypatch):
    """Tokenizing is a backend call (HTTP with vLLM): never inside the transaction that holds the session."""
    depth = len(connection.atomic_blocks)  # the test's own transaction
    seen = []
    tokenize, chat = chars.tokenize, chars.chat_prompt_ids
    monkeypatch.setattr(chars, "tokenize", lambda text: seen.append(len(connection.atomic_blocks)) or tokenize(text))
    monkeypatch.setattr(chars, "chat_prompt_ids", lambda *a, **k: seen.append(len(connection.atomic_blocks))
                        or chat(*a, **k))
    node = corrections.correct(session=session, version=0, node_id=session.current_node_id, position=0,
                               text="x<|stop|>", actor=members["annotator"])
    turns.start_new_round(session=session, version=1, node_id=node.pk, text="More?", actor=members["annotator"])
    assert seen and set(seen) == {depth}


def test_a_node_over_budget_made_elsewhere_is_refused_when_it_streams(project, members, session, chars):
    child = corrections.correct(session=session, version=0, node_id=session.current_node_id, position=2,
                                text="abc", actor=members["annotator"])
    small_budget(project, 4)  # lowered after the node was made (or the node came from an import)
    with pytest.raises(PromptTooLong, match="over this project's limit of 4"):
        list(streaming.continue_node(node=child))
    child.refresh_from_db()
    assert child.status == NodeStatus.STREAMING and child.stream_lease is None and len(child.token_ids) == 5


def test_rollouts_leave_an_item_over_budget_unanswered_and_answer_the_others(project, chars):
    small_budget(project, 40)
    short = Item.objects.create(project=project, messages=[{"role": "user", "content": "Hi"}], source_sha256="1" * 64)
    long = Item.objects.create(project=project, external_id="essay", messages=[{"role": "user", "content": "E" * 60}],
                               source_sha256="2" * 64)

    class Progress:
        job = type("Job", (), {"progress_total": 0})()

        def set_total(self, total):
            self.job.progress_total = total

        def report(self, done, **kwargs):
            self.done = done

    progress = Progress()
    result = services.generate_rollouts(project=project, progress=progress)
    assert result["answered"] == 1 and result["refused"] == 1 and progress.done == 2
    assert result["refusals"][0]["item"] == "essay" and "over this project's limit of 40" in \
        result["refusals"][0]["error"]
    short.refresh_from_db(), long.refresh_from_db()
    assert short.rollout is not None and long.rollout is None and long.prompt_ids is None


def test_a_message_too_long_in_characters_is_refused_without_tokenizing_it(project, members, session, chars,
                                                                          monkeypatch):
    chars.max_token_bytes = 2  # a text of n characters is then at least n / 2 tokens
    small_budget(project, 100)
    monkeypatch.setattr(chars, "tokenize", lambda text: pytest.fail("tokenized"))
    monkeypatch.setattr(chars, "chat_prompt_ids", lambda *a, **k: pytest.fail("rendered"))
    with pytest.raises(PromptTooLong) as refused:
        turns.edit_prompt(session=session, version=0, messages=[{"role": "user", "content": "A" * 201}], tools=None,
                          actor=members["annotator"])
    assert refused.value.field == "messages" and refused.value.tokens == 101
    assert refused.value.detail == ("The prompt is at least 101 tokens, over this project's limit of 100 "
                                    "(max_prompt_tokens in its settings). Alone, the user message messages[0] is "
                                    "201 characters: at least 101 tokens.")
    assert unchanged(session, 1, 1)


def test_many_texts_each_short_are_counted_together_reasoning_and_arguments_included(project, members, session,
                                                                                     chars, monkeypatch):
    """No text alone is over the budget; together (reasoning and a call's arguments among them) they are."""
    chars.max_token_bytes = 2
    small_budget(project, 100)
    monkeypatch.setattr(chars, "tokenize", lambda text: pytest.fail("tokenized"))
    messages = [{"role": "user", "content": "A" * 60},
                {"role": "assistant", "content": "", "reasoning": "R" * 90, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": "' + "x" * 40 + '"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "T" * 20},
                {"role": "user", "content": "B" * 10}]
    with pytest.raises(PromptTooLong) as refused:
        turns.edit_prompt(session=session, version=0, messages=messages, tools=None, actor=members["annotator"])
    assert refused.value.field == "messages" and refused.value.tokens == 115  # 229 characters, 2 bytes a token
    assert "Alone, the reasoning of messages[1] is 90 characters: at least 45 tokens." in refused.value.detail
    assert unchanged(session, 1, 1)


@pytest.mark.model
def test_the_attack_of_issue_37_is_a_400_at_the_write_on_the_real_model(project, members, session, local_backend,
                                                                         monkeypatch, use_backend):
    """A prompt edit of 400,000 characters (the issue's 2,000,000 took the web worker to 6 GB for 18 minutes):
    refused at the write, untokenized, with the project's default budget (4,096 tokens)."""
    from ..conftest import api_client_for

    use_backend(local_backend)
    monkeypatch.setattr(local_backend, "chat_prompt_ids", lambda *a, **k: pytest.fail("rendered"))
    assert local_backend.max_token_bytes < 100
    answer = api_client_for(members["annotator"]).post(
        f"/api/v1/sessions/{session.pk}/edit-prompt/",
        {"version": 0, "messages": [{"role": "user", "content": '{"timezone": "' + "A" * 400_000 + '"}'}]},
        format="json")
    assert answer.status_code == 400
    (message,) = answer.json()["messages"]
    assert "over this project's limit of 4,096" in message and "400,016 characters" in message
    assert unchanged(session, 1, 1)


def test_the_setting_is_bounded_by_the_serializer():
    from annotate.serializers import ConfigSerializer

    for value, ok in [(0, False), (1, True), (1_048_576, True), (1_048_577, False)]:
        assert ConfigSerializer(data={"max_prompt_tokens": value}, partial=True).is_valid() is ok
