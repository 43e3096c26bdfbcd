"""`generic`: the model's own chat template. On the embedded tokenizer it renders a conversation exactly
as `apply_chat_template` does, continues a partial message with `continue_final_message`, and refuses a
template that would continue from a prefix nobody saw."""

import pytest

from dataplatform.conversations.model import Message, ToolCall
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.templates import FAMILIES
from dataplatform.errors import Refused

pytestmark = pytest.mark.model

TEMPLATE = FAMILIES["generic"]
CONVERSATIONS = [
    ([{"role": "user", "content": "Hi 👋"}], None),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello", "reasoning": "greet"}, {"role": "user", "content": "天气?"}], None),
    ([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "function": {"name": "get_weather",
                                                                                    "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "a", "content": "sunny"}],
     [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]),
]


def read(messages, tools):
    result = read_conversation(messages, tools)
    assert result.problems == []
    return result.conversation


@pytest.mark.parametrize(("messages", "tools"), CONVERSATIONS)
def test_a_complete_conversation_renders_as_apply_chat_template_token_for_token(messages, tools, local_backend):
    conversation = read(messages, tools)
    expected = local_backend.tokenizer.apply_chat_template(conversation.for_training(), tools=tools,
                                                           add_generation_prompt=True, tokenize=True,
                                                           return_dict=False)
    prompt = TEMPLATE.render(conversation, None, backend=local_backend)
    assert prompt.ids == list(expected) and prompt.response_ids == []


@pytest.mark.parametrize(("messages", "tools"), CONVERSATIONS)
def test_a_finished_last_message_renders_as_apply_chat_template_up_to_its_end_token(messages, tools, local_backend):
    conversation = read(messages, tools)
    answer = Message(role="assistant", content="Sunny in Paris.", finish_reason="stop")
    expected = list(local_backend.tokenizer.apply_chat_template(
        [*conversation.for_training(), answer.for_training()], tools=tools, tokenize=True, return_dict=False))
    ids = TEMPLATE.render(conversation, answer, backend=local_backend).ids
    assert expected[:len(ids)] == ids and local_backend.detokenize(expected[len(ids):]) == "\n"


def test_a_partial_message_continues_in_the_markers_layout(local_backend):
    conversation = read(*CONVERSATIONS[0])
    partial = Message(role="assistant", reasoning="Greeting 👋", content="Hel",
                      tool_calls=(ToolCall(id="call_0", name="wave", arguments='{"times": '),))
    prompt = TEMPLATE.render(conversation, partial, backend=local_backend)
    assert prompt.ids[:prompt.response_start] == TEMPLATE.render(conversation, None, backend=local_backend).ids
    assert local_backend.detokenize(prompt.response_ids) == (
        '<think>\nGreeting 👋\n</think>\n\nHel\n<tool_call>\n{"name": "wave", "arguments": {"times": ')
    assert TEMPLATE.parse(prompt.response_ids, backend=local_backend, finish_reason="length").message == \
           Message(role="assistant", reasoning="Greeting 👋", content="Hel", tool_calls=partial.tool_calls,
                   finish_reason="length")


class StrippingTemplate:
    """The embedded backend behind a chat template that trims the messages it renders."""

    def __init__(self, backend):
        self.backend = backend
        self.model_id = backend.model_id

    def chat_prompt_ids(self, messages, *, tools=None, continue_final_message=False):
        template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
        return list(self.backend.tokenizer.apply_chat_template(
            messages, chat_template=template, add_generation_prompt=not continue_final_message,
            continue_final_message=continue_final_message, tokenize=True, return_dict=False))

    def detokenize(self, ids):
        return self.backend.detokenize(ids)


def test_a_template_that_changes_the_partial_text_is_refused(local_backend):
    backend = StrippingTemplate(local_backend)
    with pytest.raises(Refused, match="cannot be written exactly"):
        TEMPLATE.render(read(*CONVERSATIONS[0]), Message(role="assistant", content="  Well, "), backend=backend)
