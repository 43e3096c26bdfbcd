"""One input layer: each onPanda use case with a page and an API checks its input with one serializer, so the
same bad input gets the same refusal from both, on the same field: the API's 400 body names the field with its
messages, the page shows them as "field: message" (and good input works through both)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotate import services
from annotate.models import AnnotationConfig, Claim, Review, Session
from dataplatform.jobs.models import Job
from tests.conftest import api_client_for
from tests.input_parity import api_errors, assert_same_refusal, page_messages

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/alpha/annotate/"
MAX_50 = "Ensure this value is less than or equal to 50."
A_REJECTION = "A rejection needs a comment that says what is wrong."


# --- the settings -------------------------------------------------------------------------------------

CONFIG_REFUSALS = [
    ({"top_k": "99"}, "top_k", MAX_50),
    ({"top_k": ""}, "top_k", "A valid integer is required."),
    ({"reasoning_budget": ""}, "reasoning_budget", "A valid integer is required."),
    ({"temperature": "hot"}, "temperature", "A valid number is required."),
    ({"seed_policy": "sometimes"}, "seed_policy", '"sometimes" is not a valid choice.'),
    ({"response_template": "nope"}, "response_template", '"nope" is not a valid choice.'),
    ({"max_prompt_tokens": "0"}, "max_prompt_tokens", "Ensure this value is greater than or equal to 1."),
]


@pytest.mark.parametrize("data, field, message", CONFIG_REFUSALS, ids=[case[1] for case in CONFIG_REFUSALS])
def test_the_settings_are_refused_alike(client, members, project, data, field, message):
    client.force_login(members["curator"])
    before = AnnotationConfig.objects.filter(project=project).values().first()
    api = api_client_for(members["curator"]).put(API + "config/", data, format="json")
    page = client.post(reverse("annotate-config", args=["alpha"]), data)
    assert_same_refusal(api, page, field, message)
    assert AnnotationConfig.objects.filter(project=project).values().first() == before


def test_an_unknown_tool_server_is_refused_alike(client, members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/usr/bin/true"}}
    client.force_login(members["admin"])
    api = api_client_for(members["admin"]).put(API + "config/", {"tool_servers": ["nope"]}, format="json")
    # The page's form sends an empty value beside its checkboxes.
    page = client.post(reverse("annotate-config", args=["alpha"]), {"tool_servers": ["", "nope"]})
    [message] = api_errors(api)["tool_servers"]
    assert "'nope' is not an allowed MCP server" in message
    assert f"tool_servers: {message}" in page_messages(page)


def test_good_settings_save_through_both(client, members, project, settings):
    settings.MCP_SERVERS = {"time": {"command": "/usr/bin/true"}}
    client.force_login(members["admin"])
    api = api_client_for(members["admin"]).put(API + "config/", {"top_k": "7", "tool_servers": ["time"]},
                                               format="json")
    assert api.status_code == 200 and (api.json()["top_k"], api.json()["tool_servers"]) == (7, ["time"])
    page = client.post(reverse("annotate-config", args=["alpha"]), {"top_k": "9", "tool_servers": [""]})
    assert page_messages(page) == ["Settings saved."]
    config = services.config_for(project)
    config.refresh_from_db()
    assert (config.top_k, config.tool_servers) == (9, [])


# --- a review of an accepted session --------------------------------------------------------------------

REVIEW_REFUSALS = [
    ({}, "decision", "This field is required."),
    ({"decision": "maybe"}, "decision", '"maybe" is not a valid choice.'),
    ({"decision": "rejected"}, "comment", A_REJECTION),
    ({"decision": "rejected", "comment": "  \n "}, "comment", A_REJECTION),
]


@pytest.fixture
def accepted(session, members):
    return services.finish(session=session, version=0, actor=members["annotator"], accept=True)


@pytest.mark.parametrize("data, field, message", REVIEW_REFUSALS, ids=["missing", "unknown", "no-comment", "blank"])
def test_a_review_is_refused_alike(client, members, accepted, data, field, message):
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(f"/api/v1/sessions/{accepted.pk}/review/", data, format="json")
    page = client.post(reverse("annotate-review-session", args=[accepted.pk]), data)
    assert_same_refusal(api, page, field, message)
    assert not Review.objects.exists()


def test_a_service_refusal_reads_the_same_on_both(client, members, session):
    """Past its input, what the service refuses (the session is not accepted yet) is one message too."""
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(f"/api/v1/sessions/{session.pk}/review/",
                                                  {"decision": "approved"}, format="json")
    page = client.post(reverse("annotate-review-session", args=[session.pk]), {"decision": "approved"})
    assert api.status_code == 400
    assert page_messages(page) == [api.json()["detail"]] == [
        "Only accepted sessions can be reviewed; this one is open."]


def test_good_reviews_go_through_both(client, members, accepted):
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(f"/api/v1/sessions/{accepted.pk}/review/",
                                                  {"decision": "rejected", "comment": "  token 3  "}, format="json")
    assert api.status_code == 201 and api.json()["comment"] == "token 3"
    page = client.post(reverse("annotate-review-session", args=[accepted.pk]), {"decision": "approved"})
    assert page_messages(page) == [f"Session {accepted.pk} approved."]
    assert list(Review.objects.order_by("pk").values_list("decision", "comment")) == [
        ("rejected", "token 3"), ("approved", "")]


# --- reassigning a claim ----------------------------------------------------------------------------------

REASSIGN_REFUSALS = [
    ({}, "username", "This field is required."),
    ({"username": "trainer"}, "username", "Choose an annotator of this project."),
    ({"username": "outsider"}, "username", "Choose an annotator of this project."),
    ({"username": "nobody"}, "username", "Choose an annotator of this project."),
]


@pytest.mark.parametrize("data, field, message", REASSIGN_REFUSALS, ids=["missing", "trainer", "outsider", "nobody"])
def test_a_reassignment_is_refused_alike(client, members, project, make_items, data, field, message):
    make_items(1)
    claim = services.claim_next(project=project, annotator=members["annotator"])
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(f"{API}claims/{claim.pk}/reassign/", data, format="json")
    page = client.post(reverse("annotate-reassign", args=["alpha", claim.pk]), data)
    assert_same_refusal(api, page, field, message)
    assert list(Claim.objects.values_list("annotator__username", flat=True)) == ["annotator"]


def test_good_reassignments_go_through_both(client, members, project, make_items):
    make_items(2)
    first = services.claim_next(project=project, annotator=members["annotator"])
    api = api_client_for(members["curator"]).post(f"{API}claims/{first.pk}/reassign/", {"username": "admin"},
                                                  format="json")
    assert api.status_code == 200 and api.json()["annotator"] == "admin"
    second = services.claim_next(project=project, annotator=members["annotator"])
    client.force_login(members["curator"])
    page = client.post(reverse("annotate-reassign", args=["alpha", second.pk]), {"username": "curator"})
    assert page_messages(page) == [f"Item {second.item_id} now goes to curator."]
    assert Claim.objects.get(item=second.item, annotator=members["curator"]).state == "active"


# --- a .panda.json upload's options --------------------------------------------------------------------

def panda_file() -> SimpleUploadedFile:
    prompt = [{"role": "user", "content": "1+1=?"}]
    document = {"version": "2.0", "uuid": "2025-08-19_12-00-00.000", "update_time": 1755600000000, "hash_map": {},
                "deleted_dialogs": {}, "dialogs": {"1": {
                    "messages": [*prompt, {"role": "assistant", "content": "Two.", "finish_reason": "stop"}],
                    "annotate": {"is_good": True},
                    "operations": [{"operator": "generate_new", "parent": "1", "is_new_generated": True,
                                    "on_policy": True, "time": 1755599990000}]}}}
    return SimpleUploadedFile("s.panda.json", json.dumps(document).encode())


PANDA_REFUSALS = [
    ({"annotator": "trainer"}, "annotator", "Not an annotator of this project."),
    ({"annotator": "nobody"}, "annotator", "Not an annotator of this project."),
    ({"dry_run": "perhaps"}, "dry_run", "Must be a valid boolean."),
    ({"live": "perhaps"}, "live", "Must be a valid boolean."),
]


@pytest.mark.parametrize("data, field, message", PANDA_REFUSALS, ids=["trainer", "nobody", "dry_run", "live"])
def test_a_panda_uploads_options_are_refused_alike(client, members, project, chars, data, field, message):
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(API + "import-panda/", {**data, "file": panda_file()},
                                                  format="multipart")
    page = client.post(reverse("annotate-import-panda", args=["alpha"]), {**data, "file": panda_file()})
    assert_same_refusal(api, page, field, message)
    assert not Session.objects.exists()


def test_good_panda_options_go_through_both(client, members, project, chars):
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(API + "import-panda/", {"dry_run": "true", "file": panda_file()},
                                                  format="multipart")
    assert api.status_code == 200 and api.json()["dry_run"] is True and not Session.objects.exists()
    page = client.post(reverse("annotate-import-panda", args=["alpha"]),
                       {"annotator": "annotator", "live": "1", "file": panda_file()})
    session = Session.objects.get()
    assert (session.annotator, session.status) == (members["annotator"], "open")
    assert page.status_code == 302 and page.url == reverse("annotate-workspace", args=[session.pk])


# --- generating the model's responses (the job kind's parameters) ---------------------------------------

def test_the_rollout_job_is_refused_alike(client, members, project, django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        api = api_client_for(members["curator"]).post(API + "rollouts/", {"regenerate": "perhaps"}, format="json")
        page = client.post(reverse("annotate-rollouts", args=["alpha"]), {"regenerate": "perhaps"})
    assert_same_refusal(api, page, "regenerate", "Must be a valid boolean.")
    assert not Job.objects.exists()
    with django_capture_on_commit_callbacks(execute=False):
        api = api_client_for(members["curator"]).post(API + "rollouts/", {"regenerate": True}, format="json")
        page = client.post(reverse("annotate-rollouts", args=["alpha"]))
    assert api.status_code == 202
    assert [job.params for job in Job.objects.order_by("pk")] == [{"regenerate": True}, {"regenerate": False}]
    assert f"Job {Job.objects.order_by('pk').last().pk} is generating the model's responses." in page_messages(page)
