"""The suite's guard (tests/backend_guard.py) catches a model or tool call made inside an application's
transaction, and nothing else: the test case's own transaction does not count."""

import pytest
from django.db import transaction

from dataplatform import tools as mcp
from dataplatform.inference.base import TokenStep
from dataplatform.inference.local import LocalBackend
from dataplatform.inference.vllm import VllmBackend

from . import backend_guard
from .backend_guard import CalledInsideTransaction
from .net import closed_port


class Double:
    """A backend double as a test module defines one: the guard watches it with no registration."""

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def stream(self, prompt_ids, **options):
        for token_id in prompt_ids:
            yield TokenStep(token_id=token_id, logprob=-0.5, top=[], finish_reason=None)


def test_a_backend_call_outside_the_applications_transactions_passes(db):
    # The db fixture's own transaction is open all along: it is the test's, not the application's.
    assert Double().tokenize("ok") == [111, 107]
    with transaction.atomic():
        pass
    assert Double().tokenize("ok") == [111, 107]


def test_a_backend_call_inside_a_transaction_raises_and_fails_the_test(db):
    with pytest.raises(CalledInsideTransaction, match=r"Double\.tokenize ran inside a transaction"):
        with transaction.atomic():
            Double().tokenize("x")
    assert len(backend_guard.take()) == 1  # recorded: the test would fail at its teardown


def test_a_call_whose_error_is_swallowed_is_still_recorded(db):
    with transaction.atomic():
        try:
            Double().tokenize("x")
        except Exception:  # as a service that catches every error of a model call would
            pass
    assert [message.split(" ran ")[0] for message in backend_guard.take()] == ["Double.tokenize"]


def test_a_stream_resumed_inside_a_transaction_is_caught(db):
    steps = Double().stream([1, 2, 3])  # made outside: nothing has run yet
    assert next(steps).token_id == 1
    with pytest.raises(CalledInsideTransaction, match=r"Double\.stream"):
        with transaction.atomic(), transaction.atomic():  # nested: caught in the inner block too
            next(steps)
    backend_guard.take()


def test_a_double_defined_inside_a_test_is_watched(db):
    class Inner(Double):
        def tokenize(self, text):
            return [0]

    with pytest.raises(CalledInsideTransaction, match=r"Inner\.tokenize"):
        with transaction.atomic():
            Inner().tokenize("x")
    backend_guard.take()


@pytest.mark.parametrize("backend", [
    pytest.param(lambda: LocalBackend("/nonexistent"), id="local"),
    pytest.param(lambda: VllmBackend(base_url=f"http://127.0.0.1:{closed_port()}", model="m", api_key="",
                                     timeout=1, tokenizer_dir=None), id="vllm"),
])
def test_the_real_backends_are_watched_before_they_do_anything(db, backend):
    with pytest.raises(CalledInsideTransaction, match=r"Backend\.tokenize"):
        with transaction.atomic():
            backend().tokenize("x")
    backend_guard.take()


def test_a_tool_call_inside_a_transaction_is_caught(db):
    with pytest.raises(CalledInsideTransaction, match=r"dataplatform\.tools\.call_tool"):
        with transaction.atomic():
            mcp.call_tool("time", "get_current_time", {"timezone": "UTC"})
    backend_guard.take()


@pytest.mark.django_db(transaction=True)
def test_in_a_transactional_test_every_atomic_block_is_the_applications():
    assert Double().tokenize("a") == [97]
    with pytest.raises(CalledInsideTransaction):
        with transaction.atomic():
            Double().tokenize("a")
    backend_guard.take()
    assert Double().tokenize("a") == [97]  # the guard let go when the block ended


def test_a_tests_own_transaction_is_not_the_applications_but_one_opened_inside_it_is(db):
    with backend_guard.tests_own_transaction():  # as a module's shared data, or a request rolled back
        assert Double().tokenize("a") == [97]
        with pytest.raises(CalledInsideTransaction):
            with transaction.atomic():
                Double().tokenize("a")
    backend_guard.take()
