"""Start-up checks: a configured database or broker that cannot be reached stops
`runserver`, `migrate` and the other commands with a clear message, instead of
failing later or, worse, silently. An export storage that refuses the platform (no
such bucket, wrong credentials) stops them too; one that does not answer is a warning
(the rest of the platform works meanwhile, and exports retry)."""

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


@checks.register("services")
def export_storages_usable(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    from dataplatform.exports.health import probe_storage
    from dataplatform.exports.storage import export_storage_aliases

    messages = []
    for alias in export_storage_aliases():
        probe = probe_storage(alias)
        if probe.problem == "refused":
            messages.append(checks.Error(f"{probe.detail} ({probe.where})", id="system.E003",
                                         hint="Fix EXPORTS_S3_BUCKET, EXPORTS_S3_ENDPOINT_URL and the AWS_* "
                                              "credentials, or unset EXPORTS_S3_BUCKET to export to the filesystem."))
        elif probe.problem == "down":
            messages.append(checks.Warning(f"{probe.detail} ({probe.where})", id="system.W001",
                                           hint="Exports and deletes wait for it (503, retried jobs) until it is back."))
    return messages
