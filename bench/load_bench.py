"""Load test of the onPanda loop and the trainers' export pulls, on the real stack, against one client alone.

It prints a table of figures; it is not a test and fails on nothing (it exits non-zero only when the
run itself fails). The web app runs for real: `python -m dataplatform.webserver --workers 4` (uvicorn, as
docker-compose.yml runs it, DEBUG off; `--web-workers`) as a child process on a free localhost port, on PostgreSQL
(its own database `dataplatform_bench_load`) and Redis (database 9, the cache), with the real CPU model. Where the model runs is the
`--model` choice:

- `server` (the default, production's shape): in a process of its own behind vLLM's HTTP API
  (`manage.py serve_model`, `--model-threads` torch threads, default 1 so the web process keeps a core of
  the two), and the web app reaches it as it reaches vLLM (MODEL_BACKEND=vllm). It runs at a lower CPU
  priority than the web (`--model-nice`, default 12), as compose's `cpu-model` profile runs it
  (`cpu_shares: 64`): when both want the CPU, a person's request goes before the model's next step;
- `in-process`: MODEL_BACKEND=local, loaded once inside the web process, whose forward passes then hold
  the GIL that every other request of that process needs (the embedded default's `make run` shape).

The clients are asyncio + httpx in this process (bench/loadlib.py), on loopback only, each with its
own keep-alive connection and API token:

- 50 annotators, each doing `--rounds` loops of the onPanda API: claim the next item
  (`POST .../annotate/claim/`), read the session (`GET /api/v1/sessions/{id}/`), read the top-k
  candidates at a random position (`GET .../nodes/{node}/candidates/{position}/`), post a correction
  with one of them (`POST .../correct/`), stream the continuation (`POST .../nodes/{node}/stream/`,
  read to the `done` event) and accept (`POST .../accept/`), with a think time of 0.2-0.8 s before the
  candidates, the correction and the accept (far faster than a person: a load, not a simulation of a
  working day); they start at random moments in the first 10 s (a ramp of 5 a second: with all 50
  pressing Claim in the same second, the first round measured the burst, not the steady load);
- at the same time 3 trainers, each polling the export list and one export, then downloading its
  manifest and every shard (size and sha256 checked against the manifest), with the same think time,
  until the annotators are done. The export (platform.jobs, 2,000 rows, Parquet, 5 shards) is created
  at set-up through the exports service and written by running its job in this process.

Per endpoint it reports the requests, the throughput (requests/s over the load's wall time), p50 / p95
/ p99 latency and the errors (any unexpected status, transport error, wrong body, or a stream that
sends `error` or stops before `done`), beside the same endpoints run by one client alone (one
annotator's loops, then one trainer's rounds, no concurrency) in the same run, with p95(50 clients) /
p95(1 client). Targets: 0 errors; claim p95 < 50 ms; every other non-streaming endpoint p95 < 150 ms.
The stream is reported apart and honestly: the model is one shared resource (one forward pass at a
time per process), so a continuation waits behind every other annotator's; its latency is queueing on
the model, and no target applies to it. The run is bounded: fixed rounds per client and a global time
limit (`--time-limit`); on the limit it stops and reports what completed. After the run it checks in
the database that every loop's session ended accepted and that no item was claimed twice.

Small max_tokens (12) so the CPU model keeps up; the items' real rollouts are kept between runs (the
first run generates them, ~2 minutes on 2 cores); claims and sessions of the previous run are deleted at
the start. DATA_DIR is `var/` (the converted model under var/models/ is reused; the export's files go
under var/files/exports/bench-load/).

Run from the project root (about 3 minutes on 2 cores), with PostgreSQL on 127.0.0.1:5432 (user
postgres, no password):

    .venv/bin/python bench/load_bench.py [--annotators 50] [--rounds 4] [--trainers 3] [--max-tokens 12]
                                         [--time-limit 480] [--model server|in-process] [--model-threads 1]
                                         [--web-workers 4] [--model-nice 12]

Besides the client's latencies it reports each endpoint's `app p95`, the app's own time from the
`Server-Timing` header (the rest is uvicorn, loopback and this client), and the CPU seconds of the web
processes, the model, PostgreSQL and the load client over the load: on 2 cores they all share the CPU.

The smallest version runs in the test suite: tests/integration/test_load_smoke.py.
"""

import argparse
import dataclasses
import json
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is bench/; the project packages live one level up.
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)
import loadlib  # noqa: E402

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench_load"
# Set (not setdefault) before django.setup(): the bench must never write into another database.
# The server started below inherits this environment.
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"
os.environ["DATA_DIR"] = str(ROOT / "var")
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["MODEL_BACKEND"] = "local"
os.environ["DEBUG"] = "0"  # as in production (no query log); needs a SECRET_KEY
os.environ["SECRET_KEY"] = "load-bench-" + secrets.token_hex(16)
# Redis as in production: the cache behind the brute-force limits and the per-hour token-use tally is
# touched by every authenticated request (without REDIS_URL it would be the file cache of `make run`, a
# few file writes and a directory scan per request). Its own database, emptied at the start: an earlier
# run's failure counts must not throttle this one. Nothing here publishes a job.
BENCH_REDIS_URL = "redis://127.0.0.1:6379/9"
os.environ["REDIS_URL"] = BENCH_REDIS_URL
os.environ["LOG_LEVEL"] = "WARNING"

import django  # noqa: E402
import redis  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402

from annotate.models import Claim, Session, SessionStatus  # noqa: E402

SLUG = "bench-load"
TARGET_CLAIM_P95_MS = 50.0
TARGET_P95_MS = 150.0
THINK = (0.2, 0.8)
RAMP = 10.0  # seconds over which the annotators start (5 a second): people do not all press Claim at once


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4, help="onPanda loops per annotator")
    parser.add_argument("--trainers", type=int, default=3)
    parser.add_argument("--trainer-rounds", type=int, default=40, help="at most; they stop with the annotators")
    parser.add_argument("--baseline-rounds", type=int, default=8, help="loops (and trainer rounds) of the one client")
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--time-limit", type=float, default=480.0, help="seconds for the 50-client load")
    parser.add_argument("--samples", type=Path, help="also write every request of the load here (JSON lines)")
    parser.add_argument("--model", choices=("server", "in-process"), default="server",
                        help="the model in its own process behind vLLM's API (default), or inside the web process")
    parser.add_argument("--model-threads", type=int, default=1, help="torch threads of the model server")
    parser.add_argument("--model-nice", type=int, default=12,
                        help="run the model server at this nice level (default 12: the CPU weight docker-compose.yml "
                             "gives the model service, cpu_shares 64 against the web's 1024; 0: the same weight "
                             "as the web)")
    parser.add_argument("--web-workers", type=int, default=4,
                        help="uvicorn worker processes (default 4, as docker-compose.yml runs the web service)")
    return parser.parse_args()


def plan_for(setup: dict, base_url: str, args, *, annotators: list[str], trainers: list[str], rounds: int,
             trainer_rounds: int, seed: int) -> loadlib.LoadPlan:
    return loadlib.LoadPlan(base_url=base_url, slug=SLUG, annotator_secrets=annotators, trainer_secrets=trainers,
                            export_id=setup["export_id"], rounds=rounds, trainer_rounds=trainer_rounds,
                            max_tokens=args.max_tokens, avoid_token_ids=setup["eos_ids"], think=THINK,
                            ramp=RAMP if len(annotators) > 1 else 0.0, time_limit=args.time_limit, seed=seed)


def fail_on_errors(label: str, result: loadlib.LoadResult) -> None:
    if result.errors:
        raise SystemExit(f"{label} failed ({len(result.errors)} errors):\n" + "\n".join(result.errors[:10]))


def main() -> None:
    args = arguments()
    load_average = os.getloadavg()  # before we add our own load: on 2 cores other work swings every figure
    run_started = time.perf_counter()
    benchlib.ensure_database(SERVER_URL, BENCH_DB)
    redis.Redis.from_url(BENCH_REDIS_URL).flushdb()
    call_command("migrate", verbosity=0)
    items = args.annotators * args.rounds + args.baseline_rounds + 2 * args.web_workers  # + the warm-up's
    setup = loadlib.prepare(slug=SLUG, items=items, annotators=args.annotators, trainers=args.trainers,
                            max_tokens=args.max_tokens, user_prefix="bench-load-")
    setup_seconds = time.perf_counter() - run_started

    log_dir = Path(tempfile.mkdtemp(prefix="load-bench-"))
    servers: dict[str, benchlib.Server] = {}
    failed = True
    try:
        web_env = None  # in-process: this process's environment, MODEL_BACKEND=local
        if args.model == "server":
            servers["model"] = model_server = benchlib.Server("model", log_dir, model_threads=args.model_threads,
                                                                  nice=args.model_nice)
            model_server.wait_ready()
            web_env = dict(os.environ) | {"MODEL_BACKEND": "vllm", "VLLM_BASE_URL": model_server.base_url,
                                          "MODEL_NAME": "", "VLLM_API_KEY": "",
                                          "VLLM_TOKENIZER_DIR": str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct")}
        servers["asgi"] = server = benchlib.Server("asgi", log_dir, env=web_env, workers=args.web_workers)
        ready = server.wait_ready(setup["annotator_secrets"][0])
        one, trainer = setup["annotator_secrets"][:1], setup["trainer_secrets"][:1]
        # Warm-up, not counted: the first requests of each process are slow (and in-process, the first
        # stream loads the model). Several clients at once, so that each worker process gets some.
        warm = setup["annotator_secrets"][:2 * args.web_workers]
        fail_on_errors("warm-up", loadlib.run_load(plan_for(setup, server.base_url, args, annotators=warm,
                                                            trainers=trainer, rounds=1, trainer_rounds=1, seed=1)))
        # The baseline: one annotator alone, then one trainer alone: no concurrency at all.
        baseline = loadlib.run_load(plan_for(setup, server.base_url, args, annotators=one, trainers=[],
                                             rounds=args.baseline_rounds, trainer_rounds=0, seed=2))
        baseline_trainer = loadlib.run_load(plan_for(setup, server.base_url, args, annotators=[], trainers=trainer,
                                                     rounds=0, trainer_rounds=args.baseline_rounds, seed=3))
        fail_on_errors("baseline", baseline)
        fail_on_errors("baseline (trainer)", baseline_trainer)
        baseline.samples += baseline_trainer.samples
        baseline_seconds = baseline.seconds + baseline_trainer.seconds
        baseline_loops = list(baseline.loops)

        # uvicorn's worker processes are children of its supervisor; this process alone is the load client.
        processes = {"web" if args.model == "server" else "web (with the model)":
                     lambda: benchlib.process_tree(server.process.pid)}
        if args.model == "server":
            processes["model"] = lambda: benchlib.process_tree(model_server.process.pid)
        processes |= {"PostgreSQL": benchlib.postgres_pids, "load client": lambda: [os.getpid()]}
        with benchlib.ConnectionSampler(SERVER_URL, BENCH_DB) as sampler, benchlib.CpuMeter(processes) as cpu:
            load = loadlib.run_load(plan_for(setup, server.base_url, args, annotators=setup["annotator_secrets"],
                                             trainers=setup["trainer_secrets"], rounds=args.rounds,
                                             trainer_rounds=args.trainer_rounds, seed=4))
        load_average_during = os.getloadavg()
        failed = False
    finally:
        benchlib.stop_servers(servers, failed)
    server_log = (log_dir / f"asgi-{server.port}.log").read_text(errors="replace")
    shutil.rmtree(log_dir, ignore_errors=True)

    if args.samples:
        args.samples.write_text("".join(json.dumps(dataclasses.asdict(sample)) + "\n" for sample in load.samples))

    # --- checks in the database ----------------------------------------------------------------------
    loops = [loop for loop in load.loops if loop["session"]]
    sessions = dict(Session.objects.filter(pk__in=[loop["session"] for loop in loops]).values_list("pk", "status"))
    accepted = sum(1 for loop in loops if sessions.get(loop["session"]) == SessionStatus.ACCEPTED)
    completed = sum(1 for loop in load.loops if loop["status"] == "accepted")
    per_annotator: dict[int, list[int]] = {}
    for loop in load.loops:  # a loop that failed leaves its claim active: the next one takes it up again
        if loop["status"] == "accepted":
            per_annotator.setdefault(loop["annotator"], []).append(loop["item"])
    repeats = sum(len(items) - len(set(items)) for items in per_annotator.values())
    twice = (Claim.objects.filter(item__project__slug=SLUG).values("item").annotate(n=Count("id"))
             .filter(n__gt=1).count())

    # --- print ---------------------------------------------------------------------------------------
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    where = (f"in its own process (manage.py serve_model, {args.model_threads} torch thread(s)"
             + (f", nice {args.model_nice}" if args.model_nice else "") + "), reached over vLLM's API"
             if args.model == "server" else
             f"inside the web process ({torch.get_num_threads()} torch threads)")
    print(f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, PostgreSQL {pg_version}, torch "
          f"{torch.__version__}, model SmolLM2-135M-Instruct fp32 on CPU {where}, Python "
          f"{platform.python_version()}; load average before the run "
          f"{load_average[0]:.2f} / {load_average[1]:.2f} / {load_average[2]:.2f} (1 / 5 / 15 min), at the end of the "
          f"load {load_average_during[0]:.2f}; web server {server.label} ready in {ready:.1f} s")
    stats = loadlib.endpoint_stats(load)
    alone = loadlib.endpoint_stats(baseline)
    rows, verdicts = [], []
    for endpoint in loadlib.ENDPOINTS:
        if endpoint not in stats:
            continue
        s = stats[endpoint]
        base = alone.get(endpoint)
        if endpoint in loadlib.STREAMING:
            target = "model-bound: information"
        else:
            limit = TARGET_CLAIM_P95_MS if endpoint == "claim" else TARGET_P95_MS
            met = s["p95"] < limit
            target = f"p95 < {limit:.0f} ms: {'met' if met else 'MISSED'}"
            verdicts.append(met)
        app = f"{s['app p95']:.1f}" if s["app p95"] is not None else "-"
        rows.append((endpoint, f"{s['requests']}", f"{s['rate']:.1f}", f"{s['p50']:.1f}", f"{s['p95']:.1f}",
                     f"{s['p99']:.1f}", app, f"{s['errors']}", f"{base['p95']:.1f}" if base else "-",
                     f"{s['p95'] / base['p95']:.1f}x" if base else "-", target))
    if load.ttft:
        base_ttft = [t * 1000 for t in baseline.ttft]
        ttft = [t * 1000 for t in load.ttft]
        rows.append(("stream: first token", f"{len(ttft)}", "-", f"{benchlib.percentile(ttft, 50):.1f}",
                     f"{benchlib.percentile(ttft, 95):.1f}", f"{benchlib.percentile(ttft, 99):.1f}", "-", "-",
                     f"{benchlib.percentile(base_ttft, 95):.1f}",
                     f"{benchlib.percentile(ttft, 95) / benchlib.percentile(base_ttft, 95):.1f}x",
                     "model-bound: information"))
    total_requests = len(load.samples)
    rows.append(("all requests", f"{total_requests}", f"{total_requests / load.seconds:.1f}", "-", "-", "-", "-",
                 f"{load.error_count()}", "-", "-", "0 errors: " + ("met" if not load.errors else "MISSED")))
    benchlib.print_table(("endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "app p95", "errors",
                          "1-client p95", "p95 ratio", "target"), rows)

    loop_seconds = load.seconds
    print(f"load: {args.annotators} annotators x {args.rounds} loops (claim, session, candidates, correct, stream, "
          f"accept; think {THINK[0]:g}-{THINK[1]:g} s before candidates, correct and accept; starting at random moments in the first {RAMP:g} s) and {args.trainers} "
          f"trainers (export list, detail, manifest, {setup['export_shards']} shards of "
          f"{setup['export_bytes'] / 1e3:.0f} kB in all, per round) over {loop_seconds:.1f} s"
          + (f", STOPPED at the {args.time_limit:.0f} s time limit" if load.timed_out else "")
          + f"; {completed} loops accepted ({completed / loop_seconds:.2f}/s), {load.stream_tokens} tokens streamed "
          f"({load.stream_tokens / loop_seconds:.1f} tokens/s from the one model), "
          f"{load.shard_bytes / 1e6:.1f} MB of shards downloaded; peak PostgreSQL connections to the bench "
          f"database {sampler.peak}, peak waiting on a lock {sampler.peak_lock_waits}. max_tokens {args.max_tokens}.")
    print(cpu.summary())
    print(f"baseline: 1 annotator alone, {len(baseline_loops)} loops in {baseline.seconds:.1f} s, then 1 trainer "
          f"alone, {args.baseline_rounds} rounds ({baseline_seconds:.1f} s in all); the same think times. "
          f"Stream (to `done`) alone: median {statistics.median(s.seconds for s in baseline.samples if s.endpoint == 'stream') * 1000:.0f} ms.")
    ramp_split = []
    for endpoint in loadlib.ENDPOINTS:
        if endpoint in loadlib.STREAMING:
            continue
        during = [s.seconds * 1000 for s in load.samples if s.endpoint == endpoint and s.at < RAMP]
        after = [s.seconds * 1000 for s in load.samples if s.endpoint == endpoint and s.at >= RAMP]
        if during and after:
            ramp_split.append(f"{endpoint} {benchlib.percentile(during, 95):.0f} / {benchlib.percentile(after, 95):.0f}")
    print(f"p95 (ms) of the requests sent during the {RAMP:g} s ramp (annotators arriving) / after it: "
          + ", ".join(ramp_split))
    if load.errors:
        print(f"errors ({len(load.errors)}), the first ones:\n  " + "\n  ".join(load.errors[:10]))
    if "Traceback" in server_log or "ERROR" in server_log:
        print("server log (tail):\n" + server_log[-2000:])
    met_all = all(verdicts) and not load.errors
    print(f"targets: {'all met' if met_all else 'NOT all met'} (0 errors; claim p95 < {TARGET_CLAIM_P95_MS:.0f} ms; "
          f"other non-streaming p95 < {TARGET_P95_MS:.0f} ms)")
    verified = accepted == len(loops) == completed and repeats == 0 and twice == 0
    print(f"verified: {'yes' if verified else 'NO'}: {accepted} of {len(loops)} claimed loops ended with their "
          f"session accepted in the database, {repeats} items accepted twice by one annotator, {twice} items "
          f"claimed twice in all")
    print(f"run time {time.perf_counter() - run_started:.0f} s (setup {setup_seconds:.0f} s)")


if __name__ == "__main__":
    main()
