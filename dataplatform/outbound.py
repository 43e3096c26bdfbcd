"""Addresses the workers may call on a user's behalf: only those an admin listed.

Some runs name a server to call (an ATD teacher on another vLLM, an AED webhook runner). Workers
make those requests from inside the deployment, so an open URL field would let any curator reach
internal addresses (metadata services, the database, Redis). Every such URL is checked here,
against a setting an admin controls, when the run is created and again when it runs.
"""

from urllib.parse import urlsplit

from django.utils.translation import gettext


class UrlNotAllowed(ValueError):
    pass


def allowed_url(url: str, allowed: list[str], setting: str) -> str:
    """`url` without a trailing slash, if it is an http(s) URL listed in `allowed` (the value of the
    setting named `setting`); else UrlNotAllowed with a message that says how to get it allowed."""
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or \
            any(c.isspace() for c in url):
        raise UrlNotAllowed(gettext("%(url)s is not an http(s) URL with a host.") % {"url": repr(url)})
    listed = [entry.rstrip("/") for entry in allowed]
    if url not in listed:
        listing = ", ".join(listed) or gettext("none are listed")
        raise UrlNotAllowed(gettext("%(url)s is not allowed here (%(listed)s); an admin lists permitted addresses "
                                    "in %(setting)s.") % {"url": url, "listed": listing, "setting": setting})
    return url
