"""Token columns, the loss mask per token (one tokenization of the conversation, the same mask as a tokenization
per prefix), and the identity of the tokenizer and chat template they belong to."""

import copy
import hashlib
import json
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplatform.conversations.model import Conversation, Message
from dataplatform.conversations.templates.chat_template import chat_template
from dataplatform.conversations.token_masks import (
    IGNORE_INDEX,
    NotPrefixStable,
    _files_key,
    completion_mask,
    identity_columns,
    note_identity,
    remembered_note,
    template_identity,
    token_columns,
)

from ..annotate.exporters.rows import TOOL_TEMPLATE
from ..inference.model_servers import SMOLLM2_TEMPLATE
from .strategies import EXAMPLES, names, texts
from .strategies import messages as strategy_messages


def test_labels_are_the_ids_with_the_unmasked_tokens_ignored():
    assert token_columns([5, 6, 7, 8], [0, 1, 1, 0]) == {
        "input_ids": [5, 6, 7, 8], "completion_mask": [0, 1, 1, 0], "labels": [IGNORE_INDEX, 6, 7, IGNORE_INDEX]}
    assert token_columns(None, None) == {"input_ids": None, "completion_mask": None, "labels": None}
    with pytest.raises(ValueError):
        token_columns([5, 6], [1])


def test_a_backend_without_a_tokenizer_has_no_identity_and_the_notes_say_why():
    backend = SimpleNamespace(model_id="served-elsewhere")
    notes = {}
    assert note_identity(notes, backend) is None
    assert notes["tokenizer"]["model_id"] == "served-elsewhere" and "null" in notes["tokenizer"]["note"]
    # A backend that cannot render the probe conversation is described so, not as rendering nothing.
    assert notes["tokenizer"]["chat_template"]["name"] == "served-elsewhere's own chat template, as the server renders it"
    assert "probe_error" in notes["tokenizer"]["chat_template"]
    assert identity_columns(None) == {"template_model": None, "tokenizer_sha256": None, "template_sha256": None}


@pytest.mark.model
def test_the_embedded_tokenizer_is_named_by_its_template_and_vocabulary_hashes(local_backend):
    identity = template_identity(local_backend)
    tokenizer = local_backend.tokenizer
    assert identity["model_id"] == local_backend.model_id
    assert identity["chat_template_sha256"] == hashlib.sha256(tokenizer.chat_template.encode()).hexdigest()
    assert identity["tokenizer_sha256"] == hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()
    assert identity_columns(identity) == {"template_model": local_backend.model_id,
                                          "tokenizer_sha256": identity["tokenizer_sha256"],
                                          "template_sha256": identity["chat_template_sha256"]}
    assert identity_columns(identity, rendered=False)["template_sha256"] is None
    # Another template (here: the training copy with generation markers) is another identity.
    other = SimpleNamespace(model_id=local_backend.model_id, tokenizer=SimpleNamespace(
        chat_template=tokenizer.chat_template + "{# changed #}", backend_tokenizer=tokenizer.backend_tokenizer))
    assert template_identity(other)["chat_template_sha256"] != identity["chat_template_sha256"]
    assert template_identity(other)["tokenizer_sha256"] == identity["tokenizer_sha256"]


@pytest.mark.model
def test_the_manifest_names_the_embedded_template_and_what_it_renders_never_a_path(local_backend):
    notes = {}
    identity = note_identity(notes, local_backend)
    named = notes["tokenizer"]
    assert named == identity | {"chat_template": named["chat_template"]}
    assert identity["chat_template_sha256"] == hashlib.sha256(chat_template().encode()).hexdigest()
    described = named["chat_template"]
    assert described["name"].startswith("the platform's chatml-think template")
    assert {key: value for key, value in described.items() if key.startswith("renders_")} == {
        "renders_tools": True, "renders_reasoning": True, "renders_tool_calls": True, "renders_tool_results": True}
    assert str(local_backend.data_dir) not in json.dumps(notes) and "/" not in json.dumps(identity)


# --- completion_mask: one tokenization of the conversation, the same ids and mask as a tokenization per prefix ---

# A template of the Qwen3 kind: the reasoning of an assistant turn shows only after the last user message, so a
# turn renders differently once a user message follows it (not prefix-stable: both algorithms refuse it alike).
DROPS_PAST_REASONING = (
    "{%- set last_user = namespace(index=-1) -%}{%- for m in messages -%}{%- if m.role == 'user' -%}"
    "{%- set last_user.index = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}<|im_start|>{{ m.role }}\n"
    "{%- if m.role == 'assistant' and m.reasoning_content and loop.index0 > last_user.index -%}"
    "<think>{{ m.reasoning_content }}</think>{%- endif -%}{{ m.content }}"
    "{%- for call in m.tool_calls or [] -%}<tool_call>{{ call.function | tojson }}</tool_call>{%- endfor -%}"
    "<|im_end|>\n{%- endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
TEMPLATES = {"chatml-think": chat_template(), "chatml-think training": chat_template(training=True),
             "smollm2": SMOLLM2_TEMPLATE, "no special tokens": TOOL_TEMPLATE,
             "drops past reasoning": DROPS_PAST_REASONING}


def mask_per_prefix(tokenizer, messages, tools, message_mask):
    """The algorithm before issue 43, kept as the reference: every masked message's bounds from tokenizing the
    conversation up to it (generation prompt added) and through it."""
    def ids(part, generation):
        return list(tokenizer.apply_chat_template(part, tools=tools or None, add_generation_prompt=generation,
                                                  tokenize=True, return_dict=False))
    full = ids(messages, False)
    mask = [0] * len(full)
    for index, masked in enumerate(message_mask):
        if masked:
            before = ids(messages[:index], True) if index else []
            through = ids(messages[:index + 1], False)
            if full[:len(before)] != before or full[:len(through)] != through:
                raise NotPrefixStable(index)
            mask[len(before):len(through)] = [1] * (len(through) - len(before))
    return full, mask


def outcome(function, *args):
    try:
        return function(*args)
    except NotPrefixStable:
        return "not prefix-stable"


# Text that ends a turn as a template's header does, or holds a special token, so that tokens merge across a
# turn's bounds and added tokens turn up inside content.
turn_texts = st.one_of(texts, st.sampled_from(["", "\n", "\n\nanswer", " leading", "<|im_start|>", "x<|im_end|>\n",
                                                "assistant\n", "<think>"]))
offered = st.lists(st.builds(lambda name: {"type": "function", "function": {"name": name, "parameters": {}}}, names),
                   max_size=2)


@st.composite
def conversations(draw):
    """A multi-turn agentic conversation in the training shape (system or not; assistant turns with reasoning and
    tool calls, each call answered by a tool message; users between rounds) and a loss mask over its assistant
    messages."""
    messages = [Message(role="system", content=draw(turn_texts))] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 3))):
        messages.append(Message(role="user", content=draw(turn_texts)))
        for _ in range(draw(st.integers(1, 2))):
            message = draw(strategy_messages())
            message = Message(role="assistant", content=draw(turn_texts), reasoning=message.reasoning,
                              tool_calls=message.tool_calls)
            messages.append(message)
            messages += [Message(role="tool", content=draw(turn_texts), tool_call_id=call.id, name=call.name)
                         for call in message.tool_calls]
    conversation = Conversation(messages=tuple(messages), tools=tuple(draw(offered)))
    mask = [int(message.role == "assistant" and draw(st.booleans())) for message in messages]
    return conversation.for_training(), list(conversation.tools), mask


@pytest.fixture(scope="module")
def tokenizers(local_backend):
    """The embedded model's tokenizer under each template of TEMPLATES."""
    made = {}
    for name, template in TEMPLATES.items():
        made[name] = copy.copy(local_backend.tokenizer)
        made[name].chat_template = template
    return made


@pytest.mark.model
@pytest.mark.parametrize("template", list(TEMPLATES))
@settings(EXAMPLES, max_examples=60)
@given(drawn=conversations())
def test_the_mask_is_the_one_a_tokenization_per_prefix_gives(template, drawn, tokenizers):
    tokenizer = tokenizers[template]
    messages, tools, mask = drawn
    assert outcome(completion_mask, tokenizer, messages, tools, mask) == \
        outcome(mask_per_prefix, tokenizer, messages, tools, mask)


@pytest.mark.model
def test_the_conversation_is_tokenized_once_and_each_bound_checked_on_its_turn_header(tokenizers, local_backend):
    tokenizer = tokenizers["chatml-think"]
    call = {"id": "c0", "type": "function", "function": {"name": "calc", "arguments": {"expression": "17 * 23"}}}
    messages = [{"role": "system", "content": "Solve it with the calculator. " * 20},
                {"role": "user", "content": "Compute (17 * 23) - 45."}]
    for turn in range(6):
        messages += [{"role": "assistant", "content": f"Step {turn}.", "reasoning_content": "First multiply. " * 5,
                      "tool_calls": [call]}, {"role": "tool", "tool_call_id": "c0", "content": "391\n" * 10}]
    loss = [int(index in (6, 10, 12)) for index in range(len(messages))]
    seen = []
    spy = copy.copy(tokenizer)
    spy.__class__ = type("Spy", (type(tokenizer),), {
        "__call__": lambda self, text, **options: seen.append(len(text)) or type(tokenizer).__call__(self, text,
                                                                                                     **options)})
    ids, mask = completion_mask(spy, messages, None, loss)
    assert (ids, mask) == mask_per_prefix(tokenizer, messages, None, loss)
    whole = len(tokenizer.apply_chat_template(messages, tokenize=False))
    assert seen[0] == whole and len(seen) == 1 + 2 * 3  # the whole once, then two bounds per masked message
    assert max(seen[1:]) < 40  # each bound's check tokenizes a turn's header ("<|im_start|>assistant\n"), no more
    trained = local_backend.detokenize([token for token, bit in zip(ids, mask, strict=True) if bit])
    assert trained.count("<|im_end|>") == 3 and "Step 4." in trained and "Step 1." not in trained


def test_the_note_is_remembered_and_named_again_without_loading_the_tokenizer(local_backend):
    from dataplatform.inference.local import LocalBackend

    cache.delete(_files_key(local_backend.model_id, local_backend.tokenizer_folder))
    first = LocalBackend(local_backend.data_dir)
    identity, note = remembered_note(first)
    assert first.tokenizer_loaded  # nothing remembered yet: the tokenizer was read for the note
    notes = {}  # the same as the note of a tokenizer loaded before (which is never remembered)
    assert note_identity(notes, local_backend) == identity == template_identity(local_backend)
    assert notes["tokenizer"] == note and note["chat_template"]["renders_tools"] in (True, False)
    second = LocalBackend(local_backend.data_dir)
    assert remembered_note(second) == (identity, note)
    assert not second.tokenizer_loaded


def test_the_remembered_note_changes_with_the_tokenizer_files_not_the_weights(tmp_path):
    for name, text in (("tokenizer.json", "{}"), ("chat_template.jinja", "{{ messages }}"), ("model.safetensors", "w")):
        (tmp_path / name).write_text(text)
    key = _files_key("model", tmp_path)
    (tmp_path / "model.safetensors").write_text("other weights")
    assert _files_key("model", tmp_path) == key
    assert _files_key("another model", tmp_path) != key
    (tmp_path / "chat_template.jinja").write_text("{{ messages | length }}")
    assert _files_key("model", tmp_path) != key
