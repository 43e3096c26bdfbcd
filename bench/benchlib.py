"""Helpers shared by the benchmark scripts (run as scripts, so bench/ is on sys.path) and the load smoke test."""

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psycopg2

ROOT = Path(__file__).resolve().parent.parent


def ensure_database(server_url: str, name: str) -> None:
    """Create the benchmark's own PostgreSQL database if it does not exist yet."""
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

def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> float:
    return seconds * 1000


# --- the web app in a child process ------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A child process on a free localhost port: the web app as `uvicorn dataplatform.asgi:application`
    ("asgi", as the Dockerfile runs it) or `manage.py runserver --noreload` ("wsgi"), or the embedded model
    behind vLLM's API, `manage.py serve_model` ("model", with `model_threads` torch threads); with `env`
    (default: this process's environment) and its output in a log file under `log_dir`."""

    def __init__(self, kind: str, log_dir: Path, env: dict[str, str] | None = None, model_threads: int = 0):
        self.kind = kind
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"{kind}-{self.port}.log"
        if kind == "asgi":
            command = [str(Path(sys.executable).parent / "uvicorn"), "dataplatform.asgi:application",
                       "--host", "127.0.0.1", "--port", str(self.port), "--lifespan", "off",
                       "--no-access-log", "--log-level", "warning"]
            self.label = "ASGI (uvicorn)"
        elif kind == "model":
            command = [sys.executable, "manage.py", "serve_model", "--port", str(self.port),
                       "--threads", str(model_threads)]
            self.label = "model server (manage.py serve_model)"
        else:
            command = [sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks",
                       f"127.0.0.1:{self.port}"]
            self.label = "WSGI (runserver)"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        env=os.environ.copy() if env is None else env)

    def wait_ready(self, secret: str = "", timeout: float = 90) -> float:
        """Seconds until an authenticated API request (the model server: /health) answers 200; RuntimeError
        (with the log) otherwise."""
        started = time.perf_counter()
        deadline = started + timeout
        path = "/health" if self.kind == "model" else "/api/v1/projects/"
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
