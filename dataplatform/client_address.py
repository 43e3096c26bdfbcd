"""The client's address, as every layer that records or limits by it reads it."""


def client_ip(request) -> str:
    """The address the web server reports.

    Behind a reverse proxy the web server takes it from X-Forwarded-For, and only on connections from
    settings.TRUSTED_PROXIES (dataplatform/webserver.py); reading that header here would let any client
    pick its own address.
    """
    return request.META.get("REMOTE_ADDR") or "unknown"
