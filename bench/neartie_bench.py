"""Benchmark of ATD ancestor scoring: the platform's job against the same backend calls made directly.

It prints a table; it is not a test. The platform run creates a judge scoring run (both orders,
debiased) over PROMPTS synthetic prompts with two candidates each and runs its `atd.score` job with
`execute_job` in this process (as a worker would): building the judge prompts, one
`next_token_logprobs` call per batch (both orders of every prompt of the batch together), the q
arithmetic and one bulk insert per batch. A recording wrapper keeps every backend scoring call; the
baseline replays exactly those calls on the bare backend, same batching, nothing around them. The
ratio (direct seconds / platform seconds) is what the job costs on top of the model. Target: >= 0.9x.

Run from the project root, with PostgreSQL on 127.0.0.1:5432 (about 2 minutes on 2 cores):

    .venv/bin/python bench/neartie_bench.py [--prompts 64] [--batch 16]
"""

import argparse
import os
import platform
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
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


if __name__ == "__main__":
    main()
