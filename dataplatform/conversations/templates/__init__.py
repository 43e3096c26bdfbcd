"""Response templates in token-id space (DESIGN.md section 3a; docs/conversations.md).

A template renders a conversation plus a partial assistant message into prompt token ids for the model
to continue (`render`), and reads response token ids back into the structured assistant message with
the channel of every token (`parse`), on a stream cut anywhere as well as on a finished one. It works
on token ids and their bytes, never on re-tokenized text, because a correction must continue from
exactly the prefix the annotator saw.

    template = template_for(backend.model_id)
    prompt = template.render(conversation, partial, backend=backend)
    ...stream from prompt.ids...
    parsed = template.parse(prompt.response_ids + generated_ids, backend=backend)

Modules: layout (the response text and its channels), scanner (bytes back into channels), base (the
interface), chatml, qwen3 and generic (the families), registry (which family a model gets).
"""

from .base import Parsed, Prompt, Template
from .layout import CONTENT, MARKER, PENDING, REASONING, TOOL_ARGUMENTS, TOOL_NAME, Markers
from .registry import FAMILIES, template_for

__all__ = ["CONTENT", "FAMILIES", "MARKER", "PENDING", "REASONING", "TOOL_ARGUMENTS", "TOOL_NAME", "Markers",
           "Parsed", "Prompt", "Template", "template_for"]
