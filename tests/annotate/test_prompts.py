"""An item's stored prompt read back, and rendered by the model's chat template with its tools."""

import pytest

from annotate.prompts import render_prompt, stored_prompt

from . import agentic


class TemplateSpy:
    """A backend's chat template that records what it was given."""

    def __init__(self):
        self.calls = []

    def chat_prompt_ids(self, messages, *, tools=None):
        self.calls.append((messages, tools))
        return [1, 2, 3]


def test_a_stored_prompt_reads_back_as_it_was_stored():
    prompt = stored_prompt(agentic.STORED_MESSAGES, agentic.STORED_TOOLS)
    assert prompt.as_dict() == {"messages": agentic.STORED_MESSAGES, "tools": agentic.STORED_TOOLS}


def test_a_stored_prompt_that_does_not_read_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match=r"messages\[0\].role"):
        stored_prompt([{"role": "robot", "content": "hi"}], [])


def test_the_template_gets_the_training_shape_and_the_tools():
    spy = TemplateSpy()
    assert render_prompt(spy, stored_prompt(agentic.STORED_MESSAGES, agentic.STORED_TOOLS)) == [1, 2, 3]
    assert spy.calls == [(agentic.TRAINING_MESSAGES, agentic.STORED_TOOLS)]


def test_no_tools_are_none_not_an_empty_list():
    spy = TemplateSpy()
    render_prompt(spy, stored_prompt([{"role": "user", "content": "hi"}], []))
    assert spy.calls == [([{"role": "user", "content": "hi"}], None)]
