"""Helpers shared by the benchmark scripts (run as scripts, so bench/ is on sys.path) and the load smoke test."""

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

# httpx and psycopg2 are imported where they are used: a bench's child process that stands for a worker (the kinds
# bench's export) imports this module too, and ~30 MB of clients a worker never loads would count in its peak RSS.

ROOT = Path(__file__).resolve().parent.parent


def use_own_database(server_url: str, name: str, data_dir: Path) -> None:
    """Point this process and its children at a bench's own database and DATA_DIR before django.setup(), with no
    broker (REDIS_URL unset: kombu's filesystem transport under DATA_DIR, which no worker consumes) and local export
    storage. Set, not setdefault: a bench never writes into another database."""
    os.environ["DATABASE_URL"] = f"{server_url}/{name}"
    os.environ["DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("EXPORTS_S3_BUCKET", None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")


def open_own_database(server_url: str, name: str, *, rebuild: bool = False) -> None:
    """Make the bench's database (dropped first with `rebuild`) and set Django up on it."""
    if rebuild:
        import psycopg2

        admin = psycopg2.connect(f"{server_url}/postgres")
        admin.autocommit = True
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    ensure_database(server_url, name)
    import django
    django.setup()


def ensure_database(server_url: str, name: str) -> None:
    """Create the benchmark's own PostgreSQL database if it does not exist yet."""
    import psycopg2

    admin = psycopg2.connect(f"{server_url}/postgres")
    admin.autocommit = True  # CREATE DATABASE cannot run in a transaction block
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{name}"')
                print(f"created database {name}")
    finally:
        admin.close()


def print_table(header: tuple[str, ...], rows: list[tuple[str, ...]], *, text_last: bool = True) -> None:
    """An aligned text table: the figure names left-aligned, the numbers right-aligned, and the last
    column left-aligned too when it is text (a target), as `text_last` says."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    last_number = len(header) - 1 if text_last else len(header)

    def line(cells: tuple[str, ...]) -> str:
        numbers = [cell.rjust(width) for cell, width in zip(cells[1:last_number], widths[1:last_number], strict=True)]
        text = [cells[-1].ljust(widths[-1])] if text_last else []
        return " | ".join([cells[0].ljust(widths[0]), *numbers, *text]).rstrip()

    print(line(header))
    print("-+-".join("-" * width for width in widths))
    for cells in rows:
        print(line(cells))


class RecordingBackend:
    """A backend that passes every call through and keeps those of `methods`, to replay them later on
    the bare backend: the "same calls made directly" baseline of a job's benchmark."""

    def __init__(self, backend, methods: tuple[str, ...]):
        self._backend = backend
        self._methods = methods
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name):
        attribute = getattr(self._backend, name)
        if name not in self._methods:
            return attribute

        def recorded(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return attribute(*args, **kwargs)
        return recorded

    def replay(self) -> None:
        for name, args, kwargs in self.calls:
            getattr(self._backend, name)(*args, **kwargs)


class ConnectionSampler:
    """Samples the server connections to a database: the peak count, and the peak waiting on a lock."""

    def __init__(self, server_url: str, database: str, interval: float = 0.05):
        self.database = database
        self.interval = interval
        self.peak = 0
        self.peak_lock_waits = 0
        self._stop = threading.Event()
        import psycopg2

        self._conn = psycopg2.connect(f"{server_url}/postgres")
        self._conn.autocommit = True
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._conn.cursor() as cursor:
                cursor.execute("SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock') "
                               "FROM pg_stat_activity WHERE datname = %s", [self.database])
                connections, lock_waits = cursor.fetchone()
            self.peak = max(self.peak, connections)
            self.peak_lock_waits = max(self.peak_lock_waits, lock_waits)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._conn.close()


class Progress:
    """The progress object generate_rollouts reports to (a job's, normally)."""

    def __init__(self):
        self.job = type("JobStub", (), {"progress_total": 0})()

    def set_total(self, total):
        self.job.progress_total = total

    def report(self, done, **kwargs):
        pass


# --- figures ---------------------------------------------------------------------------------------

def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak resident set so far, in MB: its VmHWM. Not ru_maxrss: Linux carries a parent's peak into
    its child's ru_maxrss through fork and exec, so a child of a parent that loaded a model reports the parent's
    size."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if pid == "self" else 0.0  # Linux: KiB


def adbc_to_parquet(database_url: str, sql: str, output: Path | None) -> int:
    """The export benches' baseline, the simplest Arrow-native path: the ADBC PostgreSQL driver runs `sql` (one
    query, its record batches as they come) and, with an `output`, pyarrow writes them to one zstd Parquet file as
    they are (JSON stays text), in this one thread. Returns the rows read."""
    import adbc_driver_postgresql.dbapi
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, writer = 0, None
    with adbc_driver_postgresql.dbapi.connect(database_url.replace("postgres://", "postgresql://"),
                                              autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        for batch in cursor.fetch_record_batch():
            rows += batch.num_rows
            if output is not None:
                # A JSON column as its text (the driver's arrow.json type is an extension over a string).
                batch = pa.RecordBatch.from_arrays(
                    [column.storage if isinstance(column.type, pa.ExtensionType) else column
                     for column in batch.columns], names=batch.schema.names)
                writer = writer or pq.ParquetWriter(output, batch.schema, compression="zstd")
                writer.write_batch(batch)
    if writer:
        writer.close()
    return rows


def run_job_inline(*, project, kind: str, user, params: dict | None = None) -> float:
    """Seconds of one job of `kind`, run in this process by `execute_job` as a worker runs it (not published);
    exits naming the job's error if it does not succeed."""
    from dataplatform.jobs.models import JobState
    from dataplatform.jobs.services import enqueue_job, execute_job

    job = enqueue_job(project=project, kind=kind, params=params or {}, user=user, publish=False)
    started = time.perf_counter()
    execute_job(job_id=job.pk)
    seconds = time.perf_counter() - started
    job.refresh_from_db()
    if job.state != JobState.SUCCEEDED:
        raise SystemExit(f"the {kind} job failed: {job.error}")
    return seconds


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> float:
    return seconds * 1000


# --- CPU time per process (Linux /proc) --------------------------------------------------------------

def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its threads so far (0 if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (uvicorn's worker processes under its supervisor)."""
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(_children(current))
    return tree


def postgres_pids() -> list[int]:
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "postgres":
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return pids


class CpuMeter:
    """CPU seconds spent between entering and leaving the block by each named group of processes, given
    as a function that lists their pids (e.g. `lambda: process_tree(pid)`, `postgres_pids`). On 2 cores
    the web app, the model, PostgreSQL and the load client share the same CPU; this says who had it. A
    process that exits in between loses its share (the pools keep their connections and workers, so
    few do)."""

    def __init__(self, processes: dict[str, Callable[[], list[int]]]):
        self.processes = processes
        self.wall = 0.0

    def _now(self) -> dict[str, dict[int, float]]:
        return {name: {pid: process_cpu_seconds(pid) for pid in pids()} for name, pids in self.processes.items()}

    def __enter__(self) -> "CpuMeter":
        self._started, self._wall_started = self._now(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        ended = self._now()
        self.wall = time.perf_counter() - self._wall_started
        # A process started in between counts from zero.
        self.seconds = {name: sum(cpu - self._started[name].get(p, 0.0) for p, cpu in ended[name].items())
                        for name in self.processes}

    def summary(self) -> str:
        parts = ", ".join(f"{name} {seconds:.0f} s ({seconds / self.wall:.0%} of a core)"
                          for name, seconds in self.seconds.items())
        return f"CPU over the {self.wall:.0f} s load, {os.cpu_count()} cores: {parts}"


# --- the web app in a child process ------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A child process on a free localhost port: the web app under uvicorn as `python -m dataplatform.webserver`,
    either as the Dockerfile runs it behind a benchmark ("asgi": no lifespan, access log off, warnings only) or
    with the arguments bin/run gives it ("embedded", `make run`'s server: its defaults, access log and info lines
    on; give it the embedded mode's settings in `env`), or the embedded model behind vLLM's API, `manage.py
    serve_model` ("model", with `model_threads` torch threads); with `env` (default: this process's environment)
    and its output in a log file under `log_dir`. uvicorn runs `workers` processes (more than 1: a supervisor and
    its worker processes, as docker-compose.yml runs it); `nice` > 0 starts it at that lower CPU priority."""

    def __init__(self, kind: str, log_dir: Path, env: dict[str, str] | None = None, model_threads: int = 0,
                 workers: int = 1, nice: int = 0):
        self.kind = kind
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"{kind}-{self.port}.log"
        if kind == "asgi":
            command = [sys.executable, "-m", "dataplatform.webserver", "--host", "127.0.0.1", "--port", str(self.port),
                       "--lifespan", "off", "--no-access-log", "--log-level", "warning", "--workers", str(workers)]
            self.label = f"ASGI (uvicorn, {workers} process{'es' if workers > 1 else ''})"
        elif kind == "embedded":
            command = [sys.executable, "-m", "dataplatform.webserver", "--host", "127.0.0.1", "--port", str(self.port)]
            self.label = "make run's server (uvicorn as bin/run starts it)"
        elif kind == "model":
            command = [sys.executable, "manage.py", "serve_model", "--port", str(self.port),
                       "--threads", str(model_threads)]
            self.label = "model server (manage.py serve_model)"
        else:
            raise ValueError(f"unknown server kind {kind!r}")
        if nice:
            command = ["nice", "-n", str(nice), *command]  # nice execs the command: the pid stays the server's
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        env=os.environ.copy() if env is None else env)

    def wait_ready(self, secret: str = "", timeout: float = 90) -> float:
        """Seconds until an API request authenticated with `secret` (without one: the log-in page; the model
        server: /health) answers 200; RuntimeError (with the log) otherwise."""
        import httpx

        started = time.perf_counter()
        deadline = started + timeout
        path = "/health" if self.kind == "model" else "/api/v1/projects/" if secret else "/accounts/login/"
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                headers = {"Authorization": f"Token {secret}"} if secret else {}
                response = httpx.get(f"{self.base_url}{path}", headers=headers, timeout=5)
                if response.status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.label} did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


def stop_servers(servers: dict, failed: bool) -> None:
    for server in servers.values():
        server.stop()
        if failed:  # an exception is on its way out: show what the server said
            print(f"--- {server.label} log (tail) ---\n{server.log_tail()}", file=sys.stderr)


# --- rollouts that the bench writes itself ----------------------------------------------------------------

def scored_rollout(backend, prompt_ids: list[int], text: str, top_k: int) -> dict:
    """`text` as if the model had answered it after `prompt_ids`: its tokens, with the model's own logprob and
    top k at each position (one `prompt_logprobs` pass over prompt + text), in the shape `generate_rollouts`
    stores (a stream's: the top k best first, then the token itself when it is outside them), seed 0."""
    token_ids = backend.tokenize(text)
    scores = backend.prompt_logprobs(prompt_ids + token_ids, top_k=top_k)[len(prompt_ids):]
    logprobs, top = [], []
    for token_id, entry in zip(token_ids, scores, strict=True):
        # The entry holds the top k, and the actual token when it is outside them.
        best = sorted(entry.items(), key=lambda pair: -pair[1])[:top_k]
        if all(candidate != token_id for candidate, _ in best):
            best.append((token_id, entry[token_id]))
        logprobs.append(entry[token_id])
        top.append([[candidate, logprob] for candidate, logprob in best])
    return {"token_ids": token_ids, "logprobs": logprobs, "top": top, "finish_reason": "stop",
            "model_id": backend.model_id, "seed": 0}


def reasoning_span(backend, token_ids: list[int], opening: bytes = b"<think>\n",
                   closing: bytes = b"\n</think>") -> tuple[int, int]:
    """(first, end): the response tokens that lie wholly inside its reasoning, between `opening` (at the start)
    and `closing`, read from the tokens' bytes (a token may straddle a marker)."""
    pieces = backend.token_pieces(token_ids)
    data = b"".join(pieces)
    if not data.startswith(opening) or closing not in data:
        raise ValueError("the response does not open with the reasoning marker and close it")
    start, end = len(opening), data.index(closing)
    inside = []
    offset = 0
    for index, piece in enumerate(pieces):
        if offset >= start and offset + len(piece) <= end:
            inside.append(index)
        offset += len(piece)
    if not inside:
        raise ValueError("no token lies wholly inside the reasoning")
    return inside[0], inside[-1] + 1
