"""What bounding input by what it expands to costs, and what it saves, on this machine (issue 37).

It prints a table; it is not a test and fails on nothing. In this process (no server, no database), each row
runs the platform's own reader on one input and, beside it, the raw library call the platform would make
without the bound, on the same bytes, in the same run (median of 5; CPU time of this process, and the peak
of Python's allocations by tracemalloc):

- the strict JSON body parser (`JSONObjectParser`: depth, NaN, repeated keys, 64-bit integers, NUL and lone
  surrogates) on the bodies the API takes every day, a 200-byte write and a 100 KB prompt edit, against
  `json.loads` (what DRF's parser calls): the price every request pays;
- `load_yaml` on the shipped swe_v1 taxonomy, against PyYAML's `safe_load`: the price of counting the
  expansion on a real file; and on the 8x9 alias bomb, where PyYAML's loader alone is cheap (aliases are
  shared objects) but the first walk of the result (the `repr` the issue found) expands 9^8 = 43 million
  leaves: the baseline walks 6 levels (531,441 leaves), the refusal reads all 8;
- the `.panda.json` parser on 1 MB in `hash_map` named 100 times, against putting those references back
  as the parser did before and writing them as JSON, as storing them in `Session.meta` does (100 MB);
- the bounded lz-string decompressor on 30 KB that spell ~10^8 characters, stopped at
  PANDA_CACHE_TREE_MAX_CHARS, against the `lzstring` package on a benign cache of 1 MB (the package is
  also what took 29 s to 293 s on the issue's bombs: it is not run on one here);
- tool arguments of 2,000,000 characters, refused by size, against `json.loads` of them.

Run: `.venv/bin/python bench/hostile_input_bench.py` (about 30 s on 2 cores).
"""

import copy
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")

import django  # noqa: E402

django.setup()

import yaml  # noqa: E402
from benchlib import print_table  # noqa: E402
from django.conf import settings  # noqa: E402
from lzstring import LZString  # noqa: E402

from annotate.panda_json.hash_map import HASH_PREFIX, object_hash  # noqa: E402
from annotate.panda_json.lz_string import TooLong, decompress_from_base64  # noqa: E402
from annotate.panda_json.parser import parse_panda_json  # noqa: E402
from annotate.panda_json.report import PandaImportReport  # noqa: E402
from dataplatform.apiutils import JSONObjectParser  # noqa: E402
from dataplatform.tools import parse_arguments  # noqa: E402
from dataplatform.yamlfile import load_yaml  # noqa: E402
from tests.annotate.test_panda_json import minimal_file  # noqa: E402
from tests.annotate.test_panda_json_bounds import lz_run  # noqa: E402

RUNS = 5


def measured(work) -> tuple[float, float]:
    """(median CPU ms, peak MB of Python allocations) of `work()`, which may raise (a refusal)."""
    times, peaks = [], []
    for _ in range(RUNS):
        tracemalloc.start()
        started = time.process_time()
        try:
            work()
        except Exception:  # noqa: BLE001, S110 (a refusal is the outcome measured)
            pass
        times.append((time.process_time() - started) * 1000)
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return statistics.median(times), statistics.median(peaks)


def body_parser(raw: bytes):
    import io
    return lambda: JSONObjectParser().parse(io.BytesIO(raw), "application/json", {"encoding": "utf-8"})


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, levels)]
    return "\n".join([*lines, f"schema: *a{levels - 1}"]) + "\n"


def count_leaves(value) -> int:
    return sum(count_leaves(item) for item in value) if isinstance(value, list) else 1


def hash_file() -> tuple[dict, dict]:
    value = "x" * 1_000_000
    digest = object_hash(value)
    document = minimal_file()
    document["hash_map"] = {digest: value}
    document["dialogs"]["3"]["messages"] += [{"role": "user", "content": HASH_PREFIX + digest}] * 100
    return document, {digest: value}


def expand_every_reference(document: dict, hash_map: dict):
    """What the parser did before the bound: every reference put back in full."""
    def put_back(value):
        if isinstance(value, str) and value.startswith(HASH_PREFIX):
            return hash_map[value[len(HASH_PREFIX):]]
        if isinstance(value, dict):
            return {key: put_back(item) for key, item in value.items()}
        if isinstance(value, list):
            return [put_back(item) for item in value]
        return value
    return put_back(document["dialogs"])


def main() -> None:
    small = json.dumps({"version": 3, "node_id": 41, "position": 17, "token_id": 1234}).encode()
    edit = json.dumps({"version": 3, "messages": [{"role": "user" if n % 2 == 0 else "assistant",
                                                   "content": "word " * 200} for n in range(100)]}).encode()
    taxonomy = (ROOT / "labeler/taxonomies/swe_v1.yaml").read_text()
    document, hash_map = hash_file()
    benign_cache = LZString.compressToBase64(json.dumps({str(n): {"tokens": ["tok"] * 50} for n in range(2000)}))
    bomb = lz_run(14_000)
    arguments = json.dumps({"timezone": "A" * 2_000_000})

    def decompress_bomb():
        try:
            decompress_from_base64(bomb, settings.PANDA_CACHE_TREE_MAX_CHARS)
        except TooLong:
            pass

    cases = [
        ("JSON body, 200 B write", body_parser(small), lambda: json.loads(small), "parsed"),
        ("JSON body, 100 KB prompt edit", body_parser(edit), lambda: json.loads(edit), "parsed"),
        ("YAML, shipped swe_v1 taxonomy", lambda: load_yaml(taxonomy, filename="swe_v1.yaml"),
         lambda: yaml.safe_load(taxonomy), "loaded"),
        ("YAML, 8x9 alias bomb (362 B)", lambda: load_yaml(alias_bomb(8), filename="bomb.yaml"),
         lambda: count_leaves(yaml.safe_load(alias_bomb(6))["schema"]), "refused; baseline walks 6 levels"),
        (".panda.json, 1 MB hash named 100x",
         lambda: parse_panda_json(copy.copy(document), file="bomb.panda.json", report=PandaImportReport("b")),
         lambda: json.dumps(expand_every_reference(document, hash_map)), "refused; baseline: 100 MB put back, as JSON"),
        ("cache_tree, 30 KB lz bomb (~10^8 chars)", decompress_bomb,
         lambda: LZString.decompressFromBase64(benign_cache), "stopped at the cap; baseline: package, 1 MB"),
        ("tool arguments, 2,000,000 chars", lambda: parse_arguments(arguments), lambda: json.loads(arguments),
         "refused by size"),
    ]
    rows = []
    for name, platform, baseline, outcome in cases:
        ours_ms, ours_mb = measured(platform)
        raw_ms, raw_mb = measured(baseline)
        rows.append((name, f"{ours_ms:.2f}", f"{raw_ms:.2f}", f"{ours_ms / raw_ms:.2f}" if raw_ms else "-",
                     f"{ours_mb:.1f}", f"{raw_mb:.1f}", outcome))
    print(f"Bounded readers against the raw call, median of {RUNS} (CPU ms of this process; peak MB of Python "
          f"allocations). PANDA_CACHE_TREE_MAX_CHARS={settings.PANDA_CACHE_TREE_MAX_CHARS:,}, "
          f"TOOL_ARGUMENTS_MAX_BYTES={settings.TOOL_ARGUMENTS_MAX_BYTES:,}.")
    print_table(("input", "platform ms", "raw ms", "ratio", "platform MB", "raw MB", "outcome"), rows)


if __name__ == "__main__":
    main()
