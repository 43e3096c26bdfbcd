"""Live continuation against a model backend that fails: down (connection refused), slow (timeout),
or dropping mid-stream. Through the API, as the workspace sees it: every failure is an SSE `error`
event with a message, what was generated stays saved, and a retry continues from it once the
backend is back."""

import socket
import threading

import pytest

from annotate import services, streaming
from annotate.models import Item, Node, NodeStatus
from dataplatform.inference import BackendUnavailable
from dataplatform.inference.vllm import VllmBackend
from tests.net import closed_port

from ..conftest import api_client_for
from ..doubles import RecordingProgress
from .streams import events_of

pytestmark = [pytest.mark.model, pytest.mark.django_db]


@pytest.fixture
def annotator_session(project, members, local_backend):
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 20, 5, 0.0
    config.save()
    Item.objects.create(project=project, messages=[{"role": "user", "content": "Name three fruits."}],
                        source_sha256="f" * 64)
    services.generate_rollouts(project=project, progress=RecordingProgress())
    claim = services.claim_next(project=project, annotator=members["annotator"])
    return services.open_session(claim=claim)


@pytest.fixture
def silent_server():
    """Accepts connections and reads requests, but never answers: a backend that hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def test_a_failing_backend_never_costs_saved_tokens(annotator_session, members, local_backend, monkeypatch,
                                                    silent_server, use_backend):
    client = api_client_for(members["annotator"])
    root = annotator_session.current_node
    corrected = client.post(f"/api/v1/sessions/{annotator_session.pk}/correct/",
                            {"version": 0, "node_id": root.pk, "position": 1, "token_id": root.top[1][2][0]},
                            format="json")
    assert corrected.status_code == 201, corrected.content
    node = Node.objects.get(pk=corrected.json()["id"])
    prefix = list(node.token_ids)
    stream_url = f"/api/v1/sessions/{annotator_session.pk}/nodes/{node.pk}/stream/"

    # 1. The connection drops after three streamed tokens (each saved as it comes).
    class DropsAfterThree:
        def stream(self, *args, **kwargs):
            for count, step in enumerate(local_backend.stream(*args, **kwargs)):
                if count == 3:
                    raise BackendUnavailable("connection reset by peer")
                yield step

        def __getattr__(self, name):  # the rest is the real model's
            return getattr(local_backend, name)

    monkeypatch.setattr(streaming, "SAVE_EVERY_TOKENS", 1)
    use_backend(DropsAfterThree())
    events = events_of(client.post(stream_url))
    assert [name for name, _ in events] == ["token", "token", "token", "error"]
    assert "connection reset by peer" in events[-1][1]["message"] and "saved" in events[-1][1]["message"]
    node.refresh_from_db()
    assert node.status == NodeStatus.INTERRUPTED and len(node.token_ids) == len(prefix) + 3
    assert node.token_ids[:len(prefix)] == prefix
    kept = list(node.token_ids)

    # 2. The backend is down: connection refused.
    port = closed_port()
    use_backend(VllmBackend(base_url=f"http://127.0.0.1:{port}", model="served", api_key="", timeout=2, tokenizer_dir=None))
    (name, payload), = events_of(client.post(stream_url))
    assert name == "error" and f"127.0.0.1:{port}" in payload["message"] and "retry" in payload["message"]
    node.refresh_from_db()
    assert node.token_ids == kept and node.status == NodeStatus.INTERRUPTED

    # 3. The backend hangs: the request times out instead of holding the annotator forever.
    use_backend(VllmBackend(base_url=silent_server, model="served", api_key="", timeout=1, tokenizer_dir=None))
    (name, payload), = events_of(client.post(stream_url))
    assert name == "error" and "timed out after 1 s" in payload["message"]
    node.refresh_from_db()
    assert node.token_ids == kept

    # 4. The backend is back: the retry continues from exactly what was kept, to the end.
    use_backend(local_backend)
    events = events_of(client.post(stream_url))
    assert events[-1][0] == "done" and all(name == "token" for name, _ in events[:-1])
    node.refresh_from_db()
    assert node.status == NodeStatus.COMPLETE and node.token_ids[:len(kept)] == kept
    assert events[0][1]["index"] == len(kept)  # streaming resumed after the kept tokens, nothing repeated
    accepted = client.post(f"/api/v1/sessions/{annotator_session.pk}/accept/", {"version": 1}, format="json")
    assert accepted.status_code == 200, accepted.content
