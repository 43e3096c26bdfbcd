"""Network helpers for tests that need a service to be down."""

import socket


def closed_port() -> int:
    """A localhost port nothing listens on: a connection to it is refused at once (a backend, broker
    or cache that is down). Bound and released, so no other test process holds it either."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
