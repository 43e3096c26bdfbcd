"""A node's stream is never stuck (annotate/streaming.py): one request streams a node at a time (a second gets a
409, not the same work again); a stream that stops (an error, the client gone) leaves the node interrupted and
resumable; a stream whose worker died is taken over once its lease runs out; its annotator may cancel it, after
which select and undo work; and each request writes at most ANNOTATE_STREAM_MAX_TOKENS tokens."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotate import corrections, services, streaming
from annotate.models import Event, EventKind, Node, NodeStatus

from ..conftest import api_client_for
from ..doubles import EOS, CharBackend
from .streams import events_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_backend(use_backend):
    """One token per character; it continues with 40 x's."""
    backend = CharBackend(script="x" * 40)
    use_backend(backend)
    return backend


@pytest.fixture
def client(members):
    return api_client_for(members["annotator"])


def streaming_child(session, members) -> Node:
    """A correction of the root, left streaming (version 1)."""
    return corrections.correct(session=session, version=0, node_id=session.current_node_id, position=2, text="ab",
                               actor=members["annotator"])


def url(session, action: str) -> str:
    return f"/api/v1/sessions/{session.pk}/{action}/"


def stream(client, session, node):
    return client.post(f"/api/v1/sessions/{session.pk}/nodes/{node.pk}/stream/")


def test_a_second_stream_of_a_node_is_a_409_not_the_same_work_again(session, members, client, long_backend):
    child = streaming_child(session, members)
    Node.objects.filter(pk=child.pk).update(stream_lease=timezone.now())  # a request streams it now
    answer = stream(client, session, child)
    assert answer.status_code == 409 and "another request" in answer.json()["detail"]
    child.refresh_from_db()
    assert child.status == NodeStatus.STREAMING and len(child.token_ids) == 4


def test_a_stream_whose_worker_died_is_taken_over_once_its_lease_ran_out(session, members, client, long_backend,
                                                                         settings):
    settings.ANNOTATE_STREAM_LEASE_SECONDS = 30
    child = streaming_child(session, members)
    Node.objects.filter(pk=child.pk).update(stream_lease=timezone.now() - timedelta(seconds=31),
                                            token_ids=child.token_ids + [120], logprobs=child.logprobs + [-0.5],
                                            top=child.top + [[]], origins=child.origins + ["model"],
                                            candidate_ranks=child.candidate_ranks + [None])
    events = events_of(stream(client, session, child))
    assert events[-1][0] == "done", events[-1]
    child.refresh_from_db()
    assert child.status == NodeStatus.COMPLETE and child.stream_lease is None
    assert child.token_ids[:5] == [10, 11, ord("a"), ord("b"), 120]  # resumed from what the dead stream saved
    resumed = Event.objects.get(node=child, kind=EventKind.CONTINUE_GENERATING)
    assert resumed.payload == {"from_token": 5}


def test_cancel_ends_a_stream_and_then_select_and_undo_work(session, members, client, long_backend):
    root_id = session.current_node_id
    child = streaming_child(session, members)
    Node.objects.filter(pk=child.pk).update(stream_lease=timezone.now())
    refused = client.post(url(session, "undo"), {"version": 1}, format="json")
    assert refused.status_code == 400 and "cancel it" in refused.json()["detail"]
    assert client.post(url(session, "select"), {"version": 1, "node_id": root_id}, format="json").status_code == 400
    cancelled = client.post(url(session, "cancel"), {"version": 1, "node_id": child.pk}, format="json")
    assert cancelled.status_code == 200 and cancelled.json()["version"] == 2
    child.refresh_from_db()
    assert child.status == NodeStatus.INTERRUPTED and child.stream_lease is None and len(child.token_ids) == 4
    assert Event.objects.get(node=child, kind=EventKind.CANCEL_STREAM).payload == {"tokens": 4}
    moved = client.post(url(session, "select"), {"version": 2, "node_id": root_id}, format="json")
    assert moved.status_code == 200 and moved.json()["current_node"]["id"] == root_id
    back = client.post(url(session, "select"), {"version": 3, "node_id": child.pk}, format="json")
    assert back.status_code == 200
    undone = client.post(url(session, "undo"), {"version": 4}, format="json")
    assert undone.status_code == 200 and undone.json()["current_node"]["id"] == root_id


def test_a_cancelled_node_streams_again_on_request(session, members, client, long_backend):
    child = streaming_child(session, members)
    assert client.post(url(session, "cancel"), {"version": 1, "node_id": child.pk}, format="json").status_code == 200
    events = events_of(stream(client, session, child))
    assert events[-1] == ("done", {"node": child.pk, "finish_reason": "stop", "tokens": 4 + 41})


def test_cancel_refuses_a_complete_node_and_a_node_of_no_session_of_yours(session, members, client, long_backend):
    root = session.current_node
    answer = client.post(url(session, "cancel"), {"version": 0, "node_id": root.pk}, format="json")
    assert answer.status_code == 400 and "nothing" not in answer.json()["detail"]
    assert "complete" in answer.json()["detail"]
    assert client.post(url(session, "cancel"), {"version": 0, "node_id": 10**9}, format="json").status_code == 404
    assert client.post(url(session, "cancel"), {"version": 0}, format="json").status_code == 400  # node_id: required
    session.refresh_from_db()
    assert session.version == 0


def test_a_stream_running_when_cancelled_stops_at_its_next_save(session, members, long_backend):
    child = streaming_child(session, members)
    steps = streaming.continue_node(node=child)
    taken = [next(steps) for _ in range(6)]  # past the first save (every 8 tokens, counting the 4 kept)
    streaming.cancel_stream(session=session, version=1, node_id=child.pk, actor=members["annotator"])
    with pytest.raises(streaming.StreamTakenOver):
        list(steps)
    saved = Node.objects.get(pk=child.pk)
    assert len(taken) == 6 and saved.status == NodeStatus.INTERRUPTED and len(saved.token_ids) == 8


def test_a_client_that_leaves_leaves_the_node_interrupted_and_resumable(session, members, long_backend):
    child = streaming_child(session, members)
    steps = streaming.continue_node(node=child)
    for _ in range(10):
        next(steps)
    steps.close()  # what the server does when the client goes away
    saved = Node.objects.get(pk=child.pk)
    assert saved.status == NodeStatus.INTERRUPTED and saved.stream_lease is None and len(saved.token_ids) == 14
    list(streaming.continue_node(node=saved))
    saved.refresh_from_db()
    # The double writes its whole script again after what was kept (a real model would go on from there).
    assert saved.status == NodeStatus.COMPLETE and saved.token_ids[-1] == EOS and len(saved.token_ids) == 14 + 41


def test_a_failing_backend_leaves_the_node_interrupted_with_no_lease(session, members, use_backend):
    class Failing(CharBackend):
        def stream(self, *args, **kwargs):
            yield from list(super().stream(*args, **kwargs))[:3]
            raise RuntimeError("the model crashed")

    backend = Failing()
    use_backend(backend)
    child = streaming_child(session, members)
    with pytest.raises(RuntimeError):
        list(streaming.continue_node(node=child))
    saved = Node.objects.get(pk=child.pk)
    assert saved.status == NodeStatus.INTERRUPTED and saved.stream_lease is None and len(saved.token_ids) == 7


def test_one_request_writes_at_most_the_streams_cap_and_continuing_goes_on(session, members, client, long_backend,
                                                                         settings):
    settings.ANNOTATE_STREAM_MAX_TOKENS = 5
    child = streaming_child(session, members)
    events = events_of(stream(client, session, child))
    assert events[-1] == ("done", {"node": child.pk, "finish_reason": "length", "tokens": 4 + 5})
    more = client.post(url(session, "continue-generating"), {"version": 1, "node_id": child.pk}, format="json")
    assert more.status_code == 201, more.content
    events = events_of(stream(client, session, Node.objects.get(pk=more.json()["id"])))
    assert events[-1][1]["tokens"] == 4 + 10


def test_a_write_over_the_budget_is_a_400_naming_the_field_and_writes_nothing(session, members, client, long_backend):
    config = services.config_for(session.item.project)
    config.max_prompt_tokens = 50
    config.save()
    answer = client.post(url(session, "correct"), {"version": 0, "node_id": session.current_node_id, "position": 2,
                                                   "text": "L" * 100}, format="json")
    assert answer.status_code == 400
    (message,) = answer.json()["text"]
    assert "over this project's limit of 50" in message and "the text typed, 100" in message
    session.refresh_from_db()
    assert session.version == 0 and Node.objects.filter(session=session).count() == 1


def test_the_workspace_offers_cancel_and_waits_for_retry_on_an_interrupted_node(session, members, long_backend):
    from django.test import Client

    child = streaming_child(session, members)
    browser = Client()
    browser.force_login(members["annotator"])
    page = browser.get(f"/annotate/sessions/{session.pk}/").content.decode()
    assert 'data-needs-stream="1"' in page and 'id="btn-cancel"' in page and f"/api/v1/sessions/{session.pk}/cancel/" \
        in page and "<kbd>q</kbd>" in page
    streaming.cancel_stream(session=session, version=1, node_id=child.pk, actor=members["annotator"])
    page = browser.get(f"/annotate/sessions/{session.pk}/").content.decode()
    assert 'data-needs-stream="0"' in page
    assert '<button type="button" id="btn-retry" class="secondary">' in page  # shown, not hidden
