"""lz-string compression of a .panda.json cache_tree: the compiled port writes the text lz-string writes."""

import json
import random
import string

import pytest
from lzstring import LZString

from annotate.panda_json import lz_string
from annotate.panda_json.lz_string import compress_to_base64, decompress_from_base64


def texts() -> list[str]:
    """Empty, one character, each padding length, long repeats, printable noise, the BMP, and a cache's ASCII
    JSON with escaped emoji (surrogate pairs) as cache_tree.encode writes it."""
    rng = random.Random(43)
    cache = {"1": {"tokens": [{"delta": {"content": "héllo 世界 🌍"}, "logprobs": {"content": [{"logprob": -0.1 * i}]}}
                              for i in range(200)]}}
    found = ["", "a", "ab", "abc", "abcd", "ab" * 5000, json.dumps(cache, ensure_ascii=True, separators=(",", ":"))]
    found += ["".join(rng.choices(string.printable, k=rng.randint(1, 3000))) for _ in range(60)]
    found += ["".join(chr(rng.randint(32, 0xD7FF)) for _ in range(rng.randint(1, 400))) for _ in range(30)]
    return found


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure-python"])
def test_compression_writes_what_lz_string_writes_and_reads_back(compiled, monkeypatch):
    if compiled:
        assert lz_string._compiled_compress is not None, "hmt-lzma-pyo3 is pinned in requirements/base.txt"
    else:
        monkeypatch.setattr(lz_string, "_compiled_compress", None)
    for text in texts():
        written = compress_to_base64(text)
        assert written == LZString.compressToBase64(text), text[:40]
        assert decompress_from_base64(written, 10**7) == text
