"""A `Server-Timing` header on every response: how long the app took to produce it.

`Server-Timing: app;dur=12.3` is the milliseconds from the moment the request entered Django's
middleware chain to the moment its response (for a stream: its headers) was ready. Browsers' developer
tools show it beside the network time, and the load bench (bench/load_bench.py) uses it to tell time
spent in the app from time spent in the ASGI server, the network and the client.

It is first in MIDDLEWARE, so it covers every other middleware, and it is async-capable: under ASGI it
adds no thread hop of its own. It tells a client nothing it could not time itself; it holds only one
number.
"""

import time

from asgiref.sync import iscoroutinefunction
from django.utils.decorators import sync_and_async_middleware


def _stamp(response, started: float) -> None:
    response["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"


@sync_and_async_middleware
def server_timing_middleware(get_response):
    if iscoroutinefunction(get_response):
        async def middleware(request):
            started = time.perf_counter()
            response = await get_response(request)
            _stamp(response, started)
            return response
    else:
        def middleware(request):
            started = time.perf_counter()
            response = get_response(request)
            _stamp(response, started)
            return response
    return middleware
