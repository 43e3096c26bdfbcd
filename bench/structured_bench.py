"""Benchmark of constrained decoding on the local backend (xgrammar), against unconstrained decoding in the
same run, on the same prompts. It prints a table of figures; it is not a test and fails on nothing.

- `generate`, a batch of 4 chat prompts, greedy, the same max_tokens: with a JSON schema (enums, a nested
  object, bounded strings) and with a choice list, against `generate` without a constraint. Tokens/s
  counts each row's tokens up to and including its end token; the constrained rows stop early (at the end
  of the object), the free ones run to max_tokens, so the two do different amounts of work;
- hence the per-step cost: the constrained `generate` against raw `model.generate` on the same
  left-padded batch forced to the same number of steps (`min_new_tokens`), i.e. the same forward passes
  with no grammar: the ratio is the grammar's overhead (the bitmask per row per step, and its masking);
- the grammar's own work per step (timed inside the logits processor), against a raw step;
- `stream` of one prompt under the schema (what the embedded server runs), against `stream` of the same
  prompt unconstrained for the same number of tokens;
- one-time costs: xgrammar's tokenizer info (once per backend) and the schema's compilation (once per
  distinct schema; later calls hit the cache).

Each timed figure is the median of 3 runs after a warm-up. Run from the project root (about a minute on
2 cores):

    .venv/bin/python bench/structured_bench.py
"""

import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import jsonschema  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from django.conf import settings  # noqa: E402

from dataplatform.inference import grammar  # noqa: E402
from dataplatform.inference.grammar import GrammarCache, constraint_key, tokenizer_info  # noqa: E402
from dataplatform.inference.local import LocalBackend  # noqa: E402

REPEATS = 3
MAX_TOKENS = 128
# The cases of the tests (tests/inference/test_structured.py): a schema with enums, a nested object, bounds.
from tests.inference.test_structured import CHOICES, QUESTIONS, SCHEMA  # noqa: E402

transformers.utils.logging.set_verbosity_error()


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> tuple[float, object]:
    """Median wall time over `repeats` runs after one untimed warm-up."""
    fn()
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        runs.append((time.perf_counter() - started, result))
    return statistics.median(seconds for seconds, _ in runs), runs[-1][1]


def produced(answers) -> int:
    """Tokens each row produced, its end token included (a row stopped by max_tokens has none)."""
    return sum(len(a.token_ids) + (a.finish_reason == "stop") for a in answers)


def steps_of(answers) -> int:
    """Decoding steps the batch took: until its longest row ended."""
    return max(len(a.token_ids) + (a.finish_reason == "stop") for a in answers)


def grammar_time(fn: Callable[[], object]) -> tuple[int, float]:
    """(calls, seconds) spent in GrammarLogitsProcessor.__call__ while `fn` runs."""
    original = grammar.GrammarLogitsProcessor.__call__
    spent = [0, 0.0]

    def timed_call(self, input_ids, scores):
        started = time.perf_counter()
        try:
            return original(self, input_ids, scores)
        finally:
            spent[0] += 1
            spent[1] += time.perf_counter() - started

    grammar.GrammarLogitsProcessor.__call__ = timed_call
    try:
        fn()
    finally:
        grammar.GrammarLogitsProcessor.__call__ = original
    return spent[0], spent[1]


def main() -> None:
    load_average = os.getloadavg()[0]
    backend = LocalBackend(settings.DATA_DIR)
    model, tokenizer = backend.model, backend.tokenizer
    prompts = [backend.chat_prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
    rows: list[tuple[str, str, str, str]] = []
    pad = tokenizer.pad_token_id

    def row(figure: str, value: float, baseline: float, fmt: str, ratio: float | None = None) -> None:
        ratio = value / baseline if ratio is None else ratio
        rows.append((figure, format(value, fmt), format(baseline, fmt), f"{ratio:.2f}"))

    # --- one-time costs ------------------------------------------------------------------------------
    started = time.perf_counter()
    info = tokenizer_info(tokenizer, vocab_size=model.config.vocab_size, stop_token_ids=sorted(backend.eos_token_ids))
    info_seconds = time.perf_counter() - started
    cache = GrammarCache(info)
    key = constraint_key(json_schema=SCHEMA)
    started = time.perf_counter()
    cache.get(key)
    compile_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    cache.get(key)
    hit_ms = (time.perf_counter() - started) * 1000
    _ = backend.grammars  # the backend's own, outside every timing below

    def generate(**constraint):
        return backend.generate(prompts, max_tokens=MAX_TOKENS, temperature=0.0, seed=0, **constraint)

    free_seconds, free = median_seconds(generate)
    free_rate = produced(free) / free_seconds
    valid = True
    for name, constraint in (("JSON schema", {"json_schema": SCHEMA}), ("choice of 3", {"choice": CHOICES})):
        seconds, answers = median_seconds(lambda constraint=constraint: generate(**constraint))
        if name == "JSON schema":
            for answer in answers:
                try:
                    jsonschema.validate(json.loads(answer.text), SCHEMA)
                except (ValueError, jsonschema.ValidationError):
                    valid = False
        else:
            valid = valid and all(answer.text in CHOICES for answer in answers)
        rate = produced(answers) / seconds
        rows.append((f"generate x4, {name} vs free, max_tokens {MAX_TOKENS} (tok/s)", f"{rate:.1f}",
                     f"{free_rate:.1f}", f"{rate / free_rate:.2f}"))
        rows.append((f"  wall time of that batch (s; constrained {produced(answers)} tok, free {produced(free)})",
                     f"{seconds:.2f}", f"{free_seconds:.2f}", f"{seconds / free_seconds:.2f}"))

        # The same forward passes without a grammar: raw model.generate on the same left-padded batch, forced
        # to the constrained batch's number of steps.
        steps = steps_of(answers)
        width = max(len(ids) for ids in prompts)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompts], dtype=torch.long)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long)

        def raw(steps=steps, input_ids=input_ids, attention=attention):
            with torch.inference_mode():
                return model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=steps,
                                      min_new_tokens=steps, do_sample=False, pad_token_id=pad, top_k=None,
                                      top_p=None, temperature=None)

        raw_seconds, _ = median_seconds(raw)
        row(f"  per step: constrained vs raw generate, same {steps} steps (ms/step)",
            seconds / steps * 1000, raw_seconds / steps * 1000, ".1f")
        # The grammar's own work, timed inside the processor (accept the last tokens, fill and apply the
        # bitmask of the 4 rows), against the raw step: the overhead without the run-to-run noise.
        calls, grammar_seconds = grammar_time(lambda constraint=constraint: generate(**constraint))
        row(f"  grammar work per step, {calls} calls, vs a raw step (ms)", grammar_seconds / calls * 1000,
            raw_seconds / steps * 1000, ".2f")

    # --- stream (the embedded server's path) -----------------------------------------------------------
    def stream(**constraint):
        return list(backend.stream(prompts[0], max_tokens=MAX_TOKENS, temperature=0.0, seed=0, top_k=5, **constraint))

    constrained_seconds, constrained_steps = median_seconds(lambda: stream(json_schema=SCHEMA))
    n = len(constrained_steps)
    free_stream_seconds, free_steps = median_seconds(
        lambda: list(backend.stream(prompts[0], max_tokens=n, temperature=0.0, seed=0, top_k=5)))
    row(f"stream x1, JSON schema vs free, {n} vs {len(free_steps)} tok (tok/s)", n / constrained_seconds,
        len(free_steps) / free_stream_seconds, ".1f")

    print(f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, transformers {transformers.__version__}, xgrammar "
          f"{importlib.metadata.version('xgrammar')}, model {backend.model_id} fp32, load average before the run {load_average:.2f}")
    benchlib.print_table(("figure", "constrained", "unconstrained", "ratio"), rows, text_last=False)
    print(f"median of {REPEATS} after a warm-up; ratio = constrained / unconstrained: above 1 is faster for tok/s, "
          "slower for seconds and ms/step.")
    print(f"one-time: tokenizer info {info_seconds:.2f} s (once per backend); schema compiled in {compile_ms:.1f} ms "
          f"(once per distinct schema), then {hit_ms:.3f} ms from the cache")
    print(f"every constrained answer valid (schema / one of the choices): {'yes' if valid else 'NO'}")


if __name__ == "__main__":
    main()
