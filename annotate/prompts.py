"""An item's prompt: the conversation its import stored, read back, and its token ids by the model's chat template.

An item stores its prompt as the conversation model stores one (`Conversation.as_dict()`: messages, and the
`tools` in a field of their own), read from the uploaded file on import. Reading it back gives the
conversation again, for the shapes that go out: the one chat templates and trainers read
(`for_training()`), and the prompt ids the response template renders it into.
"""

from dataplatform.conversations.model import Conversation
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.templates import Template
from dataplatform.inference import Backend


def stored_prompt(messages: list[dict], tools: list[dict]) -> Conversation:
    """The conversation of an item's stored `messages` and `tools`."""
    read = read_conversation(messages, tools)
    if read.conversation is None:  # it was read on import: a stored prompt that does not read is a bug
        raise ValueError(f"A stored prompt does not read as a conversation: {read.problems}")
    return read.conversation


def render_prompt(backend: Backend, prompt: Conversation, template: Template) -> list[int]:
    """The prompt ids a response to `prompt` continues: the response template's rendering, the assistant turn
    opened (for the embedded model its own chat template's text, plus its tools)."""
    return template.render(prompt, None, backend=backend).ids
