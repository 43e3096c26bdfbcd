"""The embedded model server on a free port (uvicorn in a thread), for the tests that drive it over HTTP; the
`model_server` fixture (tests/inference/conftest.py) runs one per test module."""

import threading
import time

import uvicorn

from tests.net import closed_port

SERVED_NAME = "served-smollm"
KEY = "model-server-test-key"

# SmolLM2's own chat template, which folders converted before issue 41 kept: roles and content only.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


class ThreadedServer:
    def __init__(self, app):
        self.port = closed_port()  # nothing listens there yet: the server binds it
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the model server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


class InFlight:
    """ASGI middleware: how many /v1/completions requests the wrapped app holds at once, and the most so far."""

    def __init__(self, app):
        self.app, self.now, self.peak = app, 0, 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/v1/completions":
            return await self.app(scope, receive, send)
        self.now += 1  # uvicorn runs the app on one event loop: no lock needed
        self.peak = max(self.peak, self.now)
        try:
            await self.app(scope, receive, send)
        finally:
            self.now -= 1
