"""Reaching the Celery broker (and the workers behind it), and failing loudly when it cannot be reached; the
embedded broker's transport.

A configured broker that is down must never make jobs run inline or vanish:
enqueueing raises BrokerUnavailable with a message that says what to do.
"""

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext
from kombu.transport import filesystem

from dataplatform.errors import Unavailable
from dataplatform.status import Status


class BrokerUnavailable(Unavailable):
    """The Celery broker configured in settings cannot be reached."""


class FilesystemTransport(filesystem.Transport):
    """kombu's filesystem transport (the embedded broker), which makes its folders when a process connects.

    kombu expects the folders to exist, and importing the settings creates none; a worker, a web
    process publishing a job and a health probe all connect before they read or write a message."""

    FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        for option in self.FOLDER_OPTIONS:
            Path(client.transport_options[option]).mkdir(parents=True, exist_ok=True)


def redacted_url(url: str | None = None) -> str:
    """A service URL (the broker's by default) without its password, safe to show and log."""
    url = url or settings.CELERY_BROKER_URL
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def unreachable_status(cause: BaseException | str, url: str | None = None) -> Status:
    """Why the broker cannot be reached and what to do, as a message (a failed job keeps it for its pages)."""
    hint = (
        Status(gettext_noop("Start Redis (or fix REDIS_URL), or unset REDIS_URL to use the embedded filesystem broker."))
        if (url or settings.CELERY_BROKER_URL).startswith(("redis", "rediss"))
        else Status(gettext_noop("Check the broker settings."))
    )
    return Status(gettext_noop("Cannot reach the Celery broker at %(url)s: %(cause)s. %(hint)s"),
                  url=redacted_url(url), cause=str(cause), hint=hint)


def unreachable_message(cause: BaseException | str, url: str | None = None) -> str:
    return unreachable_status(cause, url).english()


def check_broker(app=None, timeout: float = 3.0) -> None:
    """Connect to the broker once; raise BrokerUnavailable with a clear message if that fails, in the active
    language (a request's: the system page and the API's status; English for a command's start-up check)."""
    from dataplatform.celery import app as default_app

    app = app or default_app
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # kombu wraps every transport error differently; all mean "unreachable"
        raise BrokerUnavailable(unreachable_status(exc, app.conf.broker_url).translated()) from exc


@dataclass(frozen=True)
class Workers:
    """What a ping of the workers found: `ok` when one answered at least, `detail` saying it in the request's
    language, `names` those that answered."""

    ok: bool
    detail: str
    names: tuple[str, ...] = ()


def ping_workers(timeout: float = 1.0, *, limit: int | None = None) -> Workers:
    """Ask every worker to answer a Celery ping (sent through the broker) within `timeout` seconds, or stop at the
    first `limit` answers (a ping otherwise waits its whole timeout for more, with every worker alive). Here, below
    both its readers: the system page's health and a job page that says why a queued job waits."""
    from dataplatform.celery import app

    try:
        replies = app.control.ping(timeout=timeout, limit=limit) or []
    except Exception as exc:
        return Workers(False, _("ping failed: %(error)s") % {"error": exc})
    names = tuple(sorted(name for reply in replies for name in reply))
    if not names:
        command = "make worker" if not settings.REDIS_URL else "celery -A dataplatform worker"
        return Workers(False, _("no worker answered a ping within %(seconds).0f s; start one with `%(command)s`.")
                       % {"seconds": timeout, "command": command})
    return Workers(True, ngettext("%(count)d alive", "%(count)d alive", len(names)) % {"count": len(names)}, names)
