"""Benchmark of onPanda's rollout job on the embedded model, against the same backend's raw batched generation
and against today's one-at-a-time path, in the same run.

It prints a table; it is not a test. Three ways to answer the same 32 items, 64 tokens each with top-20
logprobs at every position, temperature 0, on one backend object (SmolLM2-135M on CPU):

- the rollout job: an `annotate.rollouts` job over a project of 32 items, run with `execute_job` in this
  process as a worker runs it (progress reporter, heartbeat, `generate_rollouts` reading the items in keyset
  batches, rendering the prompts, `backend.rollouts`, parsing and saving each rollout as it arrives);
- the raw batched generation: `backend.rollouts` with the same prompt ids and seeds, nothing around it,
  nothing saved;
- one at a time: `backend.stream` of each prompt in turn (what `generate_rollouts` did before batching).

The job and the raw generation alternate for `--rounds` rounds (median seconds of each); one at a time runs
once (it is the slow one). Targets: job >= 0.8x the raw rate, and >= 3x the one-at-a-time rate. The prompts
ask for long stories, so that every answer runs to 64 tokens (the table says how many were generated). It
then checks that the token ids the job saved equal the raw batched ids and the one-at-a-time ids of every
item ("verified").

Everything lives in a dedicated PostgreSQL database `dataplatform_rollout_bench` (created if missing,
migrated on every run; its project is made anew each run); DATA_DIR is `var/`, so the converted model under
var/models/ is reused. Run from the project root (about 4 minutes on 2 cores):

    .venv/bin/python bench/rollout_bench.py [--rounds 3]
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_rollout_bench"
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"  # never another database
os.environ["DATA_DIR"] = str(ROOT / "var")  # var/models/ holds the converted model
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["MODEL_BACKEND"] = "local"
os.environ["LOG_LEVEL"] = "WARNING"
os.environ.pop("REDIS_URL", None)  # the job runs in this process

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from annotate import services  # noqa: E402
from annotate.models import Item  # noqa: E402
from annotate.prompts import render_prompt, stored_prompt  # noqa: E402
from dataplatform.accounts.models import Project  # noqa: E402
from dataplatform.inference import backend_for  # noqa: E402

ITEMS, MAX_TOKENS, TOP_K, TEMPERATURE = 32, 64, 20, 0.0
TARGET_RAW, TARGET_ONE_AT_A_TIME = 0.8, 3.0
SLUG = "bench-rollouts"
TOPICS = ["the moon", "photosynthesis", "a lighthouse", "prime numbers", "the ocean", "volcanoes", "bread",
          "the Roman empire", "honeybees", "electricity", "chess", "a lost key", "winter in a mountain village",
          "a robot that learns to paint", "the first day at a new school", "a river", "an old library",
          "a train journey across a desert", "a garden", "a city at night", "a dragon", "a storm at sea",
          "a clockmaker", "a forest fire", "a market", "the stars", "a small cafe", "a bridge", "a violin",
          "a cat", "a letter never sent", "a festival"]


def setup() -> tuple[Project, object]:
    benchlib.ensure_database(SERVER_URL, BENCH_DB)
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-rollouts")
    Project.objects.filter(slug=SLUG).delete()
    project = Project.objects.create(slug=SLUG, name="Rollout bench")
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = MAX_TOKENS, TOP_K, TEMPERATURE
    config.seed_policy, config.seed = "fixed", 0
    config.save()
    # Open-ended prompts: the model writes on past 64 tokens, so every row decodes the whole budget.
    Item.objects.bulk_create([
        Item(project=project, source_sha256=f"{n:064d}",
             messages=[{"role": "user", "content": f"Write a long, detailed story about {TOPICS[n % len(TOPICS)]}."}])
        for n in range(ITEMS)])
    return project, user


def prompts_of(project: Project, backend) -> tuple[list[list[int]], list[int | None]]:
    """The prompt ids and seeds the job gives the backend, item by item in id order."""
    config = services.config_for(project)
    template = services.template_of(config, backend)
    items = list(Item.objects.filter(project=project).order_by("id"))
    prompts = [render_prompt(backend, stored_prompt(item.messages, item.tools), template) for item in items]
    return prompts, [services.seed_for(config, item, "rollout") for item in items]


def run_job(project: Project, user) -> float:
    """Seconds of one `annotate.rollouts` job over the project, every item unanswered at the start."""
    Item.objects.filter(project=project).update(rollout=None, prompt_ids=None)
    return benchlib.run_job_inline(project=project, kind="annotate.rollouts", user=user)


def run_raw(backend, prompts, seeds) -> tuple[float, list[list[int]]]:
    started = time.perf_counter()
    results = dict(backend.rollouts(prompts, max_tokens=MAX_TOKENS, temperature=TEMPERATURE, seeds=seeds, top_k=TOP_K))
    seconds = time.perf_counter() - started
    return seconds, [[step.token_id for step in results[i]] for i in range(len(prompts))]


def run_one_at_a_time(backend, prompts, seeds) -> tuple[float, list[list]]:
    started = time.perf_counter()
    runs = [list(backend.stream(ids, max_tokens=MAX_TOKENS, temperature=TEMPERATURE, seed=seed, top_k=TOP_K))
            for ids, seed in zip(prompts, seeds, strict=True)]
    return time.perf_counter() - started, runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="job and raw runs, alternating (median of each)")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    run_started = time.perf_counter()
    project, user = setup()
    backend = backend_for(project, model=services.config_for(project).model_name)
    prompts, seeds = prompts_of(project, backend)
    # Load the model and decode a little first: no figure includes the one-time costs.
    list(backend.rollouts(prompts[:2], max_tokens=2, temperature=TEMPERATURE, seeds=seeds[:2], top_k=TOP_K))

    job_seconds, raw_seconds = [], []
    for _ in range(args.rounds):
        job_seconds.append(run_job(project, user))
        seconds, raw_ids = run_raw(backend, prompts, seeds)
        raw_seconds.append(seconds)
    one_seconds, one_runs = run_one_at_a_time(backend, prompts, seeds)

    items = list(Item.objects.filter(project=project).order_by("id"))
    job_ids = [item.rollout["token_ids"] for item in items]
    one_ids = [[step.token_id for step in steps] for steps in one_runs]
    same_prompts = [item.prompt_ids for item in items] == prompts
    verified = same_prompts and job_ids == raw_ids == one_ids
    logprob_gap = max(abs(saved - step.logprob) for item, steps in zip(items, one_runs, strict=True)
                      for saved, step in zip(item.rollout["logprobs"], steps, strict=False))
    tokens = sum(len(ids) for ids in job_ids)

    job, raw = statistics.median(job_seconds), statistics.median(raw_seconds)
    to_raw, to_one = raw / job, one_seconds / job
    rows = [
        ("rows/s", f"{ITEMS / job:.2f}", f"{ITEMS / raw:.2f}", f"{ITEMS / one_seconds:.2f}", f"{to_raw:.2f}x",
         f"{to_one:.2f}x"),
        ("tokens/s", f"{tokens / job:.1f}", f"{tokens / raw:.1f}", f"{tokens / one_seconds:.1f}", f"{to_raw:.2f}x",
         f"{to_one:.2f}x"),
        ("seconds", f"{job:.1f}", f"{raw:.1f}", f"{one_seconds:.1f}", "", ""),
        ("target", "", "", "", f">= {TARGET_RAW}x", f">= {TARGET_ONE_AT_A_TIME:g}x"),
    ]
    benchlib.print_table(("figure", "rollout job", "raw batched", "one at a time", "job/raw", "job/one-at-a-time"),
                         rows, text_last=False)
    lengths = [len(ids) for ids in job_ids]
    print(f"{ITEMS} items x max_tokens {MAX_TOKENS}, top_k {TOP_K}, temperature {TEMPERATURE:g}; prompts of "
          f"{min(map(len, prompts))}-{max(map(len, prompts))} tokens; {tokens} tokens generated ({min(lengths)}-"
          f"{max(lengths)} per item, {sum(n == MAX_TOKENS for n in lengths)} of {ITEMS} ran to {MAX_TOKENS}); "
          f"local batches of up to {backend.max_rollout_batch} rows. Job and raw: median of {args.rounds} alternating "
          f"runs (job {', '.join(f'{s:.1f}' for s in job_seconds)} s; raw {', '.join(f'{s:.1f}' for s in raw_seconds)}"
          f" s); one at a time: 1 run. Ratios are of rates (rows/s).")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, "
          f"backend {backend.name} ({backend.model_id}, fp32), database {BENCH_DB}, load average before the run "
          f"{load:.2f}")
    print(f"targets: job/raw >= {TARGET_RAW}x: {'met' if to_raw >= TARGET_RAW else 'MISSED'} ({to_raw:.2f}x); "
          f"job/one-at-a-time >= {TARGET_ONE_AT_A_TIME:g}x: {'met' if to_one >= TARGET_ONE_AT_A_TIME else 'MISSED'} "
          f"({to_one:.2f}x)")
    print(f"verified: {'yes' if verified else 'NO'} (for each of the {ITEMS} items the job's saved prompt ids are the "
          f"rendered prompt, and its saved token ids equal the raw batched ids and the one-at-a-time ids; largest "
          f"logprob difference between the job and one at a time {logprob_gap:.1e})")
    print(f"run time {time.perf_counter() - run_started:.0f} s")


if __name__ == "__main__":
    main()
