"""Where export files live: Django's storage API, aliases "exports-files" and "exports-s3" in settings.STORAGES.

Filesystem under DATA_DIR by default; S3 through django-storages when EXPORTS_S3_BUCKET is set. New exports go to
settings.EXPORTS_STORAGE_ALIAS, and each export records the alias it was written to (Export.storage): it is served,
deleted and moved (`manage.py move_exports`) from there, whatever new exports use.
"""

import logging
import os
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.utils.translation import gettext, gettext_noop

from dataplatform.errors import Missing, PlatformError, Transient, Unavailable

logger = logging.getLogger(__name__)


class StorageNotConfigured(Unavailable):
    """The export's files are on a storage this server has no settings for (e.g. EXPORTS_S3_BUCKET was unset)."""

    retry_after = None  # waiting changes nothing: an operator must configure it again


class ExportFileGone(Missing):
    """A file the export's record lists is not on its storage: removed or lost there, not something to retry."""

    status = 410


def file_gone(export, name: str) -> ExportFileGone:
    return ExportFileGone(gettext(
        "The file %(name)s of export %(id)d is no longer on its storage (%(alias)s): it was removed or lost there. "
        "Export the data again to get it.") % {"name": name, "id": export.pk, "alias": export.storage})


class StoreDown(Transient):
    """The export storage did not answer (refused connection, timeout, a 5xx): try again in a moment."""

    retry_after = 30
    # What an export job shows while it waits to retry (jobs.tasks.run_job): the job system's usual backoff.
    retrying_message = gettext_noop("Export storage unavailable (attempt %(attempt)s of %(max_attempts)s); retrying "
                                    "in %(seconds)s s.")


class StoreRefused(Unavailable):
    """The export storage answered but refuses the platform (no such bucket, credentials it does not accept): an
    operator must fix the settings; retrying changes nothing until then."""

    retry_after = None


# S3's error codes for a request that will not succeed until an operator changes something.
MISCONFIGURED_CODES = {"NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                       "InvalidBucketName", "AllAccessDisabled", "AccountProblem", "ExpiredToken", "InvalidToken"}


def as_store_error(exc: BaseException, alias: str) -> PlatformError | None:
    """A storage backend's exception in the platform's vocabulary, or None when it is not a store fault."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        if code in MISCONFIGURED_CODES or 400 <= status < 500:
            return StoreRefused(gettext(
                "The export storage %(alias)s refuses the platform's requests (%(code)s): its bucket or credentials "
                "are not set up as the settings say. Nothing was changed; an operator needs to fix the storage "
                "settings.") % {"alias": alias, "code": code or status})
        return StoreDown(gettext("The export storage %(alias)s is unavailable (%(code)s). Nothing was changed; try "
                                 "again in a moment.") % {"alias": alias, "code": code or status})
    if isinstance(exc, NoCredentialsError):
        return StoreRefused(gettext(
            "The export storage %(alias)s has no credentials to sign requests with. Nothing was changed; an operator "
            "needs to fix the storage settings.") % {"alias": alias})
    if isinstance(exc, BotoCoreError):  # refused connections, timeouts, connections closed mid-answer
        return StoreDown(gettext("The export storage %(alias)s is unavailable (%(code)s). Nothing was changed; try "
                                 "again in a moment.") % {"alias": alias, "code": type(exc).__name__})
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):  # the filesystem storage's disk
        return StoreRefused(gettext(
            "The export storage %(alias)s cannot be used (%(code)s). Nothing was changed; an operator needs to look "
            "at it.") % {"alias": alias, "code": type(exc).__name__})
    return None


@contextmanager
def store_errors(alias: str):
    """Store faults inside the block raised as the platform's errors (503 with Retry-After while the store is down,
    a 503 that names the problem when it refuses the platform), logged once; never a 500."""
    try:
        yield
    except PlatformError:
        raise
    except Exception as exc:
        if (error := as_store_error(exc, alias)) is None:
            raise
        logger.warning("Export storage %s: %s: %s", alias, type(exc).__name__, exc)
        raise error from exc


def export_storage() -> Storage:
    """The storage new exports are written to."""
    return storages[settings.EXPORTS_STORAGE_ALIAS]


def storage_named(alias: str) -> Storage:
    if alias not in settings.STORAGES:
        raise StorageNotConfigured(gettext(
            "This export's files are on the storage %(alias)s, which this server is not configured for. An operator "
            "can configure it again, or move the exports (manage.py move_exports).") % {"alias": alias})
    return storages[alias]


def storage_of(export) -> Storage:
    """Where `export`'s files are: the storage it was written to."""
    return storage_named(export.storage)


def is_local(storage: Storage) -> bool:
    return isinstance(storage, FileSystemStorage)


class _LocalFile(File):
    """A finished local file. FileSystemStorage moves a file that has a temporary_file_path
    with os.rename when it can: the final name appears complete or not at all."""

    def temporary_file_path(self) -> str:
        return self.file.name


def publish(storage: Storage, local_path: Path, name: str) -> None:
    """Put a complete local file at `name` in storage, replacing any older file of that name."""
    if storage.exists(name):
        storage.delete(name)
    with open(local_path, "rb") as handle:
        saved = storage.save(name, _LocalFile(handle, name=os.path.basename(name)))
    if saved != name:  # another writer raced us for the name; never leave a second copy behind
        storage.delete(saved)
        raise RuntimeError(f"Export file {name} was written concurrently by another process.")
    if os.path.exists(local_path):  # S3 (and cross-device) saves copy instead of moving
        os.remove(local_path)


def delete_prefix(storage: Storage, prefix: str) -> int:
    """Delete every file directly under `prefix`. Returns how many were deleted."""
    try:
        _, files = storage.listdir(prefix)
    except FileNotFoundError:
        return 0
    for name in files:
        storage.delete(f"{prefix}/{name}")
    return len(files)


def export_storage_aliases() -> list[str]:
    """The export storages this server is configured for (the filesystem always; S3 when EXPORTS_S3_BUCKET is set)."""
    return [alias for alias in ("exports-files", "exports-s3") if settings.STORAGES.get(alias)]
