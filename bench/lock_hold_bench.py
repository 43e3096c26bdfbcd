"""How long an onPanda correction holds its session's row lock, on the vLLM client against the embedded model
server (`manage.py serve_model`, the vLLM imitation), beside the model calls themselves in the same run.

It prints a table; it is not a test and fails on nothing. For each of `--sessions` sessions (a real rollout of
the embedded model, generated through the server), the bench runs the correction operators an annotator runs,
each followed by the live continuation where there is one:

- a top-k candidate at one position (`corrections.correct(token_id=...)`), then the stream;
- a typed rewrite a few tokens on (`correct(text=...)`: the text is tokenized by the server), then the stream;
- an edit of a span after it (`edit_selection`: the kept tokens are scored again, a forward pass over the
  whole prefix, `prompt_logprobs`).

Every `SELECT ... FOR UPDATE` of the `annotate_session` row is seen by a database execute wrapper; the lock is
held from the moment that query returns until its transaction commits (`transaction.on_commit`). The figure is
the longest and the median hold per operator, over every lock the operator (and its stream) took. The raw
baseline is the model call the operator needs, timed alone through the same client in the same run: a lock
held across that call would last at least as long.

Run from the project root with PostgreSQL on 127.0.0.1:5432 (about 2 minutes on 2 cores; the first run also
converts the embedded model under var/models):

    .venv/bin/python bench/lock_hold_bench.py [--sessions 8]

Issue 39 measured it before and after the operators took their lock through `annotate/locking.py`; the same
script ran at the older commit with its way of choosing the backend (see `use_backend`).
"""

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench_lock"
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"  # set, never defaulted: the bench writes only here
os.environ["DATA_DIR"] = str(ROOT / "var")  # var/models/ holds the converted model
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ["MODEL_BACKEND"] = "local"
os.environ["DEBUG"] = "0"
os.environ["SECRET_KEY"] = "lock-bench-" + secrets.token_hex(16)
os.environ["LOG_LEVEL"] = "WARNING"
os.environ.pop("REDIS_URL", None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from annotate import corrections, services, streaming  # noqa: E402
from annotate.models import Claim, ClaimState, Item, Session  # noqa: E402
from dataplatform.accounts import services as account_services  # noqa: E402
from dataplatform.accounts.models import Project, Role  # noqa: E402
from dataplatform.inference.vllm import VllmBackend  # noqa: E402

SLUG = "bench-lock-hold"
MAX_TOKENS, TOP_K = 48, 5
TYPED = " Honestly, the short answer is this"
PROMPTS = ["Tell me one fact about {}.", "Explain {} to a child in three sentences."]
TOPICS = ["volcanoes", "the moon", "honeybees", "chess", "rivers", "bread", "clocks", "owls"]


class LockWatch:
    """The session-row locks this connection takes: when each was taken and how long it was held."""

    def __init__(self):
        self.operator = None
        self.holds: dict[str, list[float]] = {}
        self._taken_at: float | None = None

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "FOR UPDATE" in sql and '"annotate_session"' in sql and self._taken_at is None:
            if connection.in_atomic_block:
                self._taken_at = time.perf_counter()
                transaction.on_commit(self._released)
            else:  # autocommit: released as the query ends
                self._record(0.0)
        return result

    def _released(self) -> None:
        self._record(time.perf_counter() - self._taken_at)

    def _record(self, seconds: float) -> None:
        self._taken_at = None
        self.holds.setdefault(self.operator, []).append(seconds)


@contextmanager
def use_backend(backend):
    """Every backend the operators ask for is `backend`: through `override_backend` since issue 39, through
    `annotate.services.backend_for` before it."""
    try:
        from dataplatform.inference import override_backend
    except ImportError:
        original = services.backend_for
        services.backend_for = lambda *args, **kwargs: backend
        try:
            yield
        finally:
            services.backend_for = original
        return
    with override_backend(backend):
        yield


def setup(sessions: int) -> list[Session]:
    benchlib.ensure_database(SERVER_URL, BENCH_DB)
    call_command("migrate", verbosity=0)
    Project.objects.filter(slug=SLUG).delete()
    project = Project.objects.create(slug=SLUG, name="Lock hold bench")
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = MAX_TOKENS, TOP_K, 0.0
    config.save()
    for number in range(sessions):
        prompt = PROMPTS[number % len(PROMPTS)].format(TOPICS[number % len(TOPICS)])
        Item.objects.create(project=project, source_sha256=f"{number:064d}",
                            messages=[{"role": "user", "content": prompt}])
    started = time.perf_counter()
    services.generate_rollouts(project=project, progress=benchlib.Progress())
    print(f"rollouts of {sessions} items through the model server in {time.perf_counter() - started:.1f} s")
    user, _ = get_user_model().objects.get_or_create(username="bench-lock-annotator")
    account_services.set_membership(project=project, user=user, role=Role.ANNOTATOR)
    opened = []
    while (claim := services.claim_next(project=project, annotator=user)) is not None:
        opened.append(services.open_session(claim=claim))
        services.end_claim(claim=claim, state=ClaimState.DONE)
    return opened


def stream(node) -> None:
    for _step in streaming.continue_node(node=node):
        pass


def active(session: Session) -> Session:
    """The session re-read, its claim made active for the operators (one active claim at a time)."""
    claims = Claim.objects.filter(project_id=session.claim.project_id, annotator_id=session.claim.annotator_id)
    claims.exclude(pk=session.claim_id).update(state=ClaimState.DONE)  # one active claim per annotator
    claims.filter(pk=session.claim_id).update(state=ClaimState.ACTIVE)
    return Session.objects.select_related("current_node", "claim", "item").get(pk=session.pk)


def run(sessions: list[Session], watch: LockWatch, backend, user) -> dict[str, list[float]]:
    """Each session through the three operators; the model calls they need, timed alone, as the baseline."""
    baseline: dict[str, list[float]] = {"tokenize (typed text)": [], "prompt_logprobs (edit's rescoring)": []}
    for session in sessions:
        session = active(session)
        node = session.current_node
        position = min(4, len(node.token_ids) - 2)
        candidate = node.top[position][1][0]  # the model's second choice
        watch.operator = "correct: top-k candidate + stream"
        child = corrections.correct(session=session, version=session.version, node_id=node.pk,
                                    position=position, token_id=candidate, actor=user)
        stream(child)

        session = active(session)
        node = session.current_node
        position = min(node.locked_until + 3, len(node.token_ids) - 2)
        watch.operator = "correct: typed rewrite + stream"
        child = corrections.correct(session=session, version=session.version, node_id=node.pk,
                                    position=position, text=TYPED, actor=user)
        stream(child)
        started = time.perf_counter()
        backend.tokenize(TYPED)
        baseline["tokenize (typed text)"].append(time.perf_counter() - started)

        session = active(session)
        node = session.current_node
        start = node.locked_until + 1
        if start + 2 >= len(node.token_ids):
            continue
        watch.operator = "edit_selection (kept tokens rescored)"
        child = corrections.edit_selection(session=session, version=session.version, node_id=node.pk,
                                           start=start, end=start + 2, text=" truly", actor=user)
        started = time.perf_counter()
        backend.prompt_logprobs(child.prompt_ids + child.token_ids, top_k=TOP_K)
        baseline["prompt_logprobs (edit's rescoring)"].append(time.perf_counter() - started)
    return baseline


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8)
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="lock-bench-"))
    server = benchlib.Server("model", log_dir)
    watch = LockWatch()
    try:
        server.wait_ready(timeout=300)
        backend = VllmBackend(base_url=server.base_url, model="", api_key="", timeout=600, tokenizer_dir=None)
        with ExitStack() as stack:
            stack.enter_context(use_backend(backend))
            sessions = setup(args.sessions)
            user = sessions[0].claim.annotator
            stack.enter_context(connection.execute_wrapper(watch))
            baseline = run(sessions, watch, backend, user)
    finally:
        server.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    rows = [(operator, str(len(holds)), ms(max(holds)), ms(statistics.median(holds)))
            for operator, holds in watch.holds.items()]
    rows += [(f"baseline: {call}, alone", str(len(times)), ms(max(times)), ms(statistics.median(times)))
             for call, times in baseline.items() if times]
    print(f"\nSession row lock held, over {len(sessions)} sessions (the vLLM client against manage.py serve_model):")
    benchlib.print_table(("operator", "locks", "longest (ms)", "median (ms)"), rows, text_last=False)


if __name__ == "__main__":
    main()
