"""Benchmark of the standalone pull script against a raw download of the same files, from the web app really running.

It prints a table of figures; it is not a test and fails on nothing (it exits non-zero only when a run itself
fails or the pulled files do not verify). It measures, against `python -m dataplatform.webserver` (uvicorn,
as production runs it) on a free localhost port:

- the pull script as a trainer runs it (`python dataplatform_pull.py <export url> --out DIR --workers W`, a
  child process, the token in DATAPLATFORM_TOKEN), with 1 and with 4 workers: every shard to NAME.part,
  sha256 checked, renamed, the card verified, the manifest written last;
- a resumed pull: every shard already half there as NAME.part, continued with Range requests;
- two raw baselines, in the same run, each a child process too: one plain GET per file with urllib,
  written straight to disk, sequentially (no .part, no retries, no manifest), without and with a sha256 of
  each file afterwards (the least a verifying download does);

each the median of 3 runs, as MB/s and as ratios to the raw figures (target: the 1-worker pull at least
0.8x "raw + sha256": its .part files, retries, card check and manifest cost less than a fifth more), and
checks that the pulled files' sha256 match the manifest and their bytes the raw download's.

The export: 100,000 synthetic chat rows (about 1 KB of text each, of random words from an 8,000-word
vocabulary, so it compresses about as chat text does) written by the export engine in this
process as Parquet shards of 20,000 rows, in a dedicated SQLite database and DATA_DIR under `var/bench-pull/`
(recreated each run), so the bench needs neither PostgreSQL nor Redis. Run from the project root
(about a minute on 2 cores):

    .venv/bin/python bench/pull_bench.py [--rows 100000]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

BENCH_DIR = ROOT / "var" / "bench-pull"
# Set (not setdefault) before django.setup(): the bench must never write into another database or DATA_DIR.
# The web server child inherits this environment.
os.environ["DATA_DIR"] = str(BENCH_DIR)
os.environ["DATABASE_URL"] = f"sqlite:///{BENCH_DIR / 'db.sqlite3'}"
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ.pop("REDIS_URL", None)  # the filesystem broker: the export's job is run here, by execute_job
os.environ.pop("EXPORTS_S3_BUCKET", None)  # local storage: the figures are the app's, not an object store's
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

shutil.rmtree(BENCH_DIR, ignore_errors=True)
django.setup()

import pyarrow as pa  # noqa: E402
from django.core.management import call_command  # noqa: E402

from dataplatform.exports.pull_script import dataplatform_pull  # noqa: E402
from dataplatform.exports.registry import ExportFilters, ExportKind, register  # noqa: E402

SCRIPT = Path(dataplatform_pull.__file__)
SHARD_ROWS = 20_000
REPEATS = 3
TARGET_RAW_RATIO = 0.8
KIND = "bench.pull_rows"
SCHEMA = pa.schema([("id", pa.int64()),
                    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))])
# A vocabulary large enough that the text compresses about as real chat text does (zstd ~3x), not to nothing.
VOCABULARY = [format(n * 2654435761 % 16**6, "x") for n in range(8_000)]


def _rows(query):
    total = int(query.data_version)
    for start in range(0, total, 10_000):
        yield [{"id": i, "messages": [
            {"role": "user", "content": " ".join(random.Random(i).choices(VOCABULARY, k=40))},
            {"role": "assistant", "content": " ".join(random.Random(-i - 1).choices(VOCABULARY, k=120))}]}
            for i in range(start, min(start + 10_000, total))]


def make_export(rows: int):
    from django.contrib.auth import get_user_model

    from dataplatform.accounts import services as account_services
    from dataplatform.accounts.models import Membership, Project, Role
    from dataplatform.exports import services as export_services
    from dataplatform.jobs.services import execute_job

    register(ExportKind(name=KIND, version=1, schema=SCHEMA, label="Pull bench rows", rows=_rows,
                        data_version=lambda project: str(rows), append_only=True, group="row", group_by=("id",),
                        filters=ExportFilters,
                        field_meanings={"id": "The row.", "messages": "A synthetic user turn and answer."}))
    call_command("migrate", verbosity=0)
    project = Project.objects.create(slug="bench", name="Pull bench")
    trainer = get_user_model().objects.create_user(username="trainer", password="unused-" + os.urandom(8).hex())
    Membership.objects.create(project=project, user=trainer, role=Role.TRAINER)
    _, secret = account_services.issue_token(user=trainer, name="pull bench", read_only=True)
    export = export_services.create_export(project=project, user=None, options={
        "kind": KIND, "format": "parquet", "shard_rows": SHARD_ROWS, "validation_ratio": 0.05}, publish=False)
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    return export, secret


def pull_script(url: str, out: Path, secret: str, workers: int) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(SCRIPT), url, "--out", str(out), "--workers", str(workers)],
                          env={**os.environ, "DATAPLATFORM_TOKEN": secret}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the pull script failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def raw_download(url: str, names: list[str], out: Path, secret: str, *, hash_files: bool) -> float:
    """The baseline, in a child process as the script is: one plain GET per file, sequentially, straight to
    disk; with `hash_files`, each file's sha256 afterwards (the least any verifying download must do)."""
    out.mkdir(parents=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RAW_CHILD, url, str(out), "1" if hash_files else "", *names],
                          env={**os.environ, "DATAPLATFORM_TOKEN": secret}, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the raw download failed:\n{done.stderr[-2000:]}")
    return seconds


RAW_CHILD = """
import hashlib, os, shutil, sys, urllib.request
url, out, hash_files, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
headers = {"Authorization": "Bearer " + os.environ["DATAPLATFORM_TOKEN"]}
for name in names:
    with urllib.request.urlopen(urllib.request.Request(url + "shards/" + name, headers=headers)) as response:
        with open(os.path.join(out, name), "wb") as handle:
            shutil.copyfileobj(response, handle, 1 << 20)
    if hash_files:
        with open(os.path.join(out, name), "rb") as handle:
            hashlib.file_digest(handle, "sha256")
"""


def half_parts(source: Path, out: Path, names: list[str]) -> None:
    out.mkdir(parents=True)
    for name in names:
        data = (source / name).read_bytes()
        (out / f"{name}.part").write_bytes(data[: len(data) // 2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    load_average = os.getloadavg()[0]
    export, secret = make_export(args.rows)
    manifest = export.manifest
    names = [shard["name"] for shard in manifest["shards"]] + [manifest["card"]["name"]]
    megabytes = (manifest["totals"]["bytes"] + manifest["card"]["bytes"]) / 1e6
    server = benchlib.Server("asgi", BENCH_DIR)
    try:
        server.wait_ready(secret)
        url = f"{server.base_url}/api/v1/projects/bench/exports/{export.pk}/"
        runs = {"raw": [], "raw + sha256": [], "pull, 1 worker": [], "pull, 4 workers": [],
                "pull, resumed from half (1 worker)": []}
        for repeat in range(REPEATS):
            work = BENCH_DIR / f"run-{repeat}"
            runs["raw"].append(raw_download(url, names, work / "raw", secret, hash_files=False))
            runs["raw + sha256"].append(raw_download(url, names, work / "raw-hashed", secret, hash_files=True))
            runs["pull, 1 worker"].append(pull_script(url, work / "one", secret, 1))
            runs["pull, 4 workers"].append(pull_script(url, work / "four", secret, 4))
            half_parts(work / "raw", work / "resumed", names)
            runs["pull, resumed from half (1 worker)"].append(pull_script(url, work / "resumed", secret, 1))
    finally:
        server.stop()

    problems = []
    for folder in ("one", "four", "resumed"):
        pulled = BENCH_DIR / "run-0" / folder
        for shard in manifest["shards"]:
            if dataplatform_pull.file_sha256(pulled / shard["name"]) != shard["sha256"]:
                problems.append(f"{folder}/{shard['name']}: sha256 differs from the manifest")
            if (pulled / shard["name"]).read_bytes() != (BENCH_DIR / "run-0" / "raw" / shard["name"]).read_bytes():
                problems.append(f"{folder}/{shard['name']}: bytes differ from the raw download")
        if not (pulled / "manifest.json").exists():
            problems.append(f"{folder}: no manifest.json")

    raw, hashed = statistics.median(runs["raw"]), statistics.median(runs["raw + sha256"])
    print(f"Pull bench: export of {manifest['totals']['rows']:,} rows in {manifest['totals']['shards']} Parquet shards "
          f"+ card, {megabytes:.1f} MB, from {server.label}; median of {REPEATS}; load average {load_average:.2f} "
          f"at start, {os.cpu_count()} cores")
    table = []
    for label, seconds in runs.items():
        median = statistics.median(seconds)
        # A resumed pull moves half the bytes: its rate is over what it downloaded.
        moved = megabytes / 2 if "resumed" in label else megabytes
        table.append((label, f"{median:.2f} s", f"{moved / median:.0f} MB/s",
                      f"{raw / median * moved / megabytes:.2f}x", f"{hashed / median * moved / megabytes:.2f}x"))
    benchlib.print_table(("run", "seconds", "rate", "vs raw", "vs raw + sha256"), table, text_last=False)
    one = statistics.median(runs["pull, 1 worker"])
    print(f"target: pull with 1 worker >= {TARGET_RAW_RATIO}x raw + sha256: {hashed / one:.2f}x "
          f"({'met' if hashed / one >= TARGET_RAW_RATIO else 'NOT met'})")
    print(f"verified: {'yes' if not problems else 'NO'}")
    if problems:
        raise SystemExit("\n".join(problems))


if __name__ == "__main__":
    main()
