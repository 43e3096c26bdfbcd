"""Token columns and the identity of the tokenizer and chat template they belong to."""

import hashlib
import json
from types import SimpleNamespace

import pytest

from dataplatform.conversations.templates.chat_template import chat_template
from dataplatform.conversations.token_masks import (
    IGNORE_INDEX,
    identity_columns,
    note_identity,
    template_identity,
    token_columns,
)


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
