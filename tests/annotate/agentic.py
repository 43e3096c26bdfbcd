"""A prompt with agentic context, as OpenAI-compatible servers (vLLM, OpenRouter) write one: a tool offered as
the bare function, an assistant turn with reasoning and a tool call whose arguments are JSON text and no
content, the tool's result without its call's id; the model's turn to answer comes next."""

import copy

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
