"""A model's tokenizer read from its folder alone, without the model and without torch.

`AutoTokenizer` imports transformers' configuration machinery, which imports torch: 2.8 s and ~370 MB before a
single id is encoded. A folder that transformers 5 saved names `TokenizersBackend` (a tokenizer.json read by
the Rust `tokenizers` library, with the chat template beside it); that class loads in ~0.6 s and ~120 MB, and
is the very class AutoTokenizer would build, so its ids, pieces, chat template and identity hashes are the
same. Any other folder (a slow tokenizer, an older save) goes through AutoTokenizer, as before.
"""

import json
from pathlib import Path

# The tokenizer classes that are a tokenizer.json read by `tokenizers` (transformers 5 spells the fast one
# `TokenizersBackend`; folders saved by 4.x say `PreTrainedTokenizerFast`).
_TOKENIZERS_CLASSES = frozenset({"TokenizersBackend", "PreTrainedTokenizerFast"})


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in `folder`, loaded as AutoTokenizer would load it, without importing torch where the
    folder allows it."""
    folder = Path(folder)
    if (folder / "tokenizer.json").exists() and _tokenizer_class(folder) in _TOKENIZERS_CLASSES:
        from transformers.tokenization_utils_tokenizers import TokenizersBackend

        return TokenizersBackend.from_pretrained(folder)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _tokenizer_class(folder: Path) -> str | None:
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return config.get("tokenizer_class") if isinstance(config, dict) else None


def read_model_config(folder: str | Path) -> dict:
    """The model's config.json as a dict: what a tokenizer-only caller needs of it (the end-of-sequence ids, the
    context length, the vocabulary size) without loading the model."""
    return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
