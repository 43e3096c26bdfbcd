"""The embedded model's chat template (the converted folder's `chat_template.jinja`, the tokenizer's own) and its
training twin render what the `chatml-think` response template renders, on every conversation the round-trip
property draws (strategies.py), with a system message or not, tools or not, and the calls' results after them:

- the prompt, token for token: the conversation in the training shape, as TRL hands it `apply_chat_template`,
  gives the ids the platform prompts the model with;
- the trained turn: the message as the response template writes it (its calls' arguments as a chat template
  writes them from the training shape: the model's own text whenever that is what the object writes back),
  closed by the end-of-turn marker; the training twin's `{% generation %}` marks that response and nothing else
  (but the header's newline when one token holds it and the response's first).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message
from dataplatform.conversations.templates import FAMILIES
from dataplatform.conversations.templates.chatml import END, as_written
from dataplatform.inference.checkpoint import TRAINING_TEMPLATE, converted_dir

from .strategies import EXAMPLES, assume_writable, json_values, messages, names, texts, words

pytestmark = pytest.mark.model

TEMPLATE = FAMILIES["chatml-think"]
USER = Message(role="user", content="What is the weather in Paris?")
tools = st.lists(st.builds(lambda name, parameters: {"type": "function", "function": {"name": name,
                                                                                      "parameters": parameters}},
                           names, st.dictionaries(words, json_values, max_size=2)), max_size=2)


@pytest.fixture(scope="module")
def training_template(local_backend):
    return (converted_dir(local_backend.data_dir) / TRAINING_TEMPLATE).read_text(encoding="utf-8")


def apply(tokenizer, conversation: Conversation, **options):
    return tokenizer.apply_chat_template(conversation.for_training(), tools=list(conversation.tools) or None,
                                         return_dict=False, **options)


@settings(EXAMPLES, max_examples=200)
@given(message=messages(), system=st.none() | texts, offered=tools, result=texts)
def test_the_chat_template_renders_what_the_response_template_renders(message, system, offered, result,
                                                                      local_backend, training_template):
    assume_writable(message, local_backend)
    tokenizer = local_backend.tokenizer
    before = ((Message(role="system", content=system),) if system is not None else ()) + (USER,)
    results = tuple(Message(role="tool", content=result, tool_call_id=call.id) for call in message.tool_calls)
    answered = Conversation(messages=before + (message,) + results, tools=tuple(offered))

    # The message as an earlier turn: the prompt of the next one, token for token.
    assert list(apply(tokenizer, answered, add_generation_prompt=True, tokenize=True)) == \
        TEMPLATE.render(answered, None, backend=local_backend).ids

    # The message as the trained turn: the response template's prompt for it, continued with it and closed.
    trained = Conversation(messages=before + (message,), tools=tuple(offered))
    prompt = TEMPLATE.render(Conversation(messages=before, tools=tuple(offered)), as_written(message),
                             backend=local_backend)
    text = apply(tokenizer, trained, tokenize=False)
    assert text == local_backend.detokenize(prompt.ids) + "\n"
    assert apply(tokenizer, trained, tokenize=False, chat_template=training_template) == text
    marked = tokenizer.apply_chat_template(trained.for_training(), tools=list(trained.tools) or None,
                                           chat_template=training_template, return_dict=True,
                                           return_assistant_tokens_mask=True)
    generated = local_backend.detokenize([token for token, bit in zip(marked["input_ids"], marked["assistant_masks"],
                                                                      strict=True) if bit])
    response = local_backend.detokenize(prompt.response_ids)
    assert response.endswith(END) and generated.endswith(response)
    # Beyond it, at most the header's newline, when one token holds it and the response's first newline.
    assert generated[:len(generated) - len(response)] in ("", "\n")

