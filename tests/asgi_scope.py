"""An ASGI `http` scope for driving the app directly (asgiref's ApplicationCommunicator), as uvicorn sends it."""


def get_scope(path: str, *, secret: str = "", client_ip: str = "127.0.0.1") -> dict:
    """A GET of `path`, with an API token when `secret` is given."""
    headers = [(b"host", b"localhost")] + ([(b"authorization", f"Token {secret}".encode())] if secret else [])
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
            "client": (client_ip, 50000), "server": ("localhost", 80)}
