"""The embedded model's tokenizer read alone, without the model and without torch."""

import subprocess
import sys

import pytest

from dataplatform.conversations.token_masks import template_identity
from dataplatform.inference.checkpoint import converted_dir
from dataplatform.inference.local import LocalBackend
from dataplatform.inference.tokenizer_files import load_tokenizer

pytestmark = pytest.mark.model

TEXT = "Héllo, 世界 🌍! <|im_end|>"
MESSAGES = [{"role": "user", "content": "What time is it in Tokyo?"}]


def test_the_tokenizer_loads_without_importing_torch(local_backend):
    folder = converted_dir(local_backend.data_dir)
    script = ("import sys; from dataplatform.inference.tokenizer_files import load_tokenizer; "
              f"tokenizer = load_tokenizer({str(folder)!r}); "
              "print(len(tokenizer.encode('hello')), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.split() == ["1", "False"]


def test_it_is_the_tokenizer_auto_tokenizer_loads(local_backend):
    from transformers import AutoTokenizer

    folder = converted_dir(local_backend.data_dir)
    alone, auto = load_tokenizer(folder), AutoTokenizer.from_pretrained(folder)
    assert type(alone) is type(auto)
    assert alone.encode(TEXT, add_special_tokens=False) == auto.encode(TEXT, add_special_tokens=False)
    assert (alone.eos_token_id, alone.pad_token_id, len(alone)) == (auto.eos_token_id, auto.pad_token_id, len(auto))
    assert alone.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False) == \
        auto.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)

    class Named:
        model_id = local_backend.model_id

        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

    # The identity an export names its token ids with (the manifest, the rows' hashes) is unchanged.
    assert template_identity(Named(alone)) == template_identity(Named(auto)) is not None


def test_token_work_loads_the_tokenizer_and_not_the_model(local_backend):
    fresh = LocalBackend(local_backend.data_dir)
    ids = fresh.chat_prompt_ids(MESSAGES)
    assert ids == local_backend.chat_prompt_ids(MESSAGES)
    assert fresh.tokenize(TEXT) == local_backend.tokenize(TEXT)
    assert fresh.detokenize(ids) == local_backend.detokenize(ids)
    assert fresh.token_pieces(ids) == local_backend.token_pieces(ids)
    assert fresh.eos_token_ids == local_backend.eos_token_ids == frozenset({2})  # <|im_end|>, from config.json
    assert fresh.context_length == local_backend.context_length
    assert not fresh.model_loaded and fresh.health().ok
