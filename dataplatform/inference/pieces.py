"""Raw token bytes from a Hugging Face byte-level BPE tokenizer.

Shared by the local backend and by the vLLM backend when VLLM_TOKENIZER_DIR is
set: both must show the same bytes for the same ids.
"""

from functools import lru_cache


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    # Byte-level BPE stores each byte as a printable stand-in character; invert that table.
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


def tokenizer_pieces(tokenizer, ids: list[int]) -> list[bytes]:
    """The raw bytes of each token in `ids`. A piece may be part of a UTF-8 character."""
    decoder = _byte_decoder()
    special = set(tokenizer.all_special_ids)
    pieces = []
    for token_id, token in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True):
        if token_id in special or any(char not in decoder for char in token):
            pieces.append(token.encode("utf-8"))  # added/special tokens are stored as plain text
        else:
            pieces.append(bytes(decoder[char] for char in token))
    return pieces
