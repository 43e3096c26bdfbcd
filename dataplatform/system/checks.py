"""Start-up checks: a configured database or broker that cannot be reached stops
`runserver`, `migrate` and the other commands with a clear message, instead of
failing later or, worse, silently."""

from django.conf import settings
from django.core import checks
from django.db import connection

from dataplatform.broker import BrokerUnavailable, check_broker, redacted_url


@checks.register("services")
def services_reachable(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    errors = []
    try:
        connection.ensure_connection()
    except Exception as exc:
        errors.append(checks.Error(
            f"Cannot reach the database at {redacted_url(settings.DATABASE_URL)}: {exc}".strip(),
            hint="Start the database or fix DATABASE_URL; unset it to use the embedded SQLite file.",
            id="system.E001",
        ))
    if settings.REDIS_URL:
        try:
            check_broker(timeout=3.0)
        except BrokerUnavailable as exc:
            errors.append(checks.Error(str(exc), id="system.E002"))
    return errors
