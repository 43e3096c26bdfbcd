"""The annotation API: every endpoint by role, other people's sessions, versions, streaming."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotate import corrections, selectors, services, streaming
from annotate.models import Claim, ClaimState, EventKind, Item, Node, Session
from tests.conftest import api_client_for
from tests.factories import MembershipFactory, UserFactory

from ..doubles import CharBackend

pytestmark = pytest.mark.django_db

ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
P = "/api/v1/projects/alpha/annotate/"


def client_as(members, who):
    return APIClient() if who == "anonymous" else api_client_for(members[who])


@pytest.fixture
def annotator_session(session):
    """The `session` fixture: the annotator's open session on a fake rollout."""
    return session


MATRIX = [
    ("get", P + "config/", None, {"admin": 200, "curator": 200, "annotator": 200, "trainer": 403, "outsider": 404}),
    ("put", P + "config/", {"top_k": 10},
     {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404}),
    # The one item is the annotator's (resumed: 200); for admin and curator the queue is empty (204).
    ("post", P + "claim/", None, {"admin": 204, "curator": 204, "annotator": 200, "trainer": 403, "outsider": 404}),
    ("get", P + "my-items/", None, {"admin": 200, "curator": 200, "annotator": 200, "trainer": 403, "outsider": 404}),
    ("get", P + "queue/", None, {"admin": 200, "curator": 200, "annotator": 403, "trainer": 403, "outsider": 404}),
    ("post", P + "rollouts/", None, {"admin": 202, "curator": 202, "annotator": 403, "trainer": 403, "outsider": 404}),
    ("get", "/api/v1/sessions/{session}/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 404, "outsider": 404}),
    ("get", "/api/v1/sessions/{session}/nodes/{node}/candidates/1/", None,
     {"admin": 200, "curator": 200, "annotator": 200, "trainer": 404, "outsider": 404}),
    ("post", "/api/v1/sessions/{session}/undo/", {"version": 0},
     {"admin": 404, "curator": 404, "annotator": 400, "trainer": 404, "outsider": 404}),
    ("post", "/api/v1/sessions/{session}/accept/", {"version": 0},
     {"admin": 404, "curator": 404, "annotator": 200, "trainer": 404, "outsider": 404}),
]


@pytest.mark.parametrize("who", ROLES)
@pytest.mark.parametrize("method, url, body, expected", MATRIX, ids=[f"{m} {u}" for m, u, _, _ in MATRIX])
def test_annotate_endpoint_status_for_role(members, annotator_session, who, method, url, body, expected,
                                           django_capture_on_commit_callbacks):
    client = client_as(members, who)
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(client, method)(
            url.format(session=annotator_session.pk, node=annotator_session.current_node_id), body, format="json")
    assert response.status_code == (401 if who == "anonymous" else expected[who]), response.content[:300]


def test_import_endpoint_reports_line_errors(members, project):
    client = api_client_for(members["curator"])
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    upload = SimpleUploadedFile("p.jsonl", f"{good}\n{{bad\n".encode())
    response = client.post(P + "import/", {"file": upload}, format="multipart")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"file": "p.jsonl", "line": 2, "field": "(line)",
                                          "message": response.json()["errors"][0]["message"]}]
    assert not Item.objects.exists()
    upload = SimpleUploadedFile("p.jsonl", f"{good}\n".encode())
    assert client.post(P + "import/", {"file": upload, "dry_run": "1"}, format="multipart").json()["created"] == 0
    upload = SimpleUploadedFile("p.jsonl", f"{good}\n".encode())
    assert client.post(P + "import/", {"file": upload}, format="multipart").json()["created"] == 1
    assert api_client_for(members["annotator"]).post(P + "import/", {"file": upload},
                                                     format="multipart").status_code == 403


def test_an_annotator_cannot_read_or_correct_another_annotators_session(members, project, annotator_session):
    other = UserFactory(username="other-annotator")
    MembershipFactory(project=project, user=other, role="annotator")
    client = api_client_for(other)
    url = f"/api/v1/sessions/{annotator_session.pk}/"
    assert client.get(url).status_code == 404
    correction = {"version": 0, "node_id": annotator_session.current_node_id, "position": 1, "stop": True}
    assert client.post(url + "correct/", correction, format="json").status_code == 404
    assert client.post(f"{url}nodes/{annotator_session.current_node_id}/stream/").status_code == 404
    assert Session.objects.get(pk=annotator_session.pk).version == 0


def test_another_projects_session_is_404_even_for_its_curator(members, other_project, annotator_session):
    boss = UserFactory(username="beta-curator")
    MembershipFactory(project=other_project, user=boss, role="curator")
    assert api_client_for(boss).get(f"/api/v1/sessions/{annotator_session.pk}/").status_code == 404


def test_correct_then_stale_version_is_409(members, annotator_session):
    client = api_client_for(members["annotator"])
    url = f"/api/v1/sessions/{annotator_session.pk}/correct/"
    body = {"version": 0, "node_id": annotator_session.current_node_id, "position": 2, "stop": True}
    created = client.post(url, body, format="json")
    assert created.status_code == 201 and created.json()["token_ids"] == [10, 11]
    assert created.json()["session_version"] == 1
    assert client.post(url, body, format="json").status_code == 409


def test_refused_correction_is_400_with_the_reason(members, annotator_session):
    response = api_client_for(members["annotator"]).post(
        f"/api/v1/sessions/{annotator_session.pk}/correct/",
        {"version": 0, "node_id": annotator_session.current_node_id, "position": 99, "stop": True}, format="json")
    assert response.status_code == 400 and "outside the response" in response.json()["detail"]


def test_claim_skip_and_reassign(members, project, make_items):
    make_items(2)
    annotator = api_client_for(members["annotator"])
    claim = annotator.post(P + "claim/").json()
    assert claim["session"] is not None
    assert annotator.post(f"{P}claims/{claim['id']}/skip/").json()["state"] == "skipped"
    second = annotator.post(P + "claim/").json()
    assert second["item"] != claim["item"]
    curator = api_client_for(members["curator"])
    moved = curator.post(f"{P}claims/{second['id']}/reassign/", {"username": "curator"}, format="json")
    assert moved.status_code == 200 and moved.json()["annotator"] == "curator"
    bad = curator.post(f"{P}claims/{second['id']}/reassign/", {"username": "trainer"}, format="json")
    assert bad.status_code == 400
    assert annotator.post(f"{P}claims/{second['id']}/reassign/", {"username": "admin"},
                          format="json").status_code == 403
    assert Claim.objects.filter(annotator=members["curator"]).count() == 1


def test_claim_answer_is_the_row_as_stored(members, project, make_items, django_assert_max_num_queries):
    make_items(1)
    annotator = api_client_for(members["annotator"])
    first = annotator.post(P + "claim/").json()
    # The same claim, its lease renewed: nothing is read back after the claim's UPDATE ... RETURNING
    # (auth 1, the project with the role and its settings 1, then one transaction: savepoint, SET LOCAL,
    # the holder's claim, its renewal, its session, release).
    with django_assert_max_num_queries(8):
        again = annotator.post(P + "claim/").json()
    stored = Claim.objects.select_related("session", "annotator").get(pk=first["id"])
    assert again["id"] == first["id"] and again["session"] == first["session"] == stored.session.pk
    assert again["annotator"] == stored.annotator.username == "annotator"
    assert again["lease_expires_at"] == stored.lease_expires_at.isoformat().replace("+00:00", "Z")
    assert again["lease_expires_at"] >= first["lease_expires_at"]


def test_session_read_loads_each_row_once(members, annotator_session, django_assert_max_num_queries):
    annotator = api_client_for(members["annotator"])
    url = f"/api/v1/sessions/{annotator_session.pk}/"
    first = annotator.get(url).json()  # the token's first use is recorded
    # auth 1, the session with its item, project, settings and current node 1, the node list 1
    with django_assert_max_num_queries(4):
        again = annotator.get(url).json()
    assert again == first
    assert again["current_node"]["id"] == annotator_session.current_node_id and again["current_node"]["text"]


def test_new_claim_comes_with_its_session_in_one_transaction(members, project, make_items,
                                                             django_assert_max_num_queries):
    items = make_items(2)
    services.config_for(project)  # the project's settings exist (they are made on first use)
    annotator = api_client_for(members["annotator"])
    annotator.get("/api/v1/projects/")  # the token's first use of the hour is recorded
    # auth 1, the project with the role and its settings 1, then one transaction: savepoint, SET LOCAL,
    # the holder's claim, the free item, the claim, the rollout, the session, its root node, its current
    # node, the event, release. No lookup of a session a new claim cannot have.
    with django_assert_max_num_queries(13):
        claimed = annotator.post(P + "claim/").json()
    session = Session.objects.select_related("claim", "current_node").get(pk=claimed["session"])
    assert session.claim.pk == claimed["id"] and session.item_id == claimed["item"] == items[0].pk
    assert session.current_node.token_ids == items[0].rollout["token_ids"]
    assert session.events.get().kind == EventKind.GENERATE_NEW


def test_claim_is_not_kept_when_its_session_cannot_be_opened(members, project, make_items, monkeypatch):
    """Claim and session are one transaction: a failure opening the session leaves no claim behind."""
    make_items(1)

    def broken(self, *args, **kwargs):
        raise DatabaseError("the disk is full")

    monkeypatch.setattr(Node, "save", broken)
    with pytest.raises(DatabaseError):
        services.claim_with_session(project=project, annotator=members["annotator"])
    assert not Claim.objects.exists() and not Session.objects.exists()


def test_accept_answer_is_read_in_one_query(members, annotator_session, django_assert_max_num_queries):
    annotator = api_client_for(members["annotator"])
    url = f"/api/v1/sessions/{annotator_session.pk}/"
    annotator.get(url)  # the token's first use is recorded
    # auth 1, the session to write 1; one transaction: savepoint, the session locked, its update, the
    # event, the claim's item locked, the claim locked, marked done, counted on its item, whether the queue's and
    # the metrics' figures are kept (annotate/figures.py: 2), release; the answer: the session 1, its nodes 1
    with django_assert_max_num_queries(15):
        accepted = annotator.post(url + "accept/", {"version": annotator_session.version}, format="json")
    assert accepted.status_code == 200
    assert accepted.json() == annotator.get(url).json()
    assert accepted.json()["status"] == "accepted"


def test_empty_queue_is_204(members, project):
    assert api_client_for(members["annotator"]).post(P + "claim/").status_code == 204


def test_queue_state_counts(members, project, make_items):
    make_items(3)
    services.claim_next(project=project, annotator=members["annotator"])
    state = api_client_for(members["curator"]).get(P + "queue/").json()
    assert state["items"] == 3 and state["answered"] == 3 and state["claims"]["active"] == 1


def test_stream_under_asgi_sends_each_token_as_an_event(members, annotator_session, use_backend):
    """Under ASGI the view hands Django an async iterator, so tokens go out one by one."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    from dataplatform.accounts import services as account_services

    use_backend(CharBackend(script="ok"))
    child = corrections.correct(session=annotator_session, version=0, node_id=annotator_session.current_node_id,
                             position=2, token_id=1012, actor=members["annotator"])
    _, secret = account_services.issue_token(user=members["annotator"], name="asgi")

    async def read_stream():
        response = await AsyncClient().post(f"/api/v1/sessions/{annotator_session.pk}/nodes/{child.pk}/stream/",
                                            headers={"Authorization": f"Token {secret}"})
        assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
        assert response.is_async
        return [chunk async for chunk in response.streaming_content]

    chunks = async_to_sync(read_stream)()
    events = [chunk.decode().split("\n")[0] for chunk in chunks]
    assert events == ["event: token", "event: token", "event: token", "event: done"]  # "o", "k", end token
    child.refresh_from_db()
    assert child.status == "complete" and child.token_ids[3:5] == [ord("o"), ord("k")]


def _stream_events(client, session, node) -> list[tuple[str, dict]]:
    response = client.post(f"/api/v1/sessions/{session.pk}/nodes/{node.pk}/stream/")
    assert response.status_code == 200
    blocks = b"".join(response.streaming_content).decode().strip().split("\n\n")
    return [(block.split("\n")[0].removeprefix("event: "), json.loads(block.split("data: ", 1)[1]))
            for block in blocks]


@pytest.mark.parametrize("failure", ["database", "model name", "bug"])
def test_a_stream_cut_by_any_failure_ends_with_an_error_event(members, annotator_session, monkeypatch, failure, use_backend):
    """Once the stream has begun its status is 200: whatever breaks must still reach the client as `error`."""
    from django.db import OperationalError

    from dataplatform.inference import BackendError

    use_backend(CharBackend(script="ok"))
    child = corrections.correct(session=annotator_session, version=0, node_id=annotator_session.current_node_id,
                             position=2, token_id=1012, actor=members["annotator"])

    def broken(**_):
        if failure == "database":
            raise OperationalError("server closed the connection unexpectedly")
        if failure == "model name":
            raise BackendError("The local backend serves only SmolLM2-135M-Instruct, not 'no-such-model'.")
        raise KeyError("a bug")
        yield  # a generator, as continue_node is

    monkeypatch.setattr(streaming, "continue_node", broken)
    events = _stream_events(api_client_for(members["annotator"]), annotator_session, child)
    assert [name for name, _ in events] == ["error"]
    expected = {"database": "database is unavailable", "model name": "no-such-model",
                "bug": "failed on the server"}[failure]
    assert expected in events[0][1]["message"] and "retry" in events[0][1]["message"]


def test_a_model_name_the_backend_does_not_serve_is_refused_naming_the_served_ones(members, project):
    from dataplatform.inference import get_backend

    curator = api_client_for(members["curator"])
    refused = curator.put(P + "config/", {"model_name": "no-such-model"}, format="json")
    assert refused.status_code == 400
    assert get_backend().model_id in refused.json()["model_name"][0]
    assert services.config_for(project).model_name == ""  # not saved
    served = curator.put(P + "config/", {"model_name": get_backend().model_id}, format="json")
    assert served.status_code == 200 and served.json()["model_name"] == get_backend().model_id


def test_a_project_whose_model_is_gone_answers_503_not_500(members, annotator_session):
    """A name saved when the backend served it (or before names were checked) that it serves no more."""
    from annotate.models import AnnotationConfig

    AnnotationConfig.objects.filter(project=annotator_session.item.project).update(model_name="retired-model")
    annotator = api_client_for(members["annotator"])
    read = annotator.get(f"/api/v1/sessions/{annotator_session.pk}/")
    assert read.status_code == 503 and read.headers["Retry-After"]
    assert "retired-model" in read.json()["detail"]
    accepted = annotator.post(f"/api/v1/sessions/{annotator_session.pk}/accept/",
                              {"version": annotator_session.version}, format="json")
    assert accepted.status_code == 503


def test_my_items_costs_the_same_queries_for_one_claim_or_many(members, project, make_items,
                                                              django_assert_max_num_queries):
    """Each claim names its annotator: the requester, read once, not a query per claim."""
    make_items(5)
    annotator = members["annotator"]
    client = api_client_for(annotator)
    url = f"/api/v1/projects/{project.slug}/annotate/my-items/"

    def claim_and_skip():
        claim = services.claim_next(project=project, annotator=annotator)
        services.end_claim(claim=claim, state=ClaimState.SKIPPED)

    claim_and_skip()
    with CaptureQueriesContext(connection) as one_claim:
        assert len(client.get(url).json()) == 1
    for _ in range(4):
        claim_and_skip()
    with django_assert_max_num_queries(len(one_claim.captured_queries)):
        claims = client.get(url).json()
    assert len(claims) == 5 and {claim["annotator"] for claim in claims} == {annotator.username}


@pytest.mark.postgres_only("the plan is PostgreSQL's")
def test_my_items_walks_the_annotators_claims_newest_first_on_an_index(members, project):
    """A page of the annotator's latest claims, not a sort of all they ever claimed (forbidden here, as a long
    history would make it)."""
    query = selectors.my_claims(members["annotator"], project)[:200]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        plan = query.explain()
    assert "using claim_annotator_recent" in plan and "Sort" not in plan, plan
