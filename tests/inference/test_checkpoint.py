"""The embedded model's converted folder is a plain float32 checkpoint that standard tools fine-tune, carrying the
platform's chat template for the model and its training twin (tests/conversations/test_templates_chat_template.py
checks that they render what the response template renders)."""

import json
import os
import shutil

import pytest

from dataplatform.conversations.templates.chat_template import chat_template
from dataplatform.inference.checkpoint import CHAT_TEMPLATE, TRAINING_TEMPLATE, converted_dir, ensure_converted

from .model_servers import SMOLLM2_TEMPLATE

pytestmark = pytest.mark.model

CONVERSATIONS = [
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"},
     {"role": "assistant", "content": "6"}],
]


def test_the_converted_config_is_a_plain_causal_lm_checkpoint(local_backend):
    config = json.loads((converted_dir(local_backend.data_dir) / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in config
    assert config["dtype"] == "float32"


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_training_template_renders_the_same_text_and_masks_only_assistant_turns(local_backend, messages):
    tokenizer = local_backend.tokenizer
    template = (converted_dir(local_backend.data_dir) / TRAINING_TEMPLATE).read_text()
    for generation in (False, True):
        assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation) == \
            tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                          chat_template=template)
    rendered = tokenizer.apply_chat_template(messages, chat_template=template, return_dict=True,
                                             return_assistant_tokens_mask=True)
    masked = [token for token, bit in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True) if bit]
    # Each assistant message and its end-of-turn marker (so the model learns to stop), nothing of the prompt.
    assert tokenizer.decode(masked) == "".join(m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant")


def test_the_folder_carries_the_templates_of_the_one_definition(local_backend):
    folder = converted_dir(local_backend.data_dir)
    assert (folder / CHAT_TEMPLATE).read_text() == chat_template() == local_backend.tokenizer.chat_template
    assert (folder / TRAINING_TEMPLATE).read_text() == chat_template(training=True)


@pytest.mark.parametrize("training_template", [None, "{# an older training copy #}"])
def test_a_folder_converted_before_is_brought_up_to_date_in_place_without_converting_again(local_backend, tmp_path,
                                                                                           training_template):
    source = converted_dir(local_backend.data_dir)
    old = converted_dir(tmp_path)
    old.mkdir(parents=True)
    for name in os.listdir(source):
        if name not in (CHAT_TEMPLATE, TRAINING_TEMPLATE):
            (old / name).symlink_to(source / name) if name == "model.safetensors" else shutil.copy(source / name, old)
    (old / CHAT_TEMPLATE).write_text(SMOLLM2_TEMPLATE)
    if training_template is not None:
        (old / TRAINING_TEMPLATE).write_text(training_template)
    config = json.loads((old / "config.json").read_text())
    del config["architectures"]
    config["quantization_config"] = {"quant_method": "gguf", "gguf_file": "x.gguf", "dequantize": False}
    (old / "config.json").write_text(json.dumps(config))

    assert ensure_converted(tmp_path) == old
    upgraded = json.loads((old / "config.json").read_text())
    assert upgraded["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in upgraded
    assert (old / CHAT_TEMPLATE).read_text() == chat_template()
    assert (old / TRAINING_TEMPLATE).read_text() == chat_template(training=True)
    assert (old / "model.safetensors").is_symlink()  # the weights were not written again
