"""The onPanda load: annotators and trainers as asyncio + httpx clients of a running server, and its set-up.

Shared by `bench/load_bench.py` (50 annotators) and `tests/integration/test_load_smoke.py` (a handful).
The clients speak only HTTP, on loopback; `prepare()` (the project, items with real rollouts, users,
tokens, and one real export) runs in the caller's Django process, against the database the server uses.

An annotator does `rounds` loops of: claim the next item, read the session, read the top-k candidates
at a position of the current node, post a correction (a candidate other than the current token and not
an end token), stream the continuation (the server-sent events up to `done`), accept; with a think time
before the candidates, the correction and the accept. A trainer polls the export list and the export,
reads its manifest and downloads every shard (checking size and sha256), with a think time between
polls, until its rounds are done or every annotator has finished (at least one round). Every request
is timed; an error is any status but the expected ones, a transport error, a wrong body (an accept that
does not say `accepted`, a shard whose sha256 differs) or a stream that sends `error` or ends without
`done`. A failed step ends that loop (the next round claims again: a claim still active comes back).
The whole run stops at `time_limit` seconds: whatever is in flight is cancelled and not counted.
"""

import asyncio
import hashlib
import json
import random
import time
from dataclasses import dataclass, field

import benchlib
import httpx
from benchlib import percentile

ANNOTATOR_ENDPOINTS = ("claim", "session", "candidates", "correct", "stream", "accept")
TRAINER_ENDPOINTS = ("exports list", "export detail", "manifest", "shard")
ENDPOINTS = ANNOTATOR_ENDPOINTS + TRAINER_ENDPOINTS
STREAMING = frozenset({"stream"})  # bound by the one shared model, not by the web app
REQUEST_TIMEOUT = 300.0  # seconds; a stream waits its turn on the model behind every other annotator's


@dataclass
class LoadPlan:
    base_url: str
    slug: str
    annotator_secrets: list[str]
    trainer_secrets: list[str]
    export_id: int
    rounds: int
    trainer_rounds: int
    max_tokens: int
    avoid_token_ids: frozenset[int] = frozenset()  # end tokens: picking one ends the response, no stream
    think: tuple[float, float] = (0.1, 0.5)  # seconds before each step a person would think about
    ramp: float = 0.5  # annotators start at uniform random moments in the first `ramp` seconds (spawn rate)
    time_limit: float = 600.0
    seed: int = 0


@dataclass
class Sample:
    endpoint: str
    seconds: float
    ok: bool
    at: float = 0.0  # when it started, in seconds since the load started
    app_seconds: float | None = None  # the server's own time (its Server-Timing header), when it sent one


@dataclass
class LoadResult:
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    loops: list[dict] = field(default_factory=list)  # per annotator loop: annotator, claim, item, session, status
    ttft: list[float] = field(default_factory=list)  # stream request -> first `token` event
    stream_tokens: int = 0
    shard_bytes: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    queue_empty: int = 0
    started: float = field(default_factory=time.perf_counter)

    def error_count(self, endpoint: str | None = None) -> int:
        return sum(1 for s in self.samples if not s.ok and endpoint in (None, s.endpoint))


def app_seconds(response: httpx.Response | None) -> float | None:
    """The app's own time from `Server-Timing: app;dur=<ms>` (dataplatform/timing.py); for a stream, to its
    headers. The rest of a request's time is the ASGI server, the loopback and this client."""
    header = response.headers.get("server-timing", "") if response is not None else ""
    name, _, duration = header.partition(";dur=")
    return float(duration) / 1000 if name == "app" and duration else None


class StepFailed(Exception):
    """A request failed (already recorded); the loop it belongs to ends."""


class Client:
    """One simulated person: an httpx client with its own keep-alive connection and token."""

    def __init__(self, plan: LoadPlan, secret: str, result: LoadResult):
        self.plan = plan
        self.result = result
        self.http = httpx.AsyncClient(base_url=plan.base_url, headers={"Authorization": f"Token {secret}"},
                                      timeout=REQUEST_TIMEOUT, follow_redirects=True)

    def record(self, endpoint: str, started: float, ok: bool, problem: str = "",
               response: httpx.Response | None = None) -> None:
        now = time.perf_counter()
        self.result.samples.append(Sample(endpoint, now - started, ok, started - self.result.started,
                                          app_seconds(response)))
        if not ok:
            self.result.errors.append(f"{endpoint}: {problem}")
            raise StepFailed(problem)

    async def call(self, endpoint: str, method: str, url: str, *, expect=(200,), body: dict | None = None,
                   check=None) -> httpx.Response:
        started = time.perf_counter()
        try:
            response = await self.http.request(method, url, json=body)
        except httpx.HTTPError as exc:
            self.record(endpoint, started, False, f"{method} {url}: {exc!r}")
        problem = "" if response.status_code in expect else (
            f"{method} {url}: HTTP {response.status_code} {response.text[:300]}")
        if not problem and check is not None:
            problem = check(response) or ""
        self.record(endpoint, started, not problem, problem, response)
        return response

    async def stream(self, url: str) -> None:
        """POST the stream URL and read the server-sent events up to `done`."""
        started = time.perf_counter()
        buffer, tokens, outcome, response = "", 0, None, None
        try:
            async with self.http.stream("POST", url) as response:
                if response.status_code != 200:
                    body = (await response.aread())[:300]
                    self.record("stream", started, False, f"POST {url}: HTTP {response.status_code} {body!r}")
                async for text in response.aiter_text():
                    buffer += text
                    while "\n\n" in buffer:
                        block, buffer = buffer.split("\n\n", 1)
                        event = block.split("\n", 1)[0].removeprefix("event: ")
                        if event == "token":
                            if tokens == 0:
                                self.result.ttft.append(time.perf_counter() - started)
                            tokens += 1
                        elif event in ("done", "error"):
                            outcome = (event, block)
        except httpx.HTTPError as exc:
            self.record("stream", started, False, f"POST {url}: {exc!r}")
        self.result.stream_tokens += tokens
        if outcome is None:
            self.record("stream", started, False, f"POST {url}: the stream ended without `done` ({tokens} tokens)")
        self.record("stream", started, outcome[0] == "done", f"POST {url}: {outcome[1][:300]}", response)

    async def think(self, rng: random.Random) -> None:
        await asyncio.sleep(rng.uniform(*self.plan.think))

    async def close(self) -> None:
        await self.http.aclose()


def _pick_position(node: dict, max_tokens: int, rng: random.Random) -> list[int]:
    """Positions to try, first a random one: each leaves at least one token for the model to continue."""
    last = min(len(node["token_ids"]), max_tokens - 1)  # position p keeps p + 1 tokens
    positions = list(range(node["locked_until"], last))  # tokens before an earlier correction are fixed
    rng.shuffle(positions)
    return positions


async def annotator(plan: LoadPlan, index: int, client: "Client", result: LoadResult, deadline: float) -> None:
    rng = random.Random(plan.seed * 100_003 + index)
    try:
        await asyncio.sleep(rng.uniform(0, plan.ramp))  # people do not all start in the same millisecond
        for _ in range(plan.rounds):
            if time.monotonic() > deadline:
                return
            loop = {"annotator": index, "claim": None, "item": None, "session": None, "status": "started"}
            result.loops.append(loop)
            try:
                claim = await client.call("claim", "POST", f"/api/v1/projects/{plan.slug}/annotate/claim/",
                                          expect=(200, 204))
                if claim.status_code == 204:
                    loop["status"] = "queue empty"
                    result.queue_empty += 1
                    return
                claim = claim.json()
                loop.update(claim=claim["id"], item=claim["item"], session=claim["session"], status="claimed")
                session_url = f"/api/v1/sessions/{claim['session']}/"
                session = (await client.call("session", "GET", session_url)).json()
                node = session["current_node"]
                if node["status"] != "complete":  # an earlier loop's stream failed: continue it, as the workspace does
                    await client.stream(f"{session_url}nodes/{node['id']}/stream/")
                    session = (await client.call("session", "GET", session_url)).json()
                    node = session["current_node"]
                choice = None
                for position in _pick_position(node, plan.max_tokens, rng)[:3]:
                    await client.think(rng)
                    candidates = (await client.call(
                        "candidates", "GET", f"{session_url}nodes/{node['id']}/candidates/{position}/")).json()
                    options = [c["token_id"] for c in candidates
                               if not c["current"] and c["token_id"] not in plan.avoid_token_ids]
                    if options:
                        choice = (position, rng.choice(options))
                        break
                if choice is None:
                    loop["status"] = "no candidate"
                    result.errors.append(f"session {claim['session']}: no top-k candidate to pick")
                    continue
                await client.think(rng)
                child = (await client.call("correct", "POST", f"{session_url}correct/", expect=(201,), body={
                    "version": session["version"], "node_id": node["id"], "position": choice[0],
                    "token_id": choice[1]})).json()
                loop["status"] = "corrected"
                await client.stream(f"{session_url}nodes/{child['id']}/stream/")
                loop["status"] = "streamed"
                await client.think(rng)
                await client.call(
                    "accept", "POST", f"{session_url}accept/", body={"version": child["session_version"]},
                    check=lambda r: None if r.json().get("status") == "accepted" else f"not accepted: {r.text[:200]}")
                loop["status"] = "accepted"
            except StepFailed:
                continue
    finally:
        await client.close()


async def trainer(plan: LoadPlan, index: int, client: "Client", result: LoadResult, deadline: float,
                  annotators_done: asyncio.Event) -> None:
    rng = random.Random(plan.seed * 100_003 + 50_000 + index)
    export_url = f"/api/v1/projects/{plan.slug}/exports/{plan.export_id}/"
    try:
        for number in range(plan.trainer_rounds):
            # With annotators, trainers poll while they work (at least one round); alone, all their rounds.
            if time.monotonic() > deadline or (number and plan.annotator_secrets and annotators_done.is_set()):
                return
            try:
                await client.think(rng)
                await client.call("exports list", "GET", f"/api/v1/projects/{plan.slug}/exports/")
                await client.think(rng)
                await client.call("export detail", "GET", export_url,
                                  check=lambda r: None if r.json().get("state") == "succeeded" else r.text[:200])
                manifest = (await client.call("manifest", "GET", f"{export_url}manifest")).json()
                for shard in manifest["shards"]:
                    def same_bytes(response, shard=shard):
                        if len(response.content) != shard["bytes"]:
                            return f"shard {shard['name']}: {len(response.content)} bytes, manifest {shard['bytes']}"
                        if hashlib.sha256(response.content).hexdigest() != shard["sha256"]:
                            return f"shard {shard['name']}: sha256 differs from the manifest"
                        return None
                    response = await client.call("shard", "GET", f"{export_url}shards/{shard['name']}",
                                                 check=same_bytes)
                    result.shard_bytes += len(response.content)
            except (StepFailed, json.JSONDecodeError, KeyError) as exc:
                if not isinstance(exc, StepFailed):
                    result.errors.append(f"trainer {index}: unexpected body: {exc!r}")
                continue
    finally:
        await client.close()


async def _run(plan: LoadPlan) -> LoadResult:
    result = LoadResult()
    # Every client first (each builds an SSL context, ~20 ms of this loop's time), then the clock starts.
    annotator_clients = [Client(plan, secret, result) for secret in plan.annotator_secrets]
    trainer_clients = [Client(plan, secret, result) for secret in plan.trainer_secrets]
    result.started = time.perf_counter()
    started = time.monotonic()
    deadline = started + plan.time_limit
    annotators_done = asyncio.Event()
    annotator_tasks = [asyncio.create_task(annotator(plan, n, client, result, deadline))
                       for n, client in enumerate(annotator_clients)]
    trainer_tasks = [asyncio.create_task(trainer(plan, n, client, result, deadline, annotators_done))
                     for n, client in enumerate(trainer_clients)]

    async def watch() -> None:
        if annotator_tasks:
            await asyncio.wait(annotator_tasks)
        annotators_done.set()

    watcher = asyncio.create_task(watch())
    tasks = annotator_tasks + trainer_tasks
    _, pending = await asyncio.wait(tasks, timeout=plan.time_limit + 1)
    result.seconds = time.monotonic() - started
    if pending:  # the time limit: stop, report what completed
        result.timed_out = True
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    watcher.cancel()
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            result.errors.append(f"client crashed: {task.exception()!r}")
    return result


def run_load(plan: LoadPlan) -> LoadResult:
    """Run every client of the plan concurrently until they finish or the time limit; return what happened."""
    return asyncio.run(_run(plan))


# --- figures -------------------------------------------------------------------------------------------

def endpoint_stats(result: LoadResult) -> dict[str, dict]:
    """Per endpoint: requests, errors, throughput (req/s over the run), p50/p95/p99 in ms (all requests),
    and the p95 of the app's own time (`app p95`, from Server-Timing; None when no response sent it)."""
    stats = {}
    for endpoint in ENDPOINTS:
        samples = [s for s in result.samples if s.endpoint == endpoint]
        if not samples:
            continue
        seconds = [s.seconds for s in samples]
        app = [s.app_seconds for s in samples if s.app_seconds is not None]
        stats[endpoint] = {
            "requests": len(seconds), "errors": result.error_count(endpoint),
            "rate": len(seconds) / result.seconds if result.seconds else 0.0,
            **{f"p{q}": percentile(seconds, q) * 1000 for q in (50, 95, 99)},
            "app p95": percentile(app, 95) * 1000 if app else None,
        }
    return stats


# --- set-up (in the caller's Django process) ------------------------------------------------------------

TOPICS = ["the moon", "photosynthesis", "a lighthouse", "prime numbers", "the ocean", "volcanoes", "bread",
          "the Roman empire", "honeybees", "electricity", "chess", "rain", "maps", "glass", "owls"]
TASKS = ["Tell me one fact about {}.", "Explain {} to a child.", "Write a haiku about {}.",
         "Give two reasons to learn about {}.", "Describe {} in one sentence.", "Ask me a question about {}."]


def prepare(*, slug: str, items: int, annotators: int, trainers: int, max_tokens: int, top_k: int = 5,
            temperature: float = 0.0, user_prefix: str = "load-", export_rows: int = 2_000,
            shard_rows: int = 500, log=print) -> dict:
    """The project, `items` items with real rollouts (kept between runs with the same settings), annotators
    and trainers with fresh tokens, and one export written now by running its job in this process.

    Claims and sessions of an earlier run are deleted first, so every item is free again. Returns the
    secrets, the export id and the model's end token ids (which a correction should not pick).
    """
    from django.contrib.auth import get_user_model

    from annotate import services
    from annotate.models import Claim, Item
    from dataplatform.accounts import services as account_services
    from dataplatform.accounts.models import ApiToken, Project, Role
    from dataplatform.exports import services as export_services
    from dataplatform.exports.models import Export
    from dataplatform.inference import backend_for
    from dataplatform.jobs.models import Job, JobState
    from dataplatform.jobs.services import execute_job

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": f"Load {slug}"})
    Claim.objects.filter(item__project=project).delete()  # sessions, nodes and events go with them
    Item.objects.filter(project=project).update(claims_done=0)
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = max_tokens, top_k, temperature
    config.seed_policy, config.seed, config.overlap, config.lease_minutes = "fixed", 0, 1, 60
    config.save()

    prompts = [task.format(topic) for task in TASKS for topic in TOPICS]
    existing = set(Item.objects.filter(project=project).values_list("source_sha256", flat=True))
    Item.objects.bulk_create([
        Item(project=project, source_sha256=f"{n:064d}",
             messages=[{"role": "user", "content": prompts[n % len(prompts)] + (f" ({n // len(prompts)})" if
                                                                               n >= len(prompts) else "")}])
        for n in range(items) if f"{n:064d}" not in existing])
    marker = f"loadlib rollouts v1: max_tokens={max_tokens} top_k={top_k} temperature={temperature}"
    regenerate = project.description != marker
    pending = Item.objects.filter(project=project, rollout__isnull=True).count()
    if regenerate or pending:
        started = time.perf_counter()
        answered = services.generate_rollouts(project=project, progress=benchlib.Progress(), regenerate=regenerate)["answered"]
        Project.objects.filter(pk=project.pk).update(description=marker)
        log(f"generated rollouts for {answered} items in {time.perf_counter() - started:.1f} s (kept for later runs)")

    def member(name: str, role: str):
        user, created = get_user_model().objects.get_or_create(username=user_prefix + name)
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        account_services.set_membership(project=project, user=user, role=role)
        return user

    annotator_users = [member(f"annotator-{n:02d}", Role.ANNOTATOR) for n in range(annotators)]
    trainer_users = [member(f"trainer-{n:02d}", Role.TRAINER) for n in range(trainers)]
    curator = member("curator", Role.CURATOR)
    ApiToken.objects.filter(user__in=annotator_users + trainer_users).delete()  # an earlier run's

    def secret(user, **options) -> str:
        return account_services.issue_token(user=user, name="load", **options)[1]

    # The export: finished jobs of the project (platform.jobs), written by its job run here and now.
    have = Job.objects.filter(project=project, kind="load.synthetic").count()
    Job.objects.bulk_create([Job(project=project, kind="load.synthetic", params={"n": n}, state=JobState.SUCCEEDED,
                                 created_by=curator) for n in range(have, export_rows)], batch_size=1_000)
    for old in Export.objects.filter(project=project):
        export_services.delete_export(export=old)
    export = export_services.create_export(project=project, user=curator, publish=False, options={
        "kind": "platform.jobs", "filters": {"status": ["succeeded"]}, "shard_rows": shard_rows,
        "validation_ratio": 0.1})
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    export.job.refresh_from_db()
    if export.job.state != JobState.SUCCEEDED:
        raise RuntimeError(f"the load's export failed: {export.job.error}")
    return {
        "project": project,
        "annotator_users": annotator_users,
        "annotator_secrets": [secret(user) for user in annotator_users],
        "trainer_secrets": [secret(user, read_only=True) for user in trainer_users],
        "export_id": export.pk,
        "export_shards": len(export.manifest["shards"]),
        "export_bytes": export.manifest["totals"]["bytes"],
        "eos_ids": frozenset(backend_for(project, model=services.config_for(project).model_name).eos_token_ids),
    }
