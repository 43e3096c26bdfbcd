"""The export storages' health, as the system page, its API and the start-up check show it: each configured storage
is asked to write, list and delete a tiny probe object (what an export, a delete and the orphan sweep need of it).

A probe is a few requests with short timeouts and one try (a store that is down answers in seconds, not after
botocore's retries); the system page polls every few seconds, so its result is kept in the shared cache for
EXPORTS_HEALTH_CACHE_SECONDS.
"""

import hashlib
import time
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from .storage import StoreDown, as_store_error, export_storage_aliases

CACHE_KEY = "exports:storage-health"
PROBE_FOLDER = ".health"  # outside exports/, which the orphan sweep walks
# Verbs, in a context of their own: "list" is also a noun elsewhere (an export filter's type).
STEPS = {"write": pgettext_lazy("export storage probe step", "write"),
         "list": pgettext_lazy("export storage probe step", "list"),
         "delete": pgettext_lazy("export storage probe step", "delete")}


@dataclass
class StorageHealth:
    """One storage's probe, kept in the cache as plain values and worded in the language of whoever reads it."""

    alias: str
    where: str  # "s3://bucket at endpoint", or the folder
    problem: str | None = None  # None (all allowed), "down" (does not answer: wait) or "refused" (fix the settings)
    step: str = ""  # the first of STEPS that failed
    code: str = ""  # the store's error code, or the exception's class
    ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def detail(self) -> str:
        values = {"alias": self.alias, "code": self.code, "step": STEPS.get(self.step, self.step), "ms": self.ms}
        if self.problem == "down":
            return _("%(alias)s does not answer (%(code)s) when asked to %(step)s a probe object.") % values
        if self.problem == "refused":
            return _("%(alias)s refuses to %(step)s a probe object (%(code)s): check its settings (bucket, "
                     "credentials, or the folder's permissions).") % values
        return _("%(alias)s: write, list and delete allowed, %(ms).0f ms") % values


def probe_storage(alias: str) -> StorageHealth:
    """Write, list and delete a probe object on `alias`; never raises for a store fault."""
    storage = _probing_storage(alias)
    name, step = f"{PROBE_FOLDER}/probe-{uuid.uuid4().hex}.txt", "write"
    started = time.perf_counter()
    try:
        storage.save(name, ContentFile(b"ok"))
        step = "list"
        storage.listdir(PROBE_FOLDER)
        step = "delete"
        storage.delete(name)
    except Exception as exc:
        error = as_store_error(exc, alias)
        if error is None and not isinstance(exc, FileNotFoundError):
            raise
        return StorageHealth(alias, _where(alias), "down" if isinstance(error, StoreDown) else "refused", step,
                             _code(exc))
    return StorageHealth(alias, _where(alias), ms=round(1000 * (time.perf_counter() - started), 1))


def storage_health(*, fresh: bool = False) -> list[StorageHealth]:
    """Every configured export storage's probe, from the cache unless `fresh` (or it expired)."""
    aliases = export_storage_aliases()
    # Keyed by the storages' settings: a changed bucket or key is probed afresh, not read from an older probe.
    key = f"{CACHE_KEY}:{hashlib.sha256(repr([settings.STORAGES[a] for a in aliases]).encode()).hexdigest()[:16]}"
    if not fresh and (cached := cache.get(key)) is not None:
        return [StorageHealth(**entry) for entry in cached]
    probes = [probe_storage(alias) for alias in aliases]
    cache.set(key, [vars(probe) for probe in probes], timeout=settings.EXPORTS_HEALTH_CACHE_SECONDS)
    return probes


def _probing_storage(alias: str):
    """A storage like `alias` but quick to give up: S3 with short timeouts and one try."""
    entry = settings.STORAGES[alias]
    options = dict(entry.get("OPTIONS", {}))
    backend = import_string(entry["BACKEND"])
    if "bucket_name" in options:  # django-storages' S3
        from botocore.config import Config

        quick = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1},
                       signature_version=options.get("signature_version"),
                       s3={"addressing_style": options.get("addressing_style")})
        options["client_config"] = options["client_config"].merge(quick) if options.get("client_config") else quick
    return backend(**options)


def _where(alias: str) -> str:
    options = settings.STORAGES[alias].get("OPTIONS", {})
    if "bucket_name" in options:
        return f"s3://{options['bucket_name']}/{options.get('location') or ''} at {options.get('endpoint_url') or 'AWS'}"
    return str(options.get("location"))


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code") or str(response.get("ResponseMetadata", {}).get("HTTPStatusCode"))
    return type(exc).__name__
