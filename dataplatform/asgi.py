import gc
import os
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler


class OneThreadTripASGIHandler(ASGIHandler):
    """Django's ASGI handler, with each request's middleware and view in one trip to a thread.

    Our views and most middleware are synchronous (WhiteNoise can only be). Django's own handler then
    runs the middleware in a thread, comes back to the event loop for the URL resolution, and goes to
    the thread again for the view: two more hand-overs between the thread and the event loop for each
    request, and under load each one waits in the loop's queue behind every other request and stream
    of the process. Here the whole chain, ending in the synchronous `_get_response` (as under WSGI),
    is one `sync_to_async` call. Streams are unchanged: a response's async iterator is still sent from
    the event loop.

    And each request's thread is an idle one from earlier requests (`RequestThreads`), not a new one.
    Django's handler makes a thread for every request, and a second one to join it after: the event
    loop waits while each starts, and a start needs the GIL, which under load another thread holds."""

    def __init__(self):
        super().__init__()
        self._threads = RequestThreads()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":  # as Django's own handler
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self._threads.take()
        try:
            # Everything of this request that Django runs "thread-sensitively" (the middleware and view,
            # the signals, response.close and with it request_finished, which hands the request's
            # database connection back to the pool) runs in this one thread, as before.
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self._threads.give_back(executor)

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        self._middleware_chain = self.adapt_method_mode(True, self._middleware_chain, method_is_async=False)


class RequestThreads:
    """Single-thread executors kept for the next requests: one per request at a time (a stream holds its
    own while it lasts), and up to `keep` idle ones. Used from the event loop's thread only.

    A thread is safe to hand on: Django keeps a request's database connection in a thread-local, and
    `request_finished` (sent in this same thread once the response is out, or when the client went
    away) hands it back to the pool. A request whose client went away while its view still ran queues
    the next request of this thread behind that view, which is all it costs."""

    def __init__(self, keep: int = 32):
        self._idle: list[ThreadPoolExecutor] = []
        self._keep = keep

    def take(self) -> ThreadPoolExecutor:
        return self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self._idle) < self._keep:
            self._idle.append(executor)
        else:
            executor.shutdown(wait=False)  # its thread ends once its last call returns; nothing waits for it


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
django.setup(set_prefix=False)
application = OneThreadTripASGIHandler()


def _warm_up() -> None:
    """Pay each server process's one-off costs at start, not in some user's request: with several uvicorn
    workers, every process would otherwise make its first users wait. Measured in process, the first
    claim of a new process took 108 ms against 17 ms for the next: 57 ms importing redis-py (the cache),
    13 ms compiling the URL patterns' regular expressions, 9 ms building the token query."""
    from django.conf import settings
    from django.core.cache import caches
    from django.urls import get_resolver

    from dataplatform.accounts.services import warm_up as warm_up_accounts

    _compile_url_patterns(get_resolver())  # also imports the URLconf, and with it every view and DRF
    for alias in settings.CACHES:
        caches[alias]  # noqa: B018  imports the cache backend
    warm_up_accounts()
    _warm_model(settings.MODEL_BACKEND)
    # A full garbage collection walks every object, and after the imports above (torch among them) a
    # worker holds about 400,000: 200 ms per collection, which Python starts on its own now and then,
    # in the middle of some request. What exists now lives as long as the process: leave it out of them.
    gc.collect()
    gc.freeze()


def _warm_model(backend_name: str) -> None:
    """The process's one backend, built now: the local model and its tokenizer loaded into memory (about 3 s,
    which the first annotator to continue would otherwise wait for, or several at once, each loading it again);
    for vLLM, the copy of the served model's tokenizer, if VLLM_TOKENIZER_DIR is set. Nothing here calls the
    vLLM server: a web process starts while the model server is down, and says so per request."""
    from dataplatform.inference import get_backend

    backend = get_backend()
    backend.load_tokenizer()  # the local backend's loads apart from its model
    if backend_name != "vllm":
        backend.model  # noqa: B018  loads it


def _compile_url_patterns(resolver) -> None:
    """Django compiles each pattern's regular expression the first time a request is matched against it."""
    for pattern in resolver.url_patterns:
        pattern.pattern.regex  # noqa: B018
        if hasattr(pattern, "url_patterns"):
            _compile_url_patterns(pattern)


_warm_up()
