"""API token authentication: `Authorization: Token <secret>` or `Bearer <secret>`."""

from rest_framework import authentication, exceptions

from . import services


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("token", "bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode("latin-1").lower() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be '<Token|Bearer> <secret>'.")
        try:
            secret = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from exc
        token = services.authenticate_token(secret=secret)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return 'Token realm="api"'
