"""Benchmark of ATD ancestor scoring: the platform's job against the same backend calls made directly.

It prints a table; it is not a test. The platform run creates a judge scoring run (both orders,
debiased) over PROMPTS synthetic prompts with two candidates each and runs its `atd.score` job with
`execute_job` in this process (as a worker would): building the judge prompts, one
`next_token_logprobs` call per batch (both orders of every prompt of the batch together), the q
arithmetic and one bulk insert per batch. A recording wrapper keeps every backend scoring call; the
baseline replays exactly those calls on the bare backend, same batching, nothing around them. The
ratio (direct seconds / platform seconds) is what the job costs on top of the model. Target: >= 0.9x.

Then the same recorded calls go through the vLLM client (`VllmBackend`) to the embedded model server
(`manage.py serve_model`, a child process with its own copy of the model) twice: by vLLM's
`logprob_token_ids`, each prompt sent once, and by the fallback, forced, that servers without it get (one
sequence per prompt and candidate, with `prompt_logprobs`). It prints both paths' requests, prompts sent
and seconds, the ratio (fallback seconds / listed seconds), and the largest difference of their scores.

Run from the project root, with PostgreSQL on 127.0.0.1:5432 (about 2 minutes on 2 cores, and 6-8 more for the
model server's part; `--no-model-server` leaves it out):

    .venv/bin/python bench/neartie_bench.py [--prompts 64] [--batch 16] [--no-model-server]
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench_neartie"
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"  # never another database
os.environ.setdefault("DATA_DIR", str(ROOT / "var"))
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["LOG_LEVEL"] = "WARNING"
os.environ.pop("REDIS_URL", None)  # the job runs in this process

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from corpora.atd import selectors, services  # noqa: E402
from corpora.atd.models import AtdPrompt, Score  # noqa: E402
from dataplatform.accounts.models import Project  # noqa: E402
from dataplatform.inference import get_backend, override_backend  # noqa: E402
from dataplatform.inference.vllm import VllmBackend  # noqa: E402
from dataplatform.jobs.models import JobState  # noqa: E402
from dataplatform.jobs.services import execute_job  # noqa: E402

TARGET_RATIO = 0.9
QUESTIONS = ["Name a good first programming language and say why.", "How do I keep basil alive indoors?",
             "Explain what a hash map is in one paragraph.", "Suggest a name for a grey cat.",
             "Is it better to run in the morning or the evening?"]


def setup(prompts: int) -> tuple[Project, object]:
    benchlib.ensure_database(SERVER_URL, BENCH_DB)
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-neartie")
    Project.objects.filter(slug="bench-neartie").delete()
    project = Project.objects.create(slug="bench-neartie", name="Near-tie bench")
    AtdPrompt.objects.bulk_create([
        AtdPrompt(project=project, external_id=f"q{n}",
                  messages=[{"role": "user", "content": f"{QUESTIONS[n % len(QUESTIONS)]} (variant {n})"}],
                  candidate_a=f"A short, direct answer number {n}.",
                  candidate_b=f"A longer answer, number {n}, with an example and a caveat.",
                  source_sha256=f"{n:064d}")
        for n in range(prompts)])
    return project, user


def through_the_model_server(calls: list[tuple]) -> None:
    """The recorded `next_token_logprobs` calls through the vLLM client to the embedded model server, by
    `logprob_token_ids` and by the fallback, forced; prints their table."""
    log_dir = Path(tempfile.mkdtemp(prefix="neartie-bench-"))
    server = benchlib.Server("model", log_dir)
    try:
        server.wait_ready()
        client = VllmBackend(base_url=server.base_url, model="", api_key="", timeout=600, tokenizer_dir=None)
        sent: list[int] = []  # the prompts of each /v1/completions request

        def count(request) -> None:
            if request.url.path == "/v1/completions":
                sent.append(len(json.loads(request.content)["prompt"]))

        client._client.event_hooks["request"].append(count)
        # One call each way first (the server's first forward passes, and the listed path's one probe).
        prompts, candidates = calls[0]
        client.next_token_logprobs(prompts[:1], candidates)
        if client.answers_logprob_token_ids is not True:
            raise SystemExit("the model server did not answer `logprob_token_ids`")
        figures = {}
        for path, answers in (("listed", True), ("fallback", False)):
            client.answers_logprob_token_ids = answers
            client.next_token_logprobs(prompts[:1], candidates)
            sent.clear()
            started = time.perf_counter()
            scores = [client.next_token_logprobs(prompts, candidates) for prompts, candidates in calls]
            figures[path] = (time.perf_counter() - started, len(sent), sum(sent), scores)
        client.close()
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    (listed, listed_requests, listed_prompts, listed_scores) = figures["listed"]
    (fallback, fallback_requests, fallback_prompts, fallback_scores) = figures["fallback"]
    difference = max(abs(row[token] - other[token])
                     for call, other_call in zip(listed_scores, fallback_scores, strict=True)
                     for row, other in zip(call, other_call, strict=True) for token in row)
    print(f"\nThe same {len(calls)} calls through the vLLM client to the embedded model server "
          "(manage.py serve_model):")
    benchlib.print_table(("figure", "logprob_token_ids", "fallback (prompt_logprobs)", "ratio"), [
        ("seconds in all", f"{listed:.1f}", f"{fallback:.1f}", f"{fallback / listed:.2f}x"),
        ("requests", str(listed_requests), str(fallback_requests), f"{fallback_requests / listed_requests:.2f}x"),
        ("prompts sent (prefills)", str(listed_prompts), str(fallback_prompts),
         f"{fallback_prompts / listed_prompts:.2f}x"),
    ])
    print(f"max |listed - fallback| over every score: {difference:.2e}. The model server answers a listed prompt with "
          "a 1-token generation and one scoring pass, a fallback sequence with a 1-token generation and one "
          "prompt-logprobs pass; on vLLM the fallback's `prompt_logprobs` also turns its prefix cache off.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--no-model-server", action="store_true", help="leave out the vLLM client's part")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    project, user = setup(args.prompts)
    backend = get_backend()
    # Load the model and run one forward pass first: neither side's figure includes the one-time costs.
    warm = backend.chat_prompt_ids([{"role": "user", "content": "warm up"}])
    backend.next_token_logprobs([warm, warm[:-1]], [warm[-1]])
    recording = benchlib.RecordingBackend(backend, ("next_token_logprobs",))
    run = services.start_scoring(project=project, batch_size=args.batch, user=user, publish=False)
    started = time.perf_counter()
    with override_backend(recording):  # backend_for is the job's only way to the backend
        execute_job(job_id=run.job_id)
    platform_seconds = time.perf_counter() - started
    run.job.refresh_from_db()
    if run.job.state != JobState.SUCCEEDED:
        raise SystemExit(f"the job failed: {run.job.error}")

    started = time.perf_counter()
    recording.replay()
    direct_seconds = time.perf_counter() - started

    scores = Score.objects.filter(run=run)
    qs = list(scores.values_list("q", flat=True))
    sequences = sum(len(args_[0]) for _, args_, _ in recording.calls)
    ratio = direct_seconds / platform_seconds
    rows = [
        ("prompts/s", f"{args.prompts / platform_seconds:.2f}", f"{args.prompts / direct_seconds:.2f}",
         f"{ratio:.2f}x", f">= {TARGET_RATIO}x"),
        ("seconds in all", f"{platform_seconds:.1f}", f"{direct_seconds:.1f}",
         f"+{platform_seconds - direct_seconds:.1f} s", ""),
        ("backend calls (sequences)", f"{len(recording.calls)} ({sequences})", f"{len(recording.calls)} ({sequences})",
         "-", "one call per batch, both orders"),
    ]
    benchlib.print_table(("figure", "platform job", "direct calls", "ratio", "target"), rows)
    print(f"{args.prompts} prompts, batch {args.batch}, judge with order debiasing (2 sequences a prompt); backend "
          f"{backend.name} ({backend.model_id}); {scores.count()} scores written, each prompt once; q in "
          f"[{min(qs):.3f}, {max(qs):.3f}], {selectors.kept_count(run, 0.02)} near-ties at epsilon 0.02.")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, load average before the run {load:.2f}")
    print(f"target: ratio >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'MISSED'} ({ratio:.2f}x)")
    if not args.no_model_server:
        through_the_model_server([args_ for _, args_, _ in recording.calls])


if __name__ == "__main__":
    main()
