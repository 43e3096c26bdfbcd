"""A prompt with agentic context, as OpenAI-compatible servers (vLLM, OpenRouter) write one: a tool offered as
the bare function, an assistant turn with reasoning and a tool call whose arguments are JSON text and no
content, the tool's result without its call's id; the model's turn to answer comes next."""

import copy
import json
import sys
from pathlib import Path

RECORD = {
    "id": "weather-1",
    "tools": [{"name": "get_weather", "description": "The weather in a city now.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
    "messages": [
        {"role": "system", "content": "Answer with the tools you have."},
        {"role": "user", "content": "Is it raining in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "I should look the weather up.",
         "tool_calls": [{"id": "call_7", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "content": "{\"rain\": true, \"celsius\": 12}"},
    ],
}

# What the import stores: the conversation model's stored shape (Conversation.as_dict()).
STORED_MESSAGES = [
    {"role": "system", "content": "Answer with the tools you have."},
    {"role": "user", "content": "Is it raining in Paris?"},
    {"role": "assistant", "content": "", "reasoning": "I should look the weather up.",
     "tool_calls": [{"id": "call_7", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "{\"rain\": true, \"celsius\": 12}", "tool_call_id": "call_7", "name": "get_weather"},
]
STORED_TOOLS = [{"type": "function", "function": RECORD["tools"][0]}]

# What exports write, in the shape TRL and Hugging Face chat templates read (nulls left out).
TRAINING_MESSAGES = [
    {"role": "system", "content": "Answer with the tools you have."},
    {"role": "user", "content": "Is it raining in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "I should look the weather up.",
     "tool_calls": [{"id": "call_7", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"rain\": true, \"celsius\": 12}", "tool_call_id": "call_7", "name": "get_weather"},
]


def record() -> dict:
    return copy.deepcopy(RECORD)


# --- responses with reasoning and tool calls, on the character backend (test_operators, test_tool_runs) ----

UMBRELLA_PROMPT = [{"role": "user", "content": "Umbrella?"}]
REASONING_ANSWER = "<think>\nIt rains.\n</think>\n\nTake an umbrella."
TIME_PROMPT = [{"role": "user", "content": "What time is it in Tokyo?"}]
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")  # requirements/dev.txt installs it


def call_text(arguments: dict, name: str = "get_current_time") -> str:
    """A tool call as the response templates write one."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


TOKYO = call_text({"timezone": "Asia/Tokyo"})
