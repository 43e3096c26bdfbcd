"""Claim races over HTTP against the embedded configuration: one SQLite file shared by the web server (as
`python -m dataplatform.webserver` serves it, with WEB_PROCESSES processes) and a Celery worker on the filesystem
broker, writing a job's progress to the same file while the requests race.

SQLite has no row locks: dataplatform/claims.py's SQLite path relies on every transaction taking the file's write
lock when it begins (settings/database.py: transaction_mode IMMEDIATE), so claims, renewals and ends run one at a
time and each counts the slots after the previous one committed. The races are those of test_claim_races.py
(PostgreSQL): expired leases renewed while others claim (overlap 1 and 2), one annotator claiming from 8 tabs,
accept, skip and release sent together on one claim; each is followed by tests/claim_invariants.py's checks.
A 503 (the database busy) is accepted only after the request waited at least SQLite's busy timeout: an earlier
one would be a lock refused without waiting, which IMMEDIATE transactions exist to prevent. Their number is
printed (`-s`) with the module's set-up time.

The database is the test's own SQLite file whatever the suite runs on; tests/integration/sqlite_site.py says
how it is seeded and checked (a helper process configured as the embedded mode).
"""

import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings

from dataplatform.inference.checkpoint import ensure_converted
from tests import worker
from tests.integration import sqlite_site as site_functions
from tests.integration.bursts import burst
from tests.integration.sqlite_site import Site, embedded_env
from tests.net import closed_port

sys.path.insert(0, str(worker.ROOT / "bench"))  # the server runner lives with the benchmarks
import benchlib  # noqa: E402

pytestmark = pytest.mark.integration

# bin/run serves the embedded mode with 1 process; 2 is the harder case, where requests meet only in the file's
# locks (SQLite's own, across processes) besides in one process's threads. Both pass; one server per module keeps
# the module's cost down (~35 s of CPU, most of it Django starting in five processes and the migrations).
WEB_PROCESSES = 2
JOB_STEPS = 1000  # the worker's job: a progress write per step (its most), stopped once the burst is over
READY_TIMEOUT = 90.0


@dataclass
class Embedded:
    site: Site
    server: benchlib.Server
    worker: subprocess.Popen
    worker_log: Path
    busy_timeout: float
    busy_503s: list[str] = field(default_factory=list)  # the requests that got one, for the report
    job_writes_during_bursts: int = 0


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The embedded configuration on a new SQLite file: migrated, served, and a filesystem-broker worker."""
    started = time.perf_counter()
    data_dir = tmp_path_factory.mktemp("embedded-claims")
    env = embedded_env(
        data_dir, DEBUG="0", SECRET_KEY="races-" + secrets.token_hex(16), LOG_LEVEL="WARNING",
        # Claims and accepts never run the model, only its tokenizer (a session's text): a vLLM client that
        # nothing answers, with the embedded model's tokenizer, keeps each process's start cheap.
        MODEL_BACKEND="vllm", VLLM_BASE_URL=f"http://127.0.0.1:{closed_port()}",
        VLLM_TOKENIZER_DIR=str(ensure_converted(Path(settings.DATA_DIR))))
    site = Site(env)
    server = process = log = None
    try:
        migrated = site.submit(site_functions.migrate)
        # The server starts while the file is migrated (its processes import Django meanwhile); the worker after,
        # since its beat reads the jobs table as soon as it is up.
        server = benchlib.Server("asgi", data_dir, env=env, workers=WEB_PROCESSES)
        described = migrated.result(timeout=READY_TIMEOUT)
        phases = {"migrated": time.perf_counter() - started}
        assert described["vendor"] == "sqlite" and described["journal_mode"] == "wal", described
        worker_log = data_dir / "worker.log"
        log = open(worker_log, "w")  # noqa: SIM115 (closed below)
        # As bin/run starts it (plus the test job kinds): the filesystem broker under DATA_DIR, the embedded beat.
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dataplatform", "worker", "-B", "--loglevel=INFO",
             "--concurrency=1", "-n", f"embedded-{secrets.token_hex(3)}@localhost", "--include", "tests.jobs.kinds",
             "--without-gossip", "--without-mingle"],
            cwd=worker.ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        embedded = Embedded(site, server, process, worker_log, busy_timeout=described["timeout"])
        server.wait_ready(timeout=READY_TIMEOUT)
        phases["served"] = time.perf_counter() - started
        _wait_for_job(embedded, site.call(site_functions.enqueue_count, site.call(
            site_functions.make_queue, items=1, overlap=1), 1), until=("succeeded",))
        phases["worker ran a job"] = time.perf_counter() - started
        print(f"\nembedded configuration ({server.label}, a filesystem-broker worker, {described['name']}): "
              + ", ".join(f"{phase} at {seconds:.1f} s" for phase, seconds in phases.items()))
        yield embedded
        print(f"\n{server.label}: {len(embedded.busy_503s)} busy 503s past the {embedded.busy_timeout:.0f} s "
              f"timeout {embedded.busy_503s}; the worker wrote {embedded.job_writes_during_bursts} progress rows "
              f"during the bursts; module took {time.perf_counter() - started:.1f} s")
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, 9)  # nothing of it is used after the module; its own process group
            process.wait()
        if log is not None:
            log.close()
        if server is not None:
            server.stop()
        site.close()


def _wait_for_job(embedded: Embedded, job_id: int, *, until: tuple[str, ...]) -> tuple[str, int, str]:
    """Wait for the job to reach one of the states `until`; fail if it ends otherwise. Its (state, done, error)."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        state = embedded.site.call(site_functions.job_state, job_id)
        if state[0] in until or state[0] in {"succeeded", "failed", "cancelled"}:
            assert state[0] in until, (state, _tail(embedded.worker_log))
            return state
        if embedded.worker.poll() is not None:
            pytest.fail(f"The worker exited with {embedded.worker.returncode}:\n{_tail(embedded.worker_log)}")
        time.sleep(0.05)
    pytest.fail(f"Job {job_id} not {until} within {READY_TIMEOUT} s: {state}\n{_tail(embedded.worker_log)}")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]


def _race(embedded: Embedded, slug: str, requests: list[tuple[str, str, dict | None]]) -> list:
    """Send the requests together while the worker writes a job's progress to the same file; their answers.

    The job must stop without an error (a progress write refused as locked would fail it), and the busy 503s
    among the answers must have waited the busy timeout; they are counted and left out of the answers (None)."""
    job_id = embedded.site.call(site_functions.enqueue_count, slug, JOB_STEPS)
    _, before, _ = _wait_for_job(embedded, job_id, until=("running",))
    responses = burst(embedded.server.base_url, requests)
    embedded.site.call(site_functions.stop_job, job_id)
    state, after, error = _wait_for_job(embedded, job_id, until=("cancelled", "succeeded"))
    assert error == "", error  # its writes were never refused
    embedded.job_writes_during_bursts += after - before
    # Nor did anything fail out of the answers' sight (an audit row written after a response has gone out).
    for log in (embedded.server.log_path, embedded.worker_log):
        assert "Traceback" not in log.read_text(errors="replace"), _tail(log)
    answers = []
    for (_, path, _), response in zip(requests, responses, strict=True):
        if response.status_code == 503:
            waited, timeout = response.elapsed.total_seconds(), embedded.busy_timeout
            assert waited >= timeout, f"{path}: 503 after {waited:.2f} s, before the {timeout} s busy timeout"
            embedded.busy_503s.append(f"{path} {waited:.1f} s")
            answers.append(None)
        else:
            assert response.status_code < 500, (path, response.status_code, response.text,
                                                 embedded.server.log_tail())
            answers.append(response)
    return answers


def _assert_no_violation(embedded: Embedded, slug: str, overlap: int) -> None:
    found = {name: rows for name, rows in embedded.site.call(site_functions.violations, slug, overlap).items()
             if rows}
    assert found == {}, found


def _claim(slug: str) -> str:
    return f"/api/v1/projects/{slug}/annotate/claim/"


@pytest.mark.parametrize("overlap", [1, 2])
def test_expired_leases_renewed_while_others_claim(embedded, overlap):
    site = embedded.site
    slug = site.call(site_functions.make_queue, items=20, overlap=overlap)
    slots = 20 * overlap
    first = site.call(site_functions.make_annotators, slug, slots, "first")
    claimed = _race(embedded, slug, [(token, _claim(slug), None) for _, token in first])
    assert [answer.status_code for answer in claimed if answer] == [200] * len([a for a in claimed if a])
    site.call(site_functions.expire_leases, slug)
    everyone = first + site.call(site_functions.make_annotators, slug, 30, "late")

    claims = _race(embedded, slug, [(token, _claim(slug), None) for _, token in everyone])
    assert {answer.status_code for answer in claims if answer} <= {200, 204}
    _assert_no_violation(embedded, slug, overlap)
    holders = [(token, answer.json()) for (_, token), answer in zip(everyone, claims, strict=True)
               if answer and answer.status_code == 200]
    # Every slot went to exactly one of them (more claimers than slots), unless a busy claimer missed out.
    assert len(holders) == slots or (None in claims and len(holders) < slots), len(holders)

    accepts = _race(embedded, slug, [(token, f"/api/v1/sessions/{claim['session']}/accept/", {"version": 0})
                                     for token, claim in holders])
    assert {answer.status_code for answer in accepts if answer} <= {200}, [a.text for a in accepts if a][:3]
    _assert_no_violation(embedded, slug, overlap)
    assert site.call(site_functions.claims_in_state, slug, "done") == sum(1 for answer in accepts if answer)


def test_one_annotator_claiming_from_eight_tabs(embedded):
    site = embedded.site
    slug = site.call(site_functions.make_queue, items=10, overlap=1)
    [(user_id, token)] = site.call(site_functions.make_annotators, slug, 1, "tabs")
    claims = [answer for answer in _race(embedded, slug, [(token, _claim(slug), None)] * 8) if answer]
    assert [answer.status_code for answer in claims] == [200] * len(claims) and claims
    assert {answer.json()["id"] for answer in claims} == site.call(site_functions.claim_ids_of, user_id)
    assert len({answer.json()["session"] for answer in claims}) == 1
    _assert_no_violation(embedded, slug, 1)


def test_accept_skip_and_release_of_one_claim_sent_together(embedded):
    site = embedded.site
    slug = site.call(site_functions.make_queue, items=10, overlap=1)
    people = site.call(site_functions.make_annotators, slug, 10, "decide")
    claims = site.call(site_functions.claims_with_sessions, slug, [user_id for user_id, _ in people])
    requests = []
    for (_, token), (claim_id, session_id, version) in zip(people, claims, strict=True):
        requests += [(token, f"/api/v1/sessions/{session_id}/accept/", {"version": version}),
                     (token, f"/api/v1/projects/{slug}/annotate/claims/{claim_id}/skip/", None),
                     (token, f"/api/v1/projects/{slug}/annotate/claims/{claim_id}/release/", None)]
    answers = _race(embedded, slug, requests)

    outcomes = site.call(site_functions.decisions, [claim_id for claim_id, _, _ in claims])
    for index, (claim_state, session_status) in enumerate(outcomes):
        mine = answers[3 * index:3 * index + 3]
        codes = [answer.status_code if answer else None for answer in mine]
        assert codes.count(200) <= 1 and set(codes) <= {200, 400, None}, [a.text for a in mine if a]
        won = {"accept": "done", "skip": "skipped", "release": "released"}
        if 200 in codes:  # the one that answered 200 is the one that happened
            assert claim_state == list(won.values())[codes.index(200)]
        else:  # all three busy: nothing happened
            assert codes == [None] * 3 and claim_state == "active"
        assert (session_status == "accepted") == (claim_state == "done")
    _assert_no_violation(embedded, slug, 1)
