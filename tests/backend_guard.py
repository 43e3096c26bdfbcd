"""The suite's guard: no model or tool call while the application holds a transaction open.

A backend call on vLLM is an HTTP request, and on the local model a forward pass; a tool call starts a
server. Made inside a transaction, it holds the rows that transaction locked (a session, an item), and a
database connection, for as long as it takes; on SQLite it holds the whole database's write lock. So every
operator reads and checks under a short lock, works with no transaction open, then writes under the lock
again (DESIGN.md §6, annotate/locking.py). The guard fails any test in which that rule is broken.

How it sees the calls: while the application has a transaction open in a thread, that thread runs under a
profile function (`sys.setprofile`) that watches for a backend method (`GUARDED_METHODS` of the local and
vLLM backends, every HTTP request of the vLLM client, the methods of those names of any test double defined
under tests/) or a tool call (`dataplatform.tools` call_tool, list_tools) starting or resuming (a
generator's every step). It watches the code, not the classes, so a double a test defines in its own body
is watched too. The first such call raises CalledInsideTransaction
where it happens and is recorded: code that swallows the error still fails its test at teardown.

"The application has a transaction open": an atomic block that pytest-django's `db` fixture did not open
(Django marks the test case's own blocks `_from_testcase`). In a transactional test there are none of those.
A test that wraps application code in a transaction of its own, only to roll it back (a module's shared
data, a request in a savepoint), opens it with `tests_own_transaction()`: marked as the test case's are.
"""

import sys
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.transaction import Atomic

GUARDED_METHODS = frozenset({
    "chat_prompt_ids", "tokenize", "detokenize", "token_pieces", "stream", "rollouts", "prompt_logprobs",
    "next_token_logprobs", "continuation_logprobs", "generate", "generate_each", "health", "served_models",
    # The slow steps behind the backends' properties: the local model's load, every HTTP request to vLLM
    # (model_id and context_length ask /v1/models the first time).
    "_read_checkpoint", "_read_tokenizer", "_request",
})
GUARDED_TOOL_FUNCTIONS = frozenset({"call_tool", "list_tools"})

ROOT = Path(__file__).resolve().parent.parent
TESTS = str(ROOT / "tests") + "/"
BACKENDS = {str(ROOT / "dataplatform" / "inference" / name) for name in ("local.py", "vllm.py")}
TOOLS = str(ROOT / "dataplatform" / "tools" / "client.py")


class CalledInsideTransaction(AssertionError):
    """A backend or tool call ran while the application held a transaction open."""


caught: list[str] = []  # what the running test did wrong, from any of its threads


def take() -> list[str]:
    """What was caught so far, forgotten (a test of the guard expects its own catches)."""
    taken = caught[:]
    del caught[:]
    return taken


def tests_own_transaction(using: str | None = None) -> Atomic:
    """An atomic block a test opens around application code to roll it back: the test case's, not the application's
    (so the guard lets the code inside call the model, as it would with no such block)."""
    block = transaction.atomic(using=using)
    block._from_testcase = True
    return block


def application_transaction_open(using: str | None = None) -> bool:
    connection = connections[using or DEFAULT_DB_ALIAS]
    return any(not block._from_testcase for block in connection.atomic_blocks)


_watched_code: dict = {}  # code object -> what it is called in a report, or None when it is not watched


def _watched(code) -> str | None:
    if code not in _watched_code:
        file, name = code.co_filename, code.co_name
        method = name in GUARDED_METHODS and code.co_argcount and code.co_varnames[0] == "self" and (
            file in BACKENDS or file.startswith(TESTS))
        tool = file == TOOLS and name in GUARDED_TOOL_FUNCTIONS
        _watched_code[code] = code.co_qualname if method else f"dataplatform.tools.{name}" if tool else None
    return _watched_code[code]


def _callers(frame) -> str:
    """The project's own frames (not a test's, not the backend's) that led to the call, innermost first."""
    chain = []
    for summary in reversed(traceback.extract_stack(frame)):
        path = Path(summary.filename)
        if path.is_relative_to(ROOT) and not str(path).startswith(TESTS) and str(path) not in BACKENDS | {TOOLS} \
                and ".venv" not in path.parts:
            chain.append(f"{path.relative_to(ROOT)}:{summary.lineno} in {summary.name}")
    return " < ".join(chain[:4]) or "the test itself"


def _profile(frame, event, _arg):
    if event != "call" or (what := _watched(frame.f_code)) is None:
        return
    if not any(application_transaction_open(alias) for alias in connections):
        return
    message = (f"{what} ran inside a transaction the application opened (called from {_callers(frame.f_back)}): "
               "a model or tool call must not hold a lock; check under the lock, call with no transaction open, "
               "write under the lock again (annotate/locking.py)")
    caught.append(message)
    raise CalledInsideTransaction(message)  # Python stops profiling this thread: one catch per transaction


_thread = threading.local()


def _watch() -> None:
    if not getattr(_thread, "watching", False):
        _thread.previous, _thread.watching = sys.getprofile(), True
        sys.setprofile(_profile)


def _unwatch() -> None:
    if getattr(_thread, "watching", False):
        sys.setprofile(_thread.previous)
        _thread.previous, _thread.watching = None, False


@contextmanager
def installed():
    """Watch every application transaction (the suite installs it once, tests/conftest.py)."""
    enter, exit_ = Atomic.__enter__, Atomic.__exit__

    def guarded_enter(self):
        enter(self)
        if not self._from_testcase:
            _watch()

    def guarded_exit(self, *exc_info):
        try:
            return exit_(self, *exc_info)
        finally:
            if not application_transaction_open(self.using):
                _unwatch()

    Atomic.__enter__, Atomic.__exit__ = guarded_enter, guarded_exit
    try:
        yield
    finally:
        Atomic.__enter__, Atomic.__exit__ = enter, exit_
        _unwatch()
