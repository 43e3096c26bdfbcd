"""Agentic rollouts of the embedded model, for tests and benches that need reasoning and a tool call.

The embedded 135M model does not write `<think>` or a `<tool_call>` on its own, so the rollout is the
model's own scoring of a fixed text (prompt logprobs): every token keeps the probability and the top-k
the model really gives it after the rendered prompt, and the response template reads the channels.

    item = agentic_item(project, backend, tools=time_tools())
    rollout = scored_rollout(backend, prompt_ids, text, top_k=5, template=...)
"""

import hashlib
import json

from annotate.models import Item
from annotate.nodes import template_of
from annotate.prompts import render_prompt, stored_prompt
from annotate.services import config_for

PROMPT = [{"role": "user", "content": "What time is it in Tokyo?"}]
REASONING = "The user wants the time in Tokyo. I will call the tool."
CALL = {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
TEXT = f"<think>\n{REASONING}\n</think>\n\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>"
END_OF_TURN = "<|im_end|>"


def time_tools() -> list[dict]:
    """The time server's `get_current_time`, as a conversation's `tools` carries it (the server must be on
    settings.MCP_SERVERS as "time")."""
    from dataplatform import tools as mcp

    listed = mcp.list_tools(["time"])
    return [tool.as_openai() for tool in listed if tool.name == "get_current_time"]


def response_ids(backend, text: str = TEXT) -> list[int]:
    """The response's token ids: the text, then the end of the turn."""
    return backend.tokenize(text) + backend.tokenize(END_OF_TURN)


def scored_rollout(backend, prompt_ids: list[int], ids: list[int], *, template, top_k: int) -> dict:
    """An item's rollout (services.generate_rollouts' shape) for response `ids` after `prompt_ids`, scored by
    the model: each token's logprob and the top-k at its position, the channels and message parsed."""
    scores = backend.prompt_logprobs(prompt_ids + ids, top_k=top_k)[len(prompt_ids):]
    parsed = template.parse(ids, backend=backend, finish_reason="stop")
    return {
        "token_ids": ids,
        "logprobs": [score[token_id] for token_id, score in zip(ids, scores, strict=True)],
        "top": [sorted(([int(t), lp] for t, lp in score.items()), key=lambda pair: -pair[1])[:top_k]
                for score in scores],
        "finish_reason": "stop",
        "model_id": backend.model_id,
        "seed": 0,
        "channels": parsed.channels,
        "message": parsed.message.as_dict(),
    }


def unscored_rollout(backend, ids: list[int], *, template) -> dict:
    """The same shape with made-up probabilities (each token certain, its own top-1), for tests that only
    look at the text: no forward pass."""
    parsed = template.parse(ids, backend=backend, finish_reason="stop")
    return {"token_ids": ids, "logprobs": [0.0] * len(ids), "top": [[[token_id, 0.0]] for token_id in ids],
            "finish_reason": "stop", "model_id": backend.model_id, "seed": 0, "channels": parsed.channels,
            "message": parsed.message.as_dict()}


def agentic_item(project, backend, *, text: str = TEXT, messages=None, tools=None, external_id: str = "tokyo",
                 top_k: int | None = None, scored: bool = True) -> Item:
    """An item of `project` whose rollout is `text` (by default reasoning and a call of get_current_time),
    scored by the model after the prompt as the project's response template renders it (`scored` false:
    made-up probabilities)."""
    config = config_for(project)
    prompt = stored_prompt(messages or PROMPT, tools or [])
    stored = prompt.as_dict()
    template = template_of(config, backend)
    prompt_ids = render_prompt(backend, prompt, template)
    ids = response_ids(backend, text)
    rollout = (scored_rollout(backend, prompt_ids, ids, template=template, top_k=top_k or config.top_k) if scored
               else unscored_rollout(backend, ids, template=template))
    digest = hashlib.sha256(json.dumps([external_id, stored], sort_keys=True).encode()).hexdigest()
    return Item.objects.create(project=project, external_id=external_id, messages=stored["messages"],
                               tools=stored.get("tools", []), source_sha256=digest, prompt_ids=prompt_ids,
                               rollout=rollout)
