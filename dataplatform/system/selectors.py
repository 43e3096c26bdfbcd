"""Reads of the platform's health. Each probe is bounded in time and never raises."""

import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from dataplatform.broker import BrokerUnavailable, check_broker, ping_workers, redacted_url
from dataplatform.celery import app as celery_app
from dataplatform.exports.health import storage_health
from dataplatform.inference import get_backend
from dataplatform.inference.capabilities import CapabilityReport

# The services' names as the system page shows them (the API keeps `name` as it is: a client may key on it).
SERVICE_LABELS = {"Database": gettext_lazy("Database"), "Broker": gettext_lazy("Broker"),
                  "Workers": gettext_lazy("Workers"), "Model backend": gettext_lazy("Model backend"),
                  "Export storage": gettext_lazy("Export storage")}
DATABASE_NAMES = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}
# Where services.run_capability_check keeps the last capability report (the cache every web process shares).
REPORT_KEY = "system:capabilities:last"


@dataclass
class ServiceStatus:
    name: str
    ok: bool
    detail: str  # in the request's language; `identifiers` in backticks (the page shows them as code)
    facts: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return SERVICE_LABELS.get(self.name, self.name)


def database_status() -> ServiceStatus:
    vendor = DATABASE_NAMES.get(connection.vendor, connection.vendor)
    started = time.perf_counter()
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return ServiceStatus("Database", False, f"{vendor}: {exc}")
    return ServiceStatus("Database", True, _("%(database)s, %(ms).0f ms") % {
        "database": vendor, "ms": 1000 * (time.perf_counter() - started)})


def broker_status() -> ServiceStatus:
    url = redacted_url()
    try:
        check_broker(timeout=2.0)
    except BrokerUnavailable as exc:
        return ServiceStatus("Broker", False, str(exc), {"url": url})
    return ServiceStatus("Broker", True, _("reachable"), {"url": url, "queue_depth": queue_depth()})


def queue_depth(queue: str | None = None) -> int | None:
    """Messages waiting in the default queue (None if the transport cannot tell)."""
    queue = queue or settings.CELERY_TASK_DEFAULT_QUEUE
    try:
        with celery_app.connection_for_read() as conn:
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
    except Exception:
        # A queue nobody declared yet does not exist on Redis: nothing is waiting.
        return 0


def worker_status(timeout: float = 1.0) -> ServiceStatus:
    """The workers' ping (dataplatform/broker.py) as the system page and API show it."""
    workers = ping_workers(timeout)
    return ServiceStatus("Workers", workers.ok, workers.detail, {"workers": list(workers.names)} if workers.ok else {})


def backend_status() -> ServiceStatus:
    try:
        health = get_backend().health()
    except Exception as exc:
        return ServiceStatus("Model backend", False, f"{settings.MODEL_BACKEND}: {exc}")
    facts = {"backend": health.backend, "model": health.model_id}
    if health.latency_ms is not None:
        facts["latency_ms"] = round(health.latency_ms, 1)
    return ServiceStatus("Model backend", health.ok, health.detail, facts)


def export_storage_status() -> ServiceStatus:
    """Each export storage's probe (write, list and delete a tiny object), cached briefly (exports/health.py)."""
    probes = storage_health()
    return ServiceStatus("Export storage", all(probe.ok for probe in probes), "; ".join(p.detail for p in probes),
                         {probe.alias: probe.where for probe in probes})


def platform_status() -> list[ServiceStatus]:
    database = database_status()
    broker = broker_status()
    workers = worker_status() if broker.ok else ServiceStatus("Workers", False, _("broker unreachable"))
    return [database, broker, workers, backend_status(), export_storage_status()]


def last_capability_report() -> CapabilityReport | None:
    """The report of the last capability check (services.run_capability_check), or None before the first one (or
    when the cache holds one this version cannot read)."""
    stored = cache.get(REPORT_KEY)
    if not stored:
        return None
    try:
        return CapabilityReport.from_json(stored)
    except (KeyError, TypeError, ValueError):
        return None
