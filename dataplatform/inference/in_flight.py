"""Many blocking backend calls with a bounded number in flight, each retried while the backend is unavailable.

`VllmBackend.rollouts` sends one HTTP request per prompt and keeps up to VLLM_MAX_CONCURRENCY of them in flight:
vLLM schedules the requests it holds together (continuous batching), so one at a time would leave it idle.
"""

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from .base import BackendUnavailable

logger = logging.getLogger(__name__)

T = TypeVar("T")


def completed(call: Callable[[int], T], count: int, *, limit: int, retries: int,
              backoff: float) -> Iterator[tuple[int, T]]:
    """(index, call(index)) for every index in range(count), in the order the calls finish.

    At most `limit` calls run at once, and a new one starts only when the caller takes a result: a caller
    that saves each result slowly holds back the next calls instead of piling up finished results (at most
    `limit` of them wait). A call that raises BackendUnavailable runs again after `backoff` seconds, then
    twice that, up to `retries` times; any other error, or the last one, ends the iteration with that error
    once the results already finished have been handed out, and no call starts after it. Closing the
    iterator early (a cancelled job) starts nothing more and stops the retries; the calls already running
    finish in the background and their results are dropped."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, min(limit, count)), thread_name_prefix="backend-in-flight")
    waiting = iter(range(count))
    running: dict[Future, int] = {}

    def start_next() -> None:
        index = next(waiting, None)
        if index is not None:
            running[pool.submit(_retried, call, index, retries=retries, backoff=backoff, stop=stop)] = index

    try:
        for _ in range(limit):
            start_next()
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            # Successes first: they are handed out before a failure among them ends the iteration.
            finished = sorted(((running.pop(future), future) for future in done),
                              key=lambda pair: pair[1].exception() is not None)
            if finished[-1][1].exception() is None:
                for _ in finished:  # refill before handing out, so the slots work while the caller saves
                    start_next()
            for index, future in finished:
                yield index, future.result()
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def _retried(call: Callable[[int], T], index: int, *, retries: int, backoff: float, stop: threading.Event) -> T:
    for attempt in range(retries):
        try:
            return call(index)
        except BackendUnavailable as exc:
            delay = backoff * 2 ** attempt
            logger.warning("Call %d: %s; retry %d of %d in %.1f s.", index, exc, attempt + 1, retries, delay)
            if stop.wait(delay):  # the caller stopped listening: nothing more to retry for
                raise
    return call(index)  # the last attempt: its error is the caller's
