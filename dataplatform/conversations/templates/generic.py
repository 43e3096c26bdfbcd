"""`generic`: any model, through its own chat template (`backend.chat_prompt_ids`: transformers' locally,
vLLM's `/tokenize` otherwise).

The context is what the template renders for the conversation's training shape with the generation
prompt, exactly as `apply_chat_template` would. A partial response is written in the shared layout with
this family's markers (by default `<think>` and Hermes `<tool_call>`; `Markers(None, None)` for a model
that has neither) and given to the template as the content of a last assistant message, left open with
`continue_final_message`. The same markers parse the model's output.

A template that renders that open message differently from its own generation prompt (one that adds
an empty think block there, say) or changes its text is refused rather than continued from a prefix
the annotator did not see: such a model needs a family of its own (docs/conversations.md, "Adding a model family").
"""

from django.utils.translation import gettext

from dataplatform.errors import Refused

from ..model import Conversation, Message
from .base import Prompt, Template, check_partial, check_spelled
from .layout import Markers, is_complete, response_text


class GenericTemplate(Template):
    name = "generic"

    def __init__(self, markers: Markers | None = None):
        self.markers = Markers() if markers is None else markers

    def render(self, conversation: Conversation, partial: Message | None, *, backend) -> Prompt:
        check_partial(partial)
        messages = conversation.for_training()
        tools = [dict(tool) for tool in conversation.tools] or None
        context = backend.chat_prompt_ids(messages, tools=tools)
        text = "" if partial is None else response_text(partial, self.markers, complete=is_complete(partial))
        if not text:
            return Prompt(context, len(context))
        ids = backend.chat_prompt_ids([*messages, {"role": "assistant", "content": text}], tools=tools,
                                      continue_final_message=True)
        if ids[:len(context)] != context:
            raise Refused(gettext("The chat template of %(model)s does not open a partial assistant message the "
                                  "way its generation prompt does; choose a response template family made for it.")
                          % {"model": backend.model_id})
        check_spelled(ids[len(context):], text, backend)
        if is_complete(partial):
            ids += self._end_of_turn_ids(backend)
        return Prompt(ids, len(context))

    def _end_of_turn_ids(self, backend) -> list[int]:
        if len(backend.eos_token_ids) != 1:
            raise Refused(gettext("Which token ends a turn of %(model)s is not known here, so a finished message "
                                  "cannot be rendered through its own chat template.") % {"model": backend.model_id})
        return list(backend.eos_token_ids)
