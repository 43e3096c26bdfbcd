import pytest

from dataplatform.inference.server import build_app

from .model_servers import KEY, SERVED_NAME, ThreadedServer


@pytest.fixture(scope="module")
def model_server(local_backend):
    """The embedded model server around the session's real model, with an API key."""
    with ThreadedServer(build_app(local_backend, served_model_name=SERVED_NAME, api_key=KEY)) as server:
        yield server
