"""Benchmark of onPanda's continuation path and claim queue on this machine, against direct baselines in the same run.

It prints a table of figures; it is not a test and fails on nothing (it exits non-zero only when a
run itself fails). It measures:

- time to first token (TTFT) of the continuation endpoint, p50 and p95 over 50 corrections: for
  each one the bench POSTs a correction (`/api/v1/sessions/{id}/correct/`, a top-k alternative at
  some position of the item's real rollout), then POSTs the node's stream URL
  (`/api/v1/sessions/{id}/nodes/{node}/stream/`) with httpx and times from sending that request
  to receiving the first complete `event: token` block. The web app runs for real in child
  processes on free localhost ports, both `python -m dataplatform.webserver` (uvicorn, ASGI: the
  async streaming path): production's, as the Dockerfile runs it with DEBUG off ("ASGI uvicorn"),
  and `make run`'s, with bin/run's arguments (its access log and info lines on) and the embedded
  mode's DEBUG on ("make run's uvicorn"), each with its own copy of the model, warmed up with a few
  requests first. (Until issue 38 `make run` served through Django's runserver, which sent a
  stream's headers and first token without TCP_NODELAY: +32.7 ms at p95 over the direct backend,
  against +0.3 ms under uvicorn.)
  The baseline is the backend itself: in this process, `LocalBackend.stream()` on exactly the same
  prefix ids (item.prompt_ids + the new node's token ids), same max_tokens / temperature / top_k,
  timed to its first step, under the same OpenMP settings as the servers (the settings give torch
  its OMP_WAIT_POLICY before it loads, in this process as in theirs) and, like them, with the
  objects of its start frozen out of the garbage collector. For each correction the three measurements (both
  servers and the direct call) run back to back, in a rotating order, so machine noise hits them alike; each correction's claim is made active for it
  alone (a session changes only under an active claim, and an annotator holds one active claim per
  project). Target: platform - direct <= 20 ms at p95. The same run also
  reports the time to the response headers (what the view costs before the first forward pass)
  and the correction POST latency (not part of TTFT, but the annotator waits for it too);
- the same TTFT for a correction inside the reasoning channel, over 10 more items: the tiny model
  does not write `<think>` itself, so each item's rollout is the model's own scoring of a fixed
  `<think>\n...reasoning...\n</think>\n\nanswer` text (`backend.prompt_logprobs` with top_k: the
  real logprob and top-k at every position, stored as a seeded rollout), and the correction takes
  the rank-2 candidate at a position inside the reasoning (prefixes of ~80-95 tokens). Same timing,
  same direct baseline, same table;
- the response template's own cost, in this process, before the servers start: `render` of an item's
  conversation (against the model's chat template, `backend.chat_prompt_ids`) and `parse` of a
  partial 64-, 256- and 1024-token response (against `backend.detokenize` of the same ids), in µs
  per call: a continuation that reads its channels parses after every streamed token;
- claim latency with 50 concurrent annotators: 50 threads (each its own DB connection, opened
  before the start and closed at the end), released together by a threading.Barrier, each calling
  `annotate.services.claim_next` 20 times (marking each claim done in between) on a pool of 2,000
  items with small fake rollouts, overlap 1; against one annotator alone doing the same on the
  fresh pool (the uncontended baseline) and once more after the 1,000 claims (the candidate scan
  grows with the claimed items). Also the throughput (claims/s) and the peak number of backends
  waiting on a lock meanwhile. Target: p95 < 50 ms. No item may be claimed twice (checked in the
  database, "verified"). Then, for information, the same through the HTTP endpoint
  (`POST /api/v1/projects/{slug}/annotate/claim/`, which also opens the session) against a freshly
  started server of each kind, 5 claims per client, with 10 concurrent clients rather than 50:
  under uvicorn every request opens a DB connection of its own that outlives it (CONN_MAX_AGE=60
  in a per-request thread), and 50 clients exhausted PostgreSQL's max_connections (100), which
  everyone using this PostgreSQL server shares. The peak number of connections is printed.

Everything lives in a dedicated database `dataplatform_bench_annotate` (created if missing,
migrated on every run); DATA_DIR is `var/` so the converted model under var/models/ is reused (the
bench never touches var/db.sqlite3). The 55 items of the continuation part keep their real
rollouts between runs (the first run generates them, ~1 minute on 2 cores); claims, sessions and
the claim-pool projects of the previous run are deleted at the start of the next. Production's server
runs with DEBUG off; make run's with DEBUG on, as `make run` leaves it.

Run from the project root (about 4 minutes on 2 cores), with PostgreSQL on 127.0.0.1:5432 (user
postgres, no password):

    .venv/bin/python bench/continuation_bench.py [--ttft-only] [--sqlite] [--samples FILE]

`--ttft-only` leaves out the claim parts (about 3 minutes: for repeated TTFT runs on a noisy
machine); `--sqlite` (with `--ttft-only`) measures make run's server alone on the embedded mode's
database, a SQLite file (var/bench/continuation.sqlite3, with the settings' WAL and IMMEDIATE
transactions), written by the server and read by the bench as `make run`'s worker and server share
theirs; `--samples FILE` appends every measured correction as a JSON line (case, prefix length,
order, direct, and per server the POST, headers and TTFT in ms), to pool several runs.
"""

import argparse
import gc
import inspect
import json
import os
import platform
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is bench/; the project packages live one level up.
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)


def parse_args():
    parser = argparse.ArgumentParser(description="onPanda continuation and claim benchmark (see the docstring).")
    parser.add_argument("--ttft-only", action="store_true",
                        help="leave out the claim parts: only TTFT (both cases) and the template figures")
    parser.add_argument("--sqlite", action="store_true",
                        help="with --ttft-only: make run's server alone, on a SQLite file as make run runs it")
    parser.add_argument("--samples", type=Path, help="append every measured correction to this file (JSON lines)")
    args = parser.parse_args()
    if args.sqlite and not args.ttft_only:
        parser.error("--sqlite measures TTFT only (the claim parts watch PostgreSQL's connections and locks): "
                     "add --ttft-only")
    return args


ARGS = parse_args()  # before the settings: --sqlite chooses the database
SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench_annotate"
SQLITE_FILE = ROOT / "var" / "bench" / "continuation.sqlite3"
# Set (not setdefault) before django.setup(): the bench must never write into another database.
# The servers started below inherit this environment.
os.environ["DATABASE_URL"] = f"sqlite:///{SQLITE_FILE}" if ARGS.sqlite else f"{SERVER_URL}/{BENCH_DB}"
os.environ["DATA_DIR"] = str(ROOT / "var")  # var/models/ holds the converted model; var/db.sqlite3 is not used
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["MODEL_BACKEND"] = "local"
# Production's server runs as in production: DEBUG off (no query log), which needs a SECRET_KEY; make run's
# server gets DEBUG on (start_server).
os.environ["DEBUG"] = "0"
os.environ["SECRET_KEY"] = "continuation-bench-" + secrets.token_hex(16)
os.environ.pop("REDIS_URL", None)  # nothing here publishes a job; the filesystem broker is inert
# The table is the output; INFO lines would only interleave with it.
os.environ["LOG_LEVEL"] = "WARNING"
# The claim part runs 50 threads in this process, each holding a connection for its whole run
# (each thread is an annotator's request worker); the pool must have room for all of them.
os.environ["DATABASE_POOL_MAX_SIZE"] = "60"

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
import psycopg2  # noqa: E402
import torch  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.db.models import Count  # noqa: E402
from django.utils import timezone  # noqa: E402

from annotate import services  # noqa: E402
from annotate.models import Claim, ClaimState, Item, Session  # noqa: E402
from annotate.prompts import stored_prompt  # noqa: E402
from dataplatform.accounts import services as account_services  # noqa: E402
from dataplatform.accounts.models import ApiToken, Project, Role  # noqa: E402
from dataplatform.conversations.templates import template_for  # noqa: E402
from dataplatform.inference import get_backend  # noqa: E402

# --- sizes and targets ------------------------------------------------------------------------------

CORRECTIONS = 50
WARMUP_CORRECTIONS = 5
MAX_TOKENS, TOP_K, TEMPERATURE = 32, 5, 0.0
MAX_POSITION = 24  # corrections at positions 0..24 leave >= 7 tokens to continue within max_tokens
TARGET_TTFT_OVERHEAD_MS = 20.0

# The reasoning-channel case: 10 items whose rollout is the model's scoring of REASONING_TEXT.
REASONING_ITEMS = 10
REASONING_SLUG = "bench-continuation-reasoning"
# Corrections at tokens 40..55 of the response (inside the reasoning) leave 16..31 tokens to continue.
REASONING_POSITIONS = (40, 56)
REASONING_MAX_TOKENS = 72
REASONING_TEXT = (
    "<think>\nThe user asks about {topic}. Before answering I should recall what I know: the main facts, why "
    "they matter, and one example that a reader can picture. Then I check each point, drop anything I am not "
    "sure of, and keep the answer short and plain, in one or two sentences.\n</think>\n\n"
    "Here is one thing about {topic} that is worth knowing, in a sentence or two."
)
PARSE_LENGTHS = (64, 256, 1024)  # response tokens for the template's parse figures

CLAIM_THREADS = 50
CLAIM_ROUNDS = 20
CLAIM_POOL = 2_000
HTTP_CLAIM_ROUNDS = 5
# Not 50: under uvicorn every request opens a DB connection of its own that outlives it (CONN_MAX_AGE=60
# in a per-request thread). 50 clients exhausted PostgreSQL's max_connections (100), which everyone using
# this PostgreSQL server shares, and 20 clients x 5 claims still peaked at 96 connections.
HTTP_CLAIM_CLIENTS = 10
TARGET_CLAIM_P95_MS = 50.0
THINK = (0.5, 1.5)  # seconds an annotator of the 'working' run spends per item (a person takes minutes)

CONTINUATION_SLUG = "bench-continuation"
CLAIM_SLUG = "bench-claims"
# The servers measured, each with its own annotator and model copy (benchlib.Server's kinds).
LABELS = {"asgi": "ASGI uvicorn", "embedded": "make run's uvicorn"}
KINDS = ("embedded",) if ARGS.sqlite else ("asgi", "embedded")
HTTP_CLAIM_SLUGS = {kind: f"bench-claims-{kind}" for kind in KINDS}
USER_PREFIX = "bench-"
# Stored as the continuation project's description; other settings mean the rollouts are regenerated.
ROLLOUT_MARKER = f"continuation_bench rollouts v1: max_tokens={MAX_TOKENS} top_k={TOP_K} temperature={TEMPERATURE}"

TOPICS = ["the moon", "photosynthesis", "a lighthouse", "prime numbers", "the ocean", "volcanoes", "bread",
          "the Roman empire", "honeybees", "electricity", "chess"]
TASKS = ["Tell me one fact about {}.", "Explain {} to a child.", "Write a haiku about {}.",
         "Give two reasons to learn about {}.", "Describe {} in one sentence."]


# --- small helpers --------------------------------------------------------------------------------

percentile, ms, Server, stop_servers = benchlib.percentile, benchlib.ms, benchlib.Server, benchlib.stop_servers


def ensure_database() -> None:
    if not ARGS.sqlite:  # the SQLite file is made on connect (dataplatform/sqlite3)
        benchlib.ensure_database(SERVER_URL, BENCH_DB)


def start_server(kind: str, log_dir: Path) -> Server:
    # make run's server with the embedded mode's DEBUG on, as `make run` leaves it (the rest of this environment,
    # the bench's database among it, is the same for both).
    return Server(kind, log_dir, env=os.environ | {"DEBUG": "1"} if kind == "embedded" else None)


def bench_user(name: str):
    user, created = get_user_model().objects.get_or_create(username=USER_PREFIX + name)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


# --- setup ----------------------------------------------------------------------------------------

def continuation_setup(backend) -> tuple[Project, dict]:
    """The project with real rollouts, and for each server an annotator with a token and one open session per item."""
    project, _ = Project.objects.get_or_create(slug=CONTINUATION_SLUG, defaults={"name": "Bench continuation"})
    reset_pool(project)  # the previous run's claims, sessions, nodes, events
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = MAX_TOKENS, TOP_K, TEMPERATURE
    config.seed_policy, config.seed = "fixed", 0
    config.overlap = 2  # each item is claimed by both server annotators, so both correct the same prefix
    config.save()
    prompts = [task.format(topic) for topic in TOPICS for task in TASKS][: CORRECTIONS + WARMUP_CORRECTIONS]
    for number, prompt in enumerate(prompts):
        Item.objects.get_or_create(project=project, source_sha256=f"{number:064d}",
                                   defaults={"messages": [{"role": "user", "content": prompt}]})
    regenerate = project.description != ROLLOUT_MARKER
    pending = Item.objects.filter(project=project, rollout__isnull=True).count()
    if regenerate or pending:
        started = time.perf_counter()
        result = services.generate_rollouts(project=project, progress=benchlib.Progress(), regenerate=regenerate)
        Project.objects.filter(pk=project.pk).update(description=ROLLOUT_MARKER)
        print(f"generated rollouts for {result['answered']} items in {time.perf_counter() - started:.1f} s "
              f"(kept for later runs)")
    else:
        print(f"reused the rollouts of {len(prompts)} items (project {CONTINUATION_SLUG})")

    annotators = {}
    for kind in KINDS:
        user = bench_user(f"stream-{kind}")
        account_services.set_membership(project=project, user=user, role=Role.ANNOTATOR)
        sessions = []
        while (claim := services.claim_next(project=project, annotator=user)) is not None:
            sessions.append(services.open_session(claim=claim))
            services.end_claim(claim=claim, state=ClaimState.DONE)  # free the annotator
        _, secret = account_services.issue_token(user=user, name="continuation bench")
        annotators[kind] = {"user": user, "secret": secret, "sessions": sorted(sessions, key=lambda s: s.item_id)}
    return project, annotators


def claim_pool(slug: str, users: list) -> Project:
    """A fresh project of CLAIM_POOL items with small fake rollouts, overlap 1, the users as annotators."""
    Project.objects.filter(slug=slug).delete()
    project = Project.objects.create(slug=slug, name=f"Bench {slug}")
    config = services.config_for(project)
    config.overlap = 1
    config.save()
    rollout = {"token_ids": [10, 11, 12, 13], "logprobs": [-0.1] * 4,
               "top": [[[t, -0.1], [t + 1000, -1.0]] for t in (10, 11, 12, 13)],
               "finish_reason": "stop", "model_id": "bench-fake", "seed": 0}
    Item.objects.bulk_create(
        [Item(project=project, messages=[{"role": "user", "content": f"q{n}"}], source_sha256=f"{n:064d}",
              prompt_ids=[1, 2, 3], rollout=rollout) for n in range(CLAIM_POOL)],
        batch_size=500,
    )
    for user in users:
        account_services.set_membership(project=project, user=user, role=Role.ANNOTATOR)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotate_item, annotate_claim")
    return project


def reset_pool(project: Project) -> None:
    Claim.objects.filter(item__project=project).delete()
    Item.objects.filter(project=project).update(claims_done=0)


def set_claims_state(sessions, state: ClaimState) -> None:
    """The sessions' claims in `state`, active with a fresh lease (a plain UPDATE: no figure includes it)."""
    Claim.objects.filter(pk__in=[session.claim_id for session in sessions]).update(
        state=state, lease_expires_at=timezone.now() + timedelta(hours=1))


def claims_claimed_twice(project: Project) -> int:
    return (Claim.objects.filter(item__project=project).values("item").annotate(n=Count("id"))
            .filter(n__gt=1).count())


# --- claims through the services --------------------------------------------------------------------

def run_claimers(project: Project, users: list, rounds: int, think: tuple[float, float] | None = None):
    """Each user in its own thread and DB connection, released together, claims `rounds` times.

    With `think` = (low, high) seconds, each annotator works on an item for a uniform random time
    in that range before marking it done and claiming the next, and starts after a random 0..high
    (people do not all click in the same millisecond); without it they claim back to back.

    Returns the latencies, the claimed item ids, the errors, and the CPU time each claim_next call spent
    in its own thread (the Python side: ORM, driver; not the PostgreSQL backend's time).
    """
    latencies: list[float] = []
    cpu: list[float] = []
    items: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(users))

    def claimer(user) -> None:
        mine_latencies, mine_items, mine_cpu = [], [], []
        pause = random.Random(user.pk)  # the same think times on every run
        try:
            connection.ensure_connection()  # connect before the start: the connection is not the claim
            barrier.wait()
            if think:
                time.sleep(pause.uniform(0, think[1]))
            for _ in range(rounds):
                started, cpu_started = time.perf_counter(), time.thread_time()
                claim = services.claim_next(project=project, annotator=user)
                mine_latencies.append(time.perf_counter() - started)
                mine_cpu.append(time.thread_time() - cpu_started)
                if claim is None:
                    break
                mine_items.append(claim.item_id)
                if think:
                    time.sleep(pause.uniform(*think))
                services.end_claim(claim=claim, state=ClaimState.DONE)
        except Exception as exc:  # noqa: BLE001 (reported below)
            barrier.abort()
            with lock:
                errors.append(f"{user.username}: {exc!r}")
        finally:
            connection.close()
            with lock:
                latencies.extend(mine_latencies)
                items.extend(mine_items)
                cpu.extend(mine_cpu)

    threads = [threading.Thread(target=claimer, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, items, errors, cpu


# --- claims through HTTP -----------------------------------------------------------------------------

def run_http_claimers(base_url: str, project: Project, secrets_by_user: dict, rounds: int):
    """Concurrent clients on the claim endpoint; each claim is marked done over one shared connection.

    Refused requests (any status but 200/204) are counted, not fatal: the figure is for information.
    Returns (latencies of the 200s, claimed item ids, failed statuses, unexpected errors).
    """
    url = f"{base_url}/api/v1/projects/{project.slug}/annotate/claim/"
    latencies: list[float] = []
    items: list[int] = []
    failures: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(secrets_by_user))
    # One raw connection for the "done" updates: a Django connection per client thread on top of the
    # server's own per-request connections would use up max_connections sooner.
    marker = psycopg2.connect(os.environ["DATABASE_URL"])
    marker.autocommit = True
    marker_lock = threading.Lock()

    def client_thread(secret: str) -> None:
        mine_latencies, mine_items, mine_failures = [], [], []
        try:
            with httpx.Client(headers={"Authorization": f"Token {secret}"}, timeout=120) as client:
                client.get(f"{base_url}/api/v1/projects/")  # open the keep-alive connection first
                barrier.wait()
                for _ in range(rounds):
                    started = time.perf_counter()
                    response = client.post(url)
                    seconds = time.perf_counter() - started
                    if response.status_code == 204:
                        break
                    if response.status_code != 200:
                        mine_failures.append(response.status_code)
                        continue
                    mine_latencies.append(seconds)
                    claim = response.json()
                    mine_items.append(claim["item"])
                    with marker_lock, marker.cursor() as cursor:
                        cursor.execute(f"UPDATE {Claim._meta.db_table} SET state = %s WHERE id = %s",
                                       [ClaimState.DONE.value, claim["id"]])
        except Exception as exc:  # noqa: BLE001 (reported below)
            barrier.abort()
            with lock:
                errors.append(repr(exc))
        finally:
            with lock:
                latencies.extend(mine_latencies)
                items.extend(mine_items)
                failures.extend(mine_failures)

    threads = [threading.Thread(target=client_thread, args=(secret,)) for secret in secrets_by_user.values()]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        marker.close()
    return latencies, items, failures, errors


def connect_seconds() -> float:
    """Median time to open (and close) a new PostgreSQL connection to the bench database."""
    runs = []
    for _ in range(10):
        started = time.perf_counter()
        psycopg2.connect(os.environ["DATABASE_URL"]).close()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


# --- one correction -----------------------------------------------------------------------------------

def pick_correction(session: Session, eos_ids: frozenset[int]) -> tuple[int, int]:
    """A position in the root response and a top-k alternative there (never an end-of-sequence token)."""
    root = session.current_node
    last = min(len(root.token_ids) - 1, MAX_POSITION)
    position = (session.item_id * 7) % (last + 1)
    for pos in [position, *range(last + 1)]:
        alternatives = [t for t, _ in root.top[pos] if t != root.token_ids[pos] and t not in eos_ids]
        if alternatives:
            return pos, alternatives[0]
    raise SystemExit(f"item {session.item_id}: no top-k alternative to pick in its rollout")


def platform_correction(client: httpx.Client, base_url: str, session: Session, position: int,
                        token_id: int) -> dict:
    """POST the correction, then stream the continuation; time the POST and the first token event."""
    started = time.perf_counter()
    response = client.post(f"{base_url}/api/v1/sessions/{session.pk}/correct/",
                           json={"version": 0, "node_id": session.current_node_id, "position": position,
                                 "token_id": token_id})
    correct_seconds = time.perf_counter() - started
    if response.status_code != 201:
        raise SystemExit(f"correction on session {session.pk} failed: {response.status_code} {response.text[:500]}")
    node = response.json()

    buffer = b""
    headers_seconds = first_seconds = None
    started = time.perf_counter()
    with client.stream("POST", f"{base_url}/api/v1/sessions/{session.pk}/nodes/{node['id']}/stream/") as stream:
        headers_seconds = time.perf_counter() - started
        if stream.status_code != 200:
            raise SystemExit(f"stream of node {node['id']} failed: {stream.status_code} {stream.read()[:500]}")
        for chunk in stream.iter_raw():
            buffer += chunk
            if first_seconds is None:
                at = buffer.find(b"event: token")
                if at >= 0 and buffer.find(b"\n\n", at) >= 0:
                    first_seconds = time.perf_counter() - started
    events = [block for block in buffer.decode().split("\n\n") if block.strip()]
    tokens = [json.loads(block.split("data: ", 1)[1]) for block in events if block.startswith("event: token")]
    return {"correct": correct_seconds, "headers": headers_seconds, "ttft": first_seconds,
            "prefix_ids": node["token_ids"], "first_token": tokens[0]["token_id"] if tokens else None,
            "tokens": len(tokens), "done": events[-1].startswith("event: done") if events else False}


def direct_first_token(backend, prefix_ids: list[int], remaining: int) -> tuple[float, int]:
    started = time.perf_counter()
    steps = backend.stream(prefix_ids, max_tokens=remaining, temperature=TEMPERATURE, seed=0, top_k=TOP_K)
    step = next(iter(steps))
    seconds = time.perf_counter() - started
    steps.close()
    return seconds, step.token_id


# --- the reasoning-channel case --------------------------------------------------------------------

def reasoning_setup(backend, main_project: Project, annotators: dict) -> list[dict]:
    """10 items scored from REASONING_TEXT (their prompts, and prompt ids, the main items'), each annotator
    with an open session on each; returns for each item its sessions and its correction (position, token)."""
    project, _ = Project.objects.get_or_create(slug=REASONING_SLUG, defaults={"name": "Bench reasoning"})
    reset_pool(project)
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = REASONING_MAX_TOKENS, TOP_K, TEMPERATURE
    config.seed_policy, config.seed, config.overlap = "fixed", 0, 2
    config.save()
    sources = list(Item.objects.filter(project=main_project).order_by("id")[:REASONING_ITEMS])
    for number, (source, topic) in enumerate(zip(sources, TOPICS, strict=False)):
        rollout = benchlib.scored_rollout(backend, source.prompt_ids, REASONING_TEXT.format(topic=topic), TOP_K)
        Item.objects.update_or_create(project=project, source_sha256=f"{number:064d}", defaults={
            "messages": source.messages, "prompt_ids": source.prompt_ids, "rollout": rollout})
    cases = []
    sessions = {}
    for kind, annotator in annotators.items():
        user = annotator["user"]
        account_services.set_membership(project=project, user=user, role=Role.ANNOTATOR)
        opened = []
        while (claim := services.claim_next(project=project, annotator=user)) is not None:
            opened.append(services.open_session(claim=claim))
            services.end_claim(claim=claim, state=ClaimState.DONE)
        sessions[kind] = sorted(opened, key=lambda session: session.item_id)
    eos_ids = backend.eos_token_ids
    for number in range(len(sessions[KINDS[0]])):
        pair = {kind: sessions[kind][number] for kind in sessions}
        root = pair[KINDS[0]].current_node
        first, end = benchlib.reasoning_span(backend, root.token_ids)
        low, high = max(first, REASONING_POSITIONS[0]), min(end, REASONING_POSITIONS[1])
        if low >= high:
            raise SystemExit(f"reasoning item {number}: its reasoning (tokens {first}..{end}) misses "
                             f"{REASONING_POSITIONS}; lengthen REASONING_TEXT")
        start = low + (number * 5) % (high - low)
        for position in [*range(start, high), *range(low, start)]:
            top = root.top[position]
            # The rank-2 candidate, when it is a change (not the text's own token) and not the end of the turn.
            if len(top) > 1 and top[1][0] != root.token_ids[position] and top[1][0] not in eos_ids:
                cases.append({"sessions": pair, "position": position, "token_id": top[1][0],
                              "max_tokens": REASONING_MAX_TOKENS})
                break
        else:
            raise SystemExit(f"reasoning item {number}: no usable rank-2 candidate inside the reasoning")
    return cases


# --- the response template's own cost -----------------------------------------------------------------

def per_call_us(call, budget: float = 0.3, at_least: int = 5) -> float:
    """Median µs of `call` over repeats filling about `budget` seconds (at least `at_least` of them)."""
    runs = []
    deadline = time.perf_counter() + budget
    while len(runs) < at_least or time.perf_counter() < deadline:
        started = time.perf_counter_ns()
        call()
        runs.append((time.perf_counter_ns() - started) / 1000)
    return statistics.median(runs)


def template_timings(backend, project: Project) -> dict:
    """render of an item's conversation, and parse of partial responses of PARSE_LENGTHS tokens, in µs per call,
    each beside the plain backend call that does the same without the template."""
    template = template_for(backend.model_id)
    item = Item.objects.filter(project=project).order_by("id").first()
    conversation = stored_prompt(item.messages, item.tools)
    figures = {"template": template.name,
               "render": per_call_us(lambda: template.render(conversation, None, backend=backend)),
               "render_raw": per_call_us(lambda: backend.chat_prompt_ids(item.messages))}
    # A long reasoning that closes halfway through, then the answer: the stream's shape, cut at each length.
    filler = backend.tokenize(" ".join(REASONING_TEXT.format(topic=topic).split("\n")[1] for topic in TOPICS))
    longest = max(PARSE_LENGTHS)
    body = (filler * (longest // len(filler) + 1))
    opening, closing = backend.tokenize("<think>\n"), backend.tokenize("\n</think>\n\n")
    keeps_pieces = "pieces" in inspect.signature(template.parse).parameters
    figures["parse"] = {}
    for length in PARSE_LENGTHS:
        half = length // 2 - len(opening)
        ids = (opening + body[:half] + closing + body)[:length]
        parse = per_call_us(lambda ids=ids: template.parse(ids, backend=backend))
        pieces = backend.token_pieces(ids)
        kept = (per_call_us(lambda ids=ids, pieces=pieces: template.parse(ids, backend=backend, pieces=pieces))
                if keeps_pieces else None)
        raw = per_call_us(lambda ids=ids: backend.detokenize(ids))
        figures["parse"][length] = (parse, kept, raw)
    # A whole stream of the middle length, parsed after every token as it grows (the partial parses).
    middle = PARSE_LENGTHS[len(PARSE_LENGTHS) // 2]
    ids = (opening + body[:middle // 2 - len(opening)] + closing + body)[:middle]
    started = time.perf_counter()
    for count in range(1, middle + 1):
        template.parse(ids[:count], backend=backend)
    figures["stream_parse_ms"] = (middle, ms(time.perf_counter() - started))
    return figures


# --- TTFT: the three measurements of each correction back to back ------------------------------------

ORDERS = [(*KINDS, "direct")[shift:] + (*KINDS, "direct")[:shift] for shift in range(len(KINDS) + 1)]


def measure_ttft(cases: list[dict], clients: dict, servers: dict, backend, warmup: int, label: str,
                 samples) -> dict:
    """Each case's correction on both servers and the direct call, in a rotating order; the first `warmup`
    cases are not counted. Returns the runs per server, the direct times, and the checks."""
    results: dict[str, list[dict]] = {kind: [] for kind in servers}
    direct: list[float] = []
    mismatches = incomplete = 0
    prefix_lengths = []
    for number, case in enumerate(cases):
        sessions, position, token_id = case["sessions"], case["position"], case["token_id"]
        # A session changes only under an active claim, and an annotator holds one active claim per project:
        # each item's claim is active for its own correction only (set directly, outside every timing).
        set_claims_state(sessions.values(), ClaimState.ACTIVE)
        measured, direct_run = {}, None
        order = ORDERS[number % len(ORDERS)]
        for who in order:
            if who == "direct":
                # The same prefix the platform continues from: prompt + root[:position] + the candidate.
                prefix = sessions[KINDS[0]].current_node.token_ids[:position] + [token_id]
                direct_run = direct_first_token(backend, sessions[KINDS[0]].item.prompt_ids + prefix,
                                                case["max_tokens"] - len(prefix))
            else:
                measured[who] = platform_correction(clients[who], servers[who].base_url, sessions[who],
                                                    position, token_id)
        set_claims_state(sessions.values(), ClaimState.DONE)
        if number < warmup:
            continue
        direct.append(direct_run[0])
        prefix_lengths.append(len(sessions[KINDS[0]].item.prompt_ids) + position + 1)
        for kind, run in measured.items():
            results[kind].append(run)
            expected_prefix = sessions[kind].current_node.token_ids[:position] + [token_id]
            if run["first_token"] != direct_run[1] or run["prefix_ids"] != expected_prefix:
                mismatches += 1
            if not run["done"] or run["ttft"] is None:
                incomplete += 1
        if samples is not None:
            samples.write(json.dumps({
                "case": label, "prefix_tokens": prefix_lengths[-1], "position": position, "order": order,
                "direct_ms": ms(direct_run[0]),
                **{kind: {"correct_ms": ms(run["correct"]), "headers_ms": ms(run["headers"]),
                          "ttft_ms": None if run["ttft"] is None else ms(run["ttft"])}
                   for kind, run in measured.items()}}) + "\n")
    return {"results": results, "direct": direct, "mismatches": mismatches, "incomplete": incomplete,
            "prefix_lengths": prefix_lengths}


def ttft_rows(measured: dict, case: str) -> tuple[list[tuple[str, ...]], list[str], str]:
    """The table rows of one TTFT case, its verdicts, and its paired per-correction differences."""
    rows, verdicts = [], []
    direct = measured["direct"]
    direct_p50, direct_p95 = ms(percentile(direct, 50)), ms(percentile(direct, 95))
    for kind in KINDS:
        label = LABELS[kind]
        ttft = [run["ttft"] for run in measured["results"][kind] if run["ttft"] is not None]
        p50, p95 = ms(percentile(ttft, 50)), ms(percentile(ttft, 95))
        met = p95 - direct_p95 <= TARGET_TTFT_OVERHEAD_MS
        verdicts.append(f"TTFT overhead at p95{case}, {label}: {'met' if met else 'MISSED'} "
                        f"({p95 - direct_p95:+.1f} ms)")
        rows.append((f"TTFT p50 (ms){case}, {label}", f"{p50:.1f}", f"{direct_p50:.1f}", f"{p50 - direct_p50:+.1f} ms",
                     ""))
        rows.append((f"TTFT p95 (ms){case}, {label}", f"{p95:.1f}", f"{direct_p95:.1f}", f"{p95 - direct_p95:+.1f} ms",
                     f"overhead ≤ {TARGET_TTFT_OVERHEAD_MS:.0f} ms"))
    paired = {kind: [ms(run["ttft"] - d) for run, d in zip(runs, direct, strict=True)]
              for kind, runs in measured["results"].items()}
    note = "paired per-correction differences p50 / p95: " + ", ".join(
        f"{LABELS[kind]} {percentile(paired[kind], 50):+.1f} / {percentile(paired[kind], 95):+.1f} ms" for kind in KINDS)
    return rows, verdicts, note


def template_rows(figures: dict) -> list[tuple[str, ...]]:
    name = figures["template"]
    rows = [(f"template render (µs per call), {name} vs the model's chat template", f"{figures['render']:.0f}",
             f"{figures['render_raw']:.0f}", f"{figures['render'] / figures['render_raw']:.2f}x", "")]
    for length, (parse, kept, raw) in figures["parse"].items():
        shown = f"{parse:.0f}" if kept is None else f"{parse:.0f} / {kept:.0f} kept pieces"
        rows.append((f"template parse (µs per call), {length}-token partial response vs detokenize", shown,
                     f"{raw:.0f}", f"{parse / raw:.2f}x", ""))
    count, total = figures["stream_parse_ms"]
    rows.append((f"template parse after every token of a {count}-token stream (ms in all)", f"{total:.1f}", "-",
                 f"{total * 1000 / count:.0f} µs a token", "(information)"))
    return rows


# --- main ---------------------------------------------------------------------------------------------

def main() -> None:
    args = ARGS
    # Sampled before we add our own load: on 2 cores other work swings every figure.
    load_average = os.getloadavg()[0]
    run_started = time.perf_counter()
    ensure_database()
    call_command("migrate", verbosity=0)
    ApiToken.objects.filter(user__username__startswith=USER_PREFIX).delete()  # earlier runs' tokens

    backend = get_backend()
    backend.model  # noqa: B018 (load now: no figure includes it)
    project, annotators = continuation_setup(backend)
    eos_ids = backend.eos_token_ids
    main_cases = []
    for number in range(CORRECTIONS + WARMUP_CORRECTIONS):
        sessions = {kind: annotators[kind]["sessions"][number] for kind in annotators}
        position, token_id = pick_correction(sessions[KINDS[0]], eos_ids)
        main_cases.append({"sessions": sessions, "position": position, "token_id": token_id,
                           "max_tokens": MAX_TOKENS})
    reasoning_cases = reasoning_setup(backend, project, annotators)
    # In this process, before any server runs: the machine is as quiet as it gets.
    template_figures = template_timings(backend, project)
    setup_seconds = time.perf_counter() - run_started

    claims = None if args.ttft_only else run_service_claims()
    claims_seconds = time.perf_counter() - run_started - setup_seconds

    # --- TTFT: both servers up, the three measurements of each correction back to back ----------------
    # As each uvicorn process does once started (dataplatform/asgi.py): without it a full collection here walks
    # every object of torch and Django (~400,000, ~200 ms), now and then in the middle of a direct call.
    gc.collect()
    gc.freeze()
    phase_started = time.perf_counter()
    log_dir = Path(tempfile.mkdtemp(prefix="continuation-bench-"))
    servers: dict[str, Server] = {}
    failed = True
    samples = open(args.samples, "a") if args.samples else None  # noqa: SIM115 (closed below)
    try:
        for kind in KINDS:
            servers[kind] = start_server(kind, log_dir)
        ready = {kind: server.wait_ready(annotators[kind]["secret"]) for kind, server in servers.items()}
        clients = {kind: httpx.Client(headers={"Authorization": f"Token {annotators[kind]['secret']}"}, timeout=120)
                   for kind in servers}
        # The servers' first requests load their model copy: the first WARMUP_CORRECTIONS are not counted.
        main_ttft = measure_ttft(main_cases, clients, servers, backend, WARMUP_CORRECTIONS, "main", samples)
        reasoning_ttft = measure_ttft(reasoning_cases, clients, servers, backend, 0, "reasoning", samples)
        for client in clients.values():
            client.close()
        failed = False
    finally:
        stop_servers(servers, failed)
        if samples is not None:
            samples.close()
    ttft_seconds = time.perf_counter() - phase_started

    phase_started = time.perf_counter()
    http = None if args.ttft_only else run_http_claims(claims, log_dir)
    shutil.rmtree(log_dir, ignore_errors=True)
    http_seconds = time.perf_counter() - phase_started

    # --- print ------------------------------------------------------------------------------------------
    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_version()" if ARGS.sqlite else "SHOW server_version")
        database = f"{'SQLite' if ARGS.sqlite else 'PostgreSQL'} {cursor.fetchone()[0]}"
    print(
        f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, {database}, "
        f"torch {torch.__version__} with {torch.get_num_threads()} threads and OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')} (the servers: the same), "
        f"model {backend.model_id} fp32, Python {platform.python_version()}, load average before the run "
        f"{load_average:.2f}; servers ready in " + " / ".join(f"{ready[kind]:.1f} s ({LABELS[kind]})" for kind in KINDS)
    )
    rows, verdicts, main_note = ttft_rows(main_ttft, "")
    reasoning_rows, reasoning_verdicts, reasoning_note = ttft_rows(reasoning_ttft, ", reasoning")
    rows += reasoning_rows
    verdicts += reasoning_verdicts
    for kind in KINDS:
        label = LABELS[kind]
        headers = [run["headers"] for run in main_ttft["results"][kind]]
        rows.append((f"stream: response headers p50 / p95 (ms), {label}",
                     f"{ms(percentile(headers, 50)):.1f} / {ms(percentile(headers, 95)):.1f}", "-", "-", ""))
    for kind in KINDS:
        label = LABELS[kind]
        posts = [run["correct"] for run in main_ttft["results"][kind]]
        rows.append((f"correction POST p50 / p95 (ms), {label}",
                     f"{ms(percentile(posts, 50)):.1f} / {ms(percentile(posts, 95)):.1f}", "-", "-", ""))
    rows += template_rows(template_figures)
    if claims is not None:
        claim_rows, claim_verdicts = claims_rows(claims, http)
        rows += claim_rows
        verdicts += claim_verdicts

    benchlib.print_table(("figure", "platform", "direct baseline", "overhead/ratio", "target"), rows)
    lengths = main_ttft["prefix_lengths"]
    reasoning_lengths = reasoning_ttft["prefix_lengths"]
    print(f"TTFT: {CORRECTIONS} corrections (after {WARMUP_CORRECTIONS} warm-up ones per server), prefixes of "
          f"{min(lengths)}-{max(lengths)} tokens, max_tokens {MAX_TOKENS}, top_k {TOP_K}, temperature "
          f"{TEMPERATURE:g}; platform = POST stream -> first complete `event: token` block (keep-alive httpx client); "
          f"direct = LocalBackend.stream() in this process -> first step. Overhead = platform percentile - direct "
          f"percentile; {main_note}. Reasoning: {len(reasoning_lengths)} corrections with the rank-2 candidate "
          f"inside the reasoning of a scored `<think>` rollout, prefixes of {min(reasoning_lengths)}-"
          f"{max(reasoning_lengths)} tokens, max_tokens {REASONING_MAX_TOKENS}; {reasoning_note}.")
    print(f"template: {template_figures['template']} (template_for({backend.model_id!r})), in this process before the "
          f"servers start; parse of a partial response (no finish reason), as a stream reads it after each token; "
          f"the baselines are the backend's own calls on the same input (chat_prompt_ids, detokenize).")
    if claims is not None:
        print(claims_note(claims, http))
    print("targets: " + "; ".join(verdicts))
    mismatches = main_ttft["mismatches"] + reasoning_ttft["mismatches"]
    incomplete = main_ttft["incomplete"] + reasoning_ttft["incomplete"]
    same = mismatches == 0 and incomplete == 0
    print(f"streams: every continuation ended with `done`, and its prefix and first token equal the direct "
          f"call's: {'yes' if same else f'NO ({mismatches} mismatches, {incomplete} incomplete)'}")
    if claims is not None:
        print(f"verified: no item claimed twice ({len(claims['claim_items']):,} claims through the services, "
              f"{sum(len(v) for v in http['latencies'].values()):,} over HTTP, all on distinct items; checked in the "
              f"database)")
    print(f"run time {time.perf_counter() - run_started:.0f} s (setup {setup_seconds:.0f} s, claims {claims_seconds:.0f} s, "
          f"TTFT {ttft_seconds:.0f} s, HTTP claims {http_seconds:.0f} s)")


# --- the claim parts ------------------------------------------------------------------------------------

def run_service_claims() -> dict:
    """Claims through the services, before the servers start; and the pools and tokens of the HTTP part."""
    claim_users = [bench_user(f"claimer-{n:02d}") for n in range(CLAIM_THREADS)]
    for slug in [CLAIM_SLUG, *HTTP_CLAIM_SLUGS.values()]:
        Project.objects.filter(slug=slug).delete()
    pool = claim_pool(CLAIM_SLUG, claim_users)
    alone_latencies, _, alone_errors, alone_cpu = run_claimers(pool, claim_users[:1], CLAIM_ROUNDS)
    reset_pool(pool)  # each run of the 50 starts from the same untouched pool
    working_latencies, working_items, working_errors, _ = run_claimers(pool, claim_users, CLAIM_ROUNDS, THINK)
    working_twice = claims_claimed_twice(pool)
    reset_pool(pool)
    with benchlib.ConnectionSampler(SERVER_URL, BENCH_DB) as claim_sampler:
        concurrent_started = time.perf_counter()
        claim_latencies, claim_items, claim_errors, _ = run_claimers(pool, claim_users, CLAIM_ROUNDS)
        concurrent_seconds = time.perf_counter() - concurrent_started
    if alone_errors or claim_errors or working_errors:
        raise SystemExit("claim threads failed:\n" + "\n".join(alone_errors + claim_errors + working_errors))
    assert working_twice == 0 and len(set(working_items)) == len(working_items) == CLAIM_THREADS * CLAIM_ROUNDS
    twice_db = claims_claimed_twice(pool)
    claim_check_ok = (twice_db == 0 and len(set(claim_items)) == len(claim_items)
                      == CLAIM_THREADS * CLAIM_ROUNDS == Claim.objects.filter(item__project=pool).count())
    assert claim_check_ok, (f"claims: {len(claim_items)} returned, {len(set(claim_items))} distinct items, "
                            f"{twice_db} items with two claims in the database")
    # One more annotator alone, now that 1,000 items are claimed (not counted in the check above).
    after_latencies, _, after_errors, _ = run_claimers(pool, [bench_user("claimer-after")], CLAIM_ROUNDS)
    if after_errors:
        raise SystemExit("claim thread failed:\n" + "\n".join(after_errors))

    http_secrets = {user.username: account_services.issue_token(user=user, name="continuation bench")[1]
                    for user in claim_users[:HTTP_CLAIM_CLIENTS]}
    http_pools = {kind: claim_pool(slug, claim_users) for kind, slug in HTTP_CLAIM_SLUGS.items()}
    return {"alone": alone_latencies, "alone_cpu": alone_cpu, "working": working_latencies,
            "concurrent": claim_latencies, "claim_items": claim_items, "concurrent_seconds": concurrent_seconds,
            "after": after_latencies, "sampler": claim_sampler, "http_secrets": http_secrets,
            "http_pools": http_pools}


def run_http_claims(claims: dict, log_dir: Path) -> dict:
    """For information: the claim endpoint against fresh servers (no model needed), one at a time."""
    http_secrets, http_pools = claims["http_secrets"], claims["http_pools"]
    latencies, failures_by_kind, peak_connections = {}, {}, {}
    for kind in KINDS:
        servers = {}
        failed = True
        try:
            servers[kind] = server = start_server(kind, log_dir)
            server.wait_ready(next(iter(http_secrets.values())))
            with benchlib.ConnectionSampler(SERVER_URL, BENCH_DB) as sampler:
                values, items, failures, errors = run_http_claimers(server.base_url, http_pools[kind],
                                                                    http_secrets, HTTP_CLAIM_ROUNDS)
            if errors:
                raise SystemExit(f"HTTP claim clients on {server.label} failed:\n" + "\n".join(errors[:5]))
            twice = claims_claimed_twice(http_pools[kind])
            assert twice == 0 and len(set(items)) == len(items), (
                f"HTTP claims on {server.label}: {len(items)} returned, {len(set(items))} distinct, {twice} twice")
            latencies[kind], failures_by_kind[kind], peak_connections[kind] = values, failures, sampler.peak
            failed = False
        finally:
            stop_servers(servers, failed)
    return {"latencies": latencies, "failures": failures_by_kind, "peak_connections": peak_connections,
            "new_connection_ms": ms(connect_seconds())}


def claims_rows(claims: dict, http: dict) -> tuple[list[tuple[str, ...]], list[str]]:
    rows = []
    claim_latencies, alone_latencies = claims["concurrent"], claims["alone"]
    working_latencies, after_latencies = claims["working"], claims["after"]
    c50, c95, cmax = (ms(percentile(claim_latencies, 50)), ms(percentile(claim_latencies, 95)),
                      ms(max(claim_latencies)))
    a50, a95, amax = (ms(percentile(alone_latencies, 50)), ms(percentile(alone_latencies, 95)),
                      ms(max(alone_latencies)))
    w50, w95, wmax = (ms(percentile(working_latencies, 50)), ms(percentile(working_latencies, 95)),
                      ms(max(working_latencies)))
    rows.append((f"claim_next p50 / p95 / max (ms), {CLAIM_THREADS} annotators working vs 1 alone",
                 f"{w50:.1f} / {w95:.1f} / {wmax:.1f}", f"{a50:.1f} / {a95:.1f} / {amax:.1f}",
                 f"{w95 / a95:.1f}x at p95", f"p95 < {TARGET_CLAIM_P95_MS:.0f} ms"))
    rows.append((f"claim_next p50 / p95 / max (ms), {CLAIM_THREADS} claiming back to back (saturation)",
                 f"{c50:.1f} / {c95:.1f} / {cmax:.1f}", f"{a50:.1f} / {a95:.1f} / {amax:.1f}",
                 f"{c95 / a95:.1f}x at p95", "(information)"))
    rows.append((f"claim_next p50 / p95 / max (ms), 1 alone after the {len(claims['claim_items']):,} claims",
                 f"{ms(percentile(after_latencies, 50)):.1f} / {ms(percentile(after_latencies, 95)):.1f} / "
                 f"{ms(max(after_latencies)):.1f}", "-", "-", ""))
    concurrent_rate = len(claims["claim_items"]) / claims["concurrent_seconds"]
    alone_rate = len(alone_latencies) / sum(alone_latencies)
    rows.append((f"claims/s, {CLAIM_THREADS} concurrent vs 1 alone", f"{concurrent_rate:.0f}", f"{alone_rate:.0f}",
                 f"{concurrent_rate / alone_rate:.2f}x", ""))
    verdicts = [f"claim p95 with {CLAIM_THREADS} annotators working: "
                f"{'met' if w95 < TARGET_CLAIM_P95_MS else 'MISSED'} ({w95:.1f} ms)"]
    for kind in KINDS:
        label = LABELS[kind]
        values = http["latencies"][kind]
        figure = ("-" if not values else
                  f"{ms(percentile(values, 50)):.1f} / {ms(percentile(values, 95)):.1f} / {ms(max(values)):.1f}")
        rows.append((f"claim over HTTP p50 / p95 / max (ms), {HTTP_CLAIM_CLIENTS} clients, {label}", figure,
                     "-", "-", "(information)"))
    return rows, verdicts


def claims_note(claims: dict, http: dict) -> str:
    concurrent_rate = len(claims["claim_items"]) / claims["concurrent_seconds"]
    sampler = claims["sampler"]
    return (
        f"claims: {CLAIM_THREADS} threads x {CLAIM_ROUNDS} claims on a pool of {CLAIM_POOL:,} items, overlap 1 "
        f"(each thread its own DB connection; one Python process, so the threads also share the GIL). 'Working': "
        f"each annotator spends {THINK[0]:g}-{THINK[1]:g} s on an item before the next claim "
        f"(~{CLAIM_THREADS / statistics.mean(THINK):.0f} claims/s in all, far above human pace); 'back to back': "
        f"no pause at all; the "
        f"baseline is 1 annotator alone, {CLAIM_ROUNDS} claims, of which the claiming thread's own CPU time (Python: "
        f"ORM, driver) is {ms(statistics.median(claims['alone_cpu'])):.1f} ms per claim (median); with no pause "
        f"between claims, {CLAIM_THREADS} / {concurrent_rate:.0f} claims/s = {ms(CLAIM_THREADS / concurrent_rate):.0f} "
        f"ms is the latency queueing alone implies (Little's law); peak backends waiting on a lock meanwhile: "
        f"{sampler.peak_lock_waits}, peak connections {sampler.peak}. HTTP: {HTTP_CLAIM_CLIENTS} clients x "
        f"{HTTP_CLAIM_ROUNDS} claims on a fresh pool and a freshly started server each (the endpoint also opens "
        f"the session); peak PostgreSQL connections to the bench database meanwhile: "
        + " / ".join(f"{http['peak_connections'][kind]} ({LABELS[kind]})" for kind in KINDS) + "; refused claims: "
        + ", ".join(f"{kind} {len(v)}" + (f" (HTTP {sorted(set(v))})" if v else "")
                    for kind, v in http["failures"].items())
        + f". A new PostgreSQL connection costs {http['new_connection_ms']:.1f} ms here (median of 10).")


if __name__ == "__main__":
    main()
