import os

import django
from django.core.handlers.asgi import ASGIHandler


class OneThreadTripASGIHandler(ASGIHandler):
    """Django's ASGI handler, with each request's middleware and view in one trip to a thread.

    Our views and most middleware are synchronous (WhiteNoise can only be). Django's own handler then
    runs the middleware in a thread, comes back to the event loop for the URL resolution, and goes to
    the thread again for the view: two more hand-overs between the thread and the event loop for each
    request, and under load each one waits in the loop's queue behind every other request and stream
    of the process. Here the whole chain, ending in the synchronous `_get_response` (as under WSGI),
    is one `sync_to_async` call. Streams are unchanged: a response's async iterator is still sent from
    the event loop."""

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)
        self._middleware_chain = self.adapt_method_mode(True, self._middleware_chain, method_is_async=False)


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
django.setup(set_prefix=False)
application = OneThreadTripASGIHandler()


def _warm_up() -> None:
    """Pay each server process's one-off costs at start, not in some user's request: with several uvicorn
    workers, every process would otherwise make its first users wait (the load bench saw seconds)."""
    from django.conf import settings
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  imports the URLconf, and with it every view and DRF
    if settings.MODEL_BACKEND == "vllm":
        from dataplatform.inference import get_backend

        get_backend().load_tokenizer()  # the copy of the served model's tokenizer, if VLLM_TOKENIZER_DIR is set


_warm_up()
