"""An item's stored prompt read back, and rendered by the response template with its tools."""

import pytest

from annotate.prompts import render_prompt, stored_prompt
from dataplatform.conversations.templates import Prompt

from . import agentic


class TemplateSpy:
    """A response template that records what it was asked to render."""

    def __init__(self):
        self.calls = []

    def render(self, conversation, partial, *, backend):
        self.calls.append((conversation, partial, backend))
        return Prompt([1, 2, 3], 3)


def test_a_stored_prompt_reads_back_as_it_was_stored():
    prompt = stored_prompt(agentic.STORED_MESSAGES, agentic.STORED_TOOLS)
    assert prompt.as_dict() == {"messages": agentic.STORED_MESSAGES, "tools": agentic.STORED_TOOLS}


def test_a_stored_prompt_that_does_not_read_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match=r"messages\[0\].role"):
        stored_prompt([{"role": "robot", "content": "hi"}], [])


def test_a_prompt_renders_through_the_response_template_as_a_new_assistant_turn():
    spy, backend = TemplateSpy(), object()
    prompt = stored_prompt(agentic.STORED_MESSAGES, agentic.STORED_TOOLS)
    assert render_prompt(backend, prompt, spy) == [1, 2, 3]
    assert spy.calls == [(prompt, None, backend)]
