"""Work a request leaves for after its response has gone out: bookkeeping the answer does not depend on.

`after_response(request, work)` queues a callable. `after_response_middleware` hands the queue to the
response, and the work runs when the server closes the response, once the client has all of it: under
ASGI after the last body message, under WSGI when the server closes the response, in Django's test
client before the call returns. It runs in the request's thread, before `request_finished` hands the
database connection back to the pool. A failure is logged; the client already has its answer.

What uses it: the token-use bookkeeping of every API request (two Redis round trips; on a token's first
request of the hour also three database statements, which made a new claim 16 -> 22 ms). Under load that
time was spent while the client waited.

Not run: the work of a request whose client went away before its response was sent (Django then does
not close the response), and of a process killed in between. Only use it for what may be lost so.
"""

import functools
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_QUEUE = "_after_response"


def after_response(request, work: Callable[[], None]) -> None:
    request = getattr(request, "_request", request)  # DRF's Request wraps Django's HttpRequest
    request.__dict__.setdefault(_QUEUE, []).append(work)


def after_response_middleware(get_response):
    def middleware(request):
        response = get_response(request)
        for work in request.__dict__.pop(_QUEUE, ()):
            # What a response's close() calls (Django's FileResponse closes its file there too). Django
            # swallows a closer's exception, so each one logs its own.
            response._resource_closers.append(functools.partial(_run, work))
        return response

    return middleware


def _run(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception:
        # The function's name only: its arguments may hold a token.
        name = getattr(getattr(work, "func", work), "__qualname__", type(work).__name__)
        logger.exception("Work left for after the response failed: %s", name)
