"""Benchmark of the local model backend on this machine, against raw transformers in the same run.

It prints a table of figures; it is not a test and fails on nothing. Each timed figure is
the median of 3 runs after a warm-up, and is set beside a raw baseline that does the same
work with plain transformers calls (on the very same model object, loads aside), so that the
ratio shows what the backend layer costs (Python loop, per-step log-softmax and top-k, locking):

- load: first access of `LocalBackend.model` (converted safetensors checkpoint), against
  `from_pretrained` of the same directory, each in a fresh process;
- chat-template prompt length, against the tokens of the message text alone;
- first-token latency after a ~200-token chat prefix (`stream`, max_tokens=1), against one
  forward pass plus argmax;
- decode speed: `stream` over 64 greedy tokens with top-20 logprobs per step, against
  `model.generate(..., do_sample=False, min_new_tokens=64)`;
- prefill speed: `prompt_logprobs(ids, top_k=20)` over ~400 tokens, against one forward pass.

Run from the project root (about 30-60 s on 2 cores):

    .venv/bin/python bench/bench_inference.py
"""

import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Run as a script, sys.path[0] is bench/; the project packages live one level up.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
# The table is the output; the backend's INFO lines would only interleave with it.
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
import transformers  # noqa: E402
from django.conf import settings  # noqa: E402

# Import the model code before any timing, so that neither the backend load nor the raw
# load pays for first-time module imports and the two are compared like for like.
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402, F401

from dataplatform.inference.local import LocalBackend, converted_dir, ensure_converted  # noqa: E402

REPEATS = 3
TOP_K = 20
DECODE_TOKENS = 64
FIRST_TOKEN_PREFIX = 200
PREFILL_TOKENS = 400

# Greedy decoding must not hit <|im_end|> before 64 tokens, or the backend would stop early
# while generate() is forced on by min_new_tokens: ask for something long.
DECODE_MESSAGE = "Write a long, detailed story about a lighthouse keeper who finds a message in a bottle."
FILLER = (
    "The annotator reads the model's answer token by token, stops at the first mistake, "
    "picks a better token from the alternatives, and lets the model continue from there. "
)

transformers.utils.logging.set_verbosity_error()  # generate() warns about unused sampling settings
# The backend turns the weight-loading progress bar off; the raw load must not pay for drawing it.
transformers.utils.logging.disable_progress_bar()


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def median_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> tuple[float, object]:
    """Median wall time over `repeats` runs after one untimed warm-up (first calls allocate caches)."""
    fn()
    runs = [timed(fn) for _ in range(repeats)]
    return statistics.median(seconds for seconds, _ in runs), runs[-1][1]


def chat_prefix(backend: LocalBackend, at_least: int) -> list[int]:
    """Chat-templated ids of a user message grown until the whole prompt has >= `at_least` tokens."""
    repeats = 1
    while len(ids := backend.chat_prompt_ids([{"role": "user", "content": FILLER * repeats}])) < at_least:
        repeats += 1
    return ids


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    # Sampled before we add our own load: it tells whether other work shared the CPUs,
    # which on 2 cores swings every figure.
    load_average = os.getloadavg()[0]
    rows: list[tuple[str, str, str, str]] = []

    def row(figure: str, backend_value: float, raw_value: float, fmt: str) -> None:
        rows.append((figure, format(backend_value, fmt), format(raw_value, fmt), f"{backend_value / raw_value:.2f}"))

    # --- load: once per process, so each run is a fresh child process (see cold_load). ------
    # The first load in a process costs 2-3x a later one (lazy initialisation in torch and
    # transformers), so in-process repeats would compare a cold backend with a warm baseline.
    ensure_converted(settings.DATA_DIR)  # no child may time the one-time GGUF conversion
    backend_loads, raw_loads = [], []
    for _ in range(REPEATS):  # interleaved, so any drift of the machine hits both alike
        backend_loads.append(child_load_seconds("backend"))
        raw_loads.append(child_load_seconds("raw"))
    row("load, converted safetensors (s)", statistics.median(backend_loads), statistics.median(raw_loads), ".2f")

    backend = LocalBackend(settings.DATA_DIR)
    model, tokenizer = backend.model, backend.tokenizer

    # --- chat-template prompt length, against the bare message: what the template adds
    # (role markers and the default system prompt). A count, so no ratio. ----------------------
    decode_prompt = backend.chat_prompt_ids([{"role": "user", "content": DECODE_MESSAGE}])
    message_tokens = len(backend.tokenize(DECODE_MESSAGE))
    rows.append(("chat-template prompt length (tokens)", str(len(decode_prompt)), str(message_tokens), "-"))

    # --- first token after a ~200-token prefix. --------------------------------------------
    prefix = chat_prefix(backend, FIRST_TOKEN_PREFIX)
    prefix_tensor = torch.tensor([prefix], dtype=torch.long)

    def backend_first_token():
        return next(iter(backend.stream(prefix, max_tokens=1, temperature=0, seed=0, top_k=TOP_K))).token_id

    def raw_first_token():
        with torch.inference_mode():
            return int(torch.argmax(model(input_ids=prefix_tensor).logits[0, -1]))

    first_backend, first_id = median_seconds(backend_first_token)
    first_raw, raw_first_id = median_seconds(raw_first_token)
    row(f"first token after {len(prefix)}-token prefix (s)", first_backend, first_raw, ".3f")

    # --- decode: 64 greedy tokens; the backend also returns top-20 logprobs per step. --------
    decode_tensor = torch.tensor([decode_prompt], dtype=torch.long)

    def backend_decode():
        steps = backend.stream(decode_prompt, max_tokens=DECODE_TOKENS, temperature=0, seed=0, top_k=TOP_K)
        return [step.token_id for step in steps]

    def raw_decode():
        with torch.inference_mode():
            output = model.generate(
                decode_tensor,
                attention_mask=torch.ones_like(decode_tensor),
                max_new_tokens=DECODE_TOKENS,
                min_new_tokens=DECODE_TOKENS,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
        return output[0, len(decode_prompt):].tolist()

    decode_backend, backend_tokens = median_seconds(backend_decode)
    decode_raw, raw_tokens = median_seconds(raw_decode)
    # Both include the short prompt's prefill; tok/s counts only the generated tokens.
    row(
        f"decode, {len(backend_tokens)} tok greedy + top-{TOP_K} (tok/s)",
        len(backend_tokens) / decode_backend,
        len(raw_tokens) / decode_raw,
        ".1f",
    )
    # A speed figure is only worth reading if both sides computed the same thing.
    same_tokens = first_id == raw_first_id and backend_tokens == raw_tokens[: len(backend_tokens)]

    # --- prefill: score ~400 prompt tokens in one pass. ---------------------------------------
    prefill_ids = chat_prefix(backend, PREFILL_TOKENS)
    prefill_tensor = torch.tensor([prefill_ids], dtype=torch.long)

    def raw_prefill():
        with torch.inference_mode():
            return model(input_ids=prefill_tensor).logits

    prefill_backend, _ = median_seconds(lambda: backend.prompt_logprobs(prefill_ids, top_k=TOP_K))
    prefill_raw, _ = median_seconds(raw_prefill)
    row(
        f"prefill, {len(prefill_ids)} tok + top-{TOP_K} per position (tok/s)",
        len(prefill_ids) / prefill_backend,
        len(prefill_ids) / prefill_raw,
        ".0f",
    )

    # --- print -------------------------------------------------------------------------------
    print(
        f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, torch {torch.__version__} "
        f"with {torch.get_num_threads()} threads, transformers {transformers.__version__}, "
        f"model {backend.model_id} fp32, load average before the run {load_average:.2f}"
    )
    benchlib.print_table(("figure", "backend", "raw baseline", "ratio"), rows, text_last=False)
    print(
        f"median of {REPEATS} (loads: fresh processes; the rest after a warm-up); ratio = backend / raw: "
        "above 1 is faster for tok/s, slower for seconds."
    )
    print(f"greedy tokens identical to the raw baseline (first token, decode): {'yes' if same_tokens else 'NO'}")
    print(f"peak RSS of this process: {peak_rss_mb():.0f} MB (the load runs are in child processes)")


def cold_load(kind: str) -> float:
    """One load as a new process sees it: the backend's first access of .model, or the same
    tokenizer + model `from_pretrained` calls made directly. Imports are already done above."""
    if kind == "backend":
        seconds, _ = timed(lambda: LocalBackend(settings.DATA_DIR).model)
    else:
        directory = converted_dir(settings.DATA_DIR)
        seconds, _ = timed(
            lambda: (
                AutoTokenizer.from_pretrained(directory),
                AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32),
            )
        )
    return seconds


def child_load_seconds(kind: str) -> float:
    """Run this script as `--cold-load KIND` in a fresh interpreter and read back its timing."""
    output = subprocess.run(
        [sys.executable, __file__, "--cold-load", kind], check=True, capture_output=True, text=True
    ).stdout
    return float(output.strip().splitlines()[-1])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cold-load"]:
        print(cold_load(sys.argv[2]))
    else:
        main()
