"""`chatml-think`, the embedded SmolLM2's family: what SmolLM2's own template renders, rendered the same,
token for token; reasoning, tool calls and tools in the documented conventions; a partial turn left
open exactly where it stops."""

import pytest

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.templates import FAMILIES

from ..inference.model_servers import SMOLLM2_TEMPLATE

pytestmark = pytest.mark.model

TEMPLATE = FAMILIES["chatml-think"]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city, 天气",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def conversation(messages: list[dict], tools=None) -> Conversation:
    read = read_conversation(messages, tools)
    assert read.problems == []
    return read.conversation


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "Hi 👋"}],  # no system message: the model's default one
    [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "×3?"},
     {"role": "system", "content": "Be brief."}],
    [{"role": "user", "content": "Files?"}, {"role": "assistant", "content": ""},
     {"role": "tool", "content": "a.txt\nb.txt"}],  # a tool result: a turn of its own, as SmolLM2 renders it
])
def test_what_smollm2s_own_template_renders_is_rendered_the_same_token_for_token(messages, local_backend):
    # SmolLM2's template as released (the converted folder now carries this family's own, which renders more).
    expected = local_backend.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                           return_dict=False, chat_template=SMOLLM2_TEMPLATE)
    assert TEMPLATE.render(conversation(messages), None, backend=local_backend).ids == list(expected)


def test_tools_reasoning_and_calls_in_the_documented_conventions(local_backend):
    conv = conversation([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning": "Use the tool.",
         "tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ], tools=[WEATHER])
    text = local_backend.detokenize(TEMPLATE.render(conv, None, backend=local_backend).ids)
    system = text[:text.index("<|im_end|>")]
    assert system.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                             "Hugging Face\n\n# Tools\n")
    # The schema as JSON, its keys in the order the database keeps them (reading.in_stored_order).
    assert ('<tools>\n{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", '
            '"properties": {"city": {"type": "string"}}}, "description": "Weather of a city, 天气"}}\n</tools>') in system
    assert text[len(system):] == (
        "<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        '<|im_start|>assistant\n<think>\nUse the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>tool\nsunny<|im_end|>\n<|im_start|>assistant\n")


def test_an_earlier_call_writes_its_arguments_as_a_chat_template_writes_them_from_the_training_shape(local_backend):
    # An object as `tojson` writes it (the model's own text whenever it is that already), other text as it is.
    conv = conversation([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "function": {"name": "f", "arguments": '{"city":"\\u5df4\\u9ece"}'}},
            {"id": "b", "function": {"name": "f", "arguments": '{"city": "Rome"}'}},
            {"id": "c", "function": {"name": "f", "arguments": '{"city": "Ly'}}]},
    ])
    text = local_backend.detokenize(TEMPLATE.render(conv, None, backend=local_backend).ids)
    assert ('{"name": "f", "arguments": {"city": "巴黎"}}\n</tool_call>\n<tool_call>\n{"name": "f", "arguments": '
            '{"city": "Rome"}}\n</tool_call>\n<tool_call>\n{"name": "f", "arguments": {"city": "Ly}\n</tool_call>') in text


def response(partial: Message, backend) -> str:
    prompt = TEMPLATE.render(Conversation(messages=(Message(role="user", content="Go"),)), partial, backend=backend)
    assert backend.detokenize(prompt.ids[:prompt.response_start]).endswith("<|im_start|>assistant\n")
    return backend.detokenize(prompt.response_ids)


def test_unfinished_reasoning_stays_open(local_backend):
    assert response(Message(role="assistant", reasoning="First, 巴"), local_backend) == "<think>\nFirst, 巴"


def test_reasoning_with_content_after_it_is_closed(local_backend):
    assert response(Message(role="assistant", reasoning="Easy.", content="It is"), local_backend) == \
           "<think>\nEasy.\n</think>\n\nIt is"


def test_the_last_call_of_a_partial_message_stays_open_and_earlier_ones_are_closed(local_backend):
    partial = Message(role="assistant", tool_calls=(ToolCall(id="a", name="ls", arguments="{}"),
                                                    ToolCall(id="b", name="cat", arguments='{"path": "a.')))
    assert response(partial, local_backend) == ('<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>\n'
                                                '<tool_call>\n{"name": "cat", "arguments": {"path": "a.')


def test_a_finished_message_ends_with_the_end_of_turn_token(local_backend):
    finished = TEMPLATE.render(Conversation(messages=(Message(role="user", content="Go"),)),
                               Message(role="assistant", content="Done.", finish_reason="stop"), backend=local_backend)
    assert finished.ids[-1] in local_backend.eos_token_ids
    assert local_backend.detokenize(finished.response_ids) == "Done.<|im_end|>"
