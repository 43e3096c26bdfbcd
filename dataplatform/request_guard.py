"""Requests whose path or query string holds a character no database value can: answered before any view.

PostgreSQL refuses NUL in text, so a view that looks up a value from the URL (a username in
`members/<path:username>/`, a filter such as `?environment=`) would end in a 500 on `%00`. Rather than
guard every lookup, this middleware answers every such request: a 404 for the path (no object has that
name) and a 400 for the query string, as JSON under /api/ (dataplatform/errors.py) and Django's pages
elsewhere. Unpaired surrogates are refused the same way; servers decode broken UTF-8 with replacement
characters, so they reach Django only from code that builds a request itself. API bodies are checked by
their parsers (dataplatform/apiutils.py); a page's URL-encoded form fields here, as a 400, since views read
some of them with request.POST.get() rather than through a form field (which refuses NUL itself). Multipart
page forms (the imports) are left to their views: an upload is parsed only once the caller may import
(tests/test_import_access.py), and their fields go through form fields or the guarded lookups.
"""

from asgiref.sync import iscoroutinefunction
from django.http import JsonResponse
from django.utils.decorators import sync_and_async_middleware
from django.utils.translation import gettext

from .errors import bad_request, not_found
from .imports.parsers import UNSTORABLE


def _holds_unstorable(fields) -> bool:
    return any(UNSTORABLE.search(key) or any(UNSTORABLE.search(value) for value in values)
               for key, values in fields.lists())


def _refusal(request):
    """The answer for a request that must not reach a view, or None. Reading request.GET may raise
    TooManyFieldsSent, which Django answers as the 400 it always is."""
    if UNSTORABLE.search(request.path):
        return not_found(request)
    if _holds_unstorable(request.GET):
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": gettext("The query string holds a NUL character or an unpaired "
                                                   "surrogate, which no value may hold.")}, status=400)
        return bad_request(request)
    if (request.method == "POST" and not request.path.startswith("/api/") and request.content_type == "application/x-www-form-urlencoded"
            and _holds_unstorable(request.POST)):
        return bad_request(request)
    return None


@sync_and_async_middleware
def unstorable_request_middleware(get_response):
    # Both kinds, like the rest of the chain: under ASGI it adds no thread hop.
    if iscoroutinefunction(get_response):
        async def middleware(request):
            refusal = _refusal(request)
            return refusal if refusal is not None else await get_response(request)
    else:
        def middleware(request):
            refusal = _refusal(request)
            return refusal if refusal is not None else get_response(request)
    return middleware
