"""`qwen3`: the context as Qwen3's chat template renders it (the expected text below is what that
template gives for these conversations), and the partial response after it."""

import pytest

from dataplatform.conversations.model import Message
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.templates import FAMILIES

pytestmark = pytest.mark.model

TEMPLATE = FAMILIES["qwen3"]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def rendered(messages: list[dict], tools=None, partial: Message | None = None, *, backend) -> str:
    read = read_conversation(messages, tools)
    assert read.problems == []
    return backend.detokenize(TEMPLATE.render(read.conversation, partial, backend=backend).ids)


def test_no_system_turn_without_a_system_message_or_tools(local_backend):
    assert rendered([{"role": "user", "content": "Hi"}], backend=local_backend) == \
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_the_tools_go_into_the_system_turn_after_the_system_message(local_backend):
    assert rendered([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
                    [WEATHER], backend=local_backend) == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        '{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}\n</tools>\n\n'
        "For each function call, return a json object with function name and arguments within "
        '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
        '<args-json-object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n")


def test_an_agentic_loop_keeps_its_reasoning_and_earlier_turns_lose_theirs(local_backend):
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "reasoning": "A greeting."},  # before the last query
        {"role": "user", "content": "Weather in 巴黎 and Rome?"},
        {"role": "assistant", "content": "\nChecking.", "reasoning": "\nTwo calls.\n", "tool_calls": [
            {"id": "a", "function": {"name": "get_weather", "arguments": {"city": "巴黎"}}},
            {"id": "b", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "rain"},
        {"role": "assistant", "content": "", "tool_calls": [  # no reasoning, not the last: no think block
            {"id": "c", "function": {"name": "get_weather", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "error"},
    ]
    partial = Message(role="assistant", reasoning="Both known", content="")
    assert rendered(messages, partial=partial, backend=local_backend) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\nWeather in 巴黎 and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nTwo calls.\n</think>\n\nChecking.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "巴黎"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>"
        "<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": not json}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nerror\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\nBoth known")


def test_a_last_assistant_message_gets_a_think_block_even_without_reasoning(local_backend):
    assert rendered([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
                    backend=local_backend).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n<|im_start|>assistant\n")


def test_a_wrapped_tool_result_in_a_user_message_is_not_a_query(local_backend):
    text = rendered([{"role": "user", "content": "Go"}, {"role": "assistant", "content": "", "reasoning": "call"},
                     {"role": "user", "content": "<tool_response>\nok\n</tool_response>"}], backend=local_backend)
    assert "<think>\ncall\n</think>" in text  # still inside the loop that "Go" started
