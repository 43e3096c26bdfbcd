"""API token authentication: `Authorization: Token <secret>` or `Bearer <secret>`.

Failed attempts are counted per client IP (limiter.py); a client over the limit gets 429 with
Retry-After and its tokens are not checked until the window ends. Successful use is recorded in the
audit log, coarsely (one row per token and hour), and in the token's last_used_at, after the response
has gone out.

An expired token is a 401 that says when it expired. It is not counted as a failure: only the real
secret gets that answer, so it is not a guess, and counting it would let one forgotten cron job with
an old token lock every client behind the same address out of the API. Its refusals are recorded in
the audit log instead (one row per token and hour), with the address, so the machine can be found.
"""

import functools

from django.utils.translation import gettext
from rest_framework import authentication, exceptions

from dataplatform.after_response import after_response
from dataplatform.audit import services as audit
from dataplatform.client_address import client_ip

from . import limiter, services


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("token", "bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() not in self.keywords:
            return None
        ip = client_ip(request)
        wait = limiter.token_retry_after(ip=ip)
        if wait:
            raise exceptions.Throttled(
                wait=wait, detail=gettext("Too many failed API token attempts from your address; try again in %(seconds)d s.")
                % {"seconds": wait})
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(gettext("Authorization header must be '<Token|Bearer> <secret>'."))
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed(gettext("Token contains invalid characters.")) from exc
        try:
            token = services.authenticate_token(secret=secret)
        except services.TokenExpired as expired:
            audit.record_expired_token_use(token=expired.token, client_ip=ip)
            raise exceptions.AuthenticationFailed(
                gettext("Token expired on %(date)s; create a new one.") % {"date": expired.date}) from None
        if token is None:
            # Only a secret shaped like ours can be a guess at a real token; malformed ones are refused
            # before any database query and are not counted (a misconfigured client is not an attack).
            if services.looks_like_token(secret):
                limiter.record_token_failure(ip=ip)
            raise exceptions.AuthenticationFailed(gettext("Invalid or revoked token."))
        # Bookkeeping the answer does not depend on: after the response, not while the client waits.
        after_response(request, functools.partial(services.note_token_use, token=token, client_ip=ip))
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Token realm="api"'
