"""One input layer (corpora/aed/inputs.py): each AED use case with an API and a page reads its input with one
serializer, so the same bad input gets the same refusal from both, on the same field with the same message (a
refusal the service makes, from the case or the proposal, too), and good input goes through both."""

import json

import pytest
from django.urls import reverse

from corpora.aed import services
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, Proposal, Replay, Trace
from dataplatform.apiutils import MAX_SEED
from tests.conftest import api_client_for

from ...calc_traces import make_demo_trace
from ...input_parity import assert_refused_alike

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(project, members):
    """The curator's complete case of a calc trace, with one proposal, and a rejected one."""
    record = make_demo_trace("(17*23)-45", ["calc 17 * 23", "calc 391 - 54", "answer 337"], trace_id="t-1")
    assert import_traces(project=project, lines=[json.dumps(record)]).ok
    curator = members["curator"]
    case = services.open_case(trace=Trace.objects.get(trace_id="t-1"), curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator, changes={
        "error_step": 1, "category": "tool-misuse", "diagnosis": "Subtracted 54 instead of 45."})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    rejected = services.add_proposal(case=case, actor=curator, corrected_action="answer 0")
    services.set_proposal_status(proposal=rejected, status="rejected", actor=curator)
    return {"case": case, "proposal": proposal, "rejected": rejected}


# use case -> (API method, API URL, page URL, whether the page answers in place); {case} etc. are the world's ids.
USE_CASES = {
    "edit": ("patch", "/api/v1/aed/cases/{case}/", "aed-case-edit", ["case"], True),
    "submit": ("post", "/api/v1/aed/cases/{case}/submit/", "aed-case-submit", ["case"], True),
    "propose": ("post", "/api/v1/aed/cases/{case}/proposals/", "aed-proposal-add", ["case"], True),
    "status": ("post", "/api/v1/aed/proposals/{proposal}/status/", "aed-proposal-status", ["proposal"], True),
    "replay": ("post", "/api/v1/aed/proposals/{proposal}/replays/", "aed-replay-start", ["proposal"], True),
    "replay-rejected": ("post", "/api/v1/aed/proposals/{rejected}/replays/", "aed-replay-start", ["rejected"], True),
    "grading": ("put", "/api/v1/projects/alpha/aed/grading/", "aed-grading", [], False),
}


def send_both(client, members, world, use_case: str, data: dict, *, encoding: str = "multipart"):
    """`data` ("{version}": the case's version) to the API (as a form, or as JSON) and to the page's form."""
    method, api_url, page_name, page_args, _ = USE_CASES[use_case]
    ids = {name: world[name].pk for name in ("case", "proposal", "rejected")}

    def filled() -> dict:  # the case's version as it is now
        version = Case.objects.get(pk=world["case"].pk).version
        return {key: value.format(version=version) for key, value in data.items()}

    api = getattr(api_client_for(members["curator"]), method)(api_url.format(**ids), filled(), format=encoding)
    client.force_login(members["curator"])
    page = client.post(reverse(page_name, args=["alpha", *(ids[name] for name in page_args)]), filled(), **HX)
    return api, page


REFUSALS = [
    # editing the case: {version, changes} or one change as the page's forms send it
    ("edit", {"version": "{version}", "field": "error_step", "value": "x"}, "error_step",
     "error_step must be a whole number."),
    ("edit", {"version": "{version}", "field": "status", "value": "submitted"}, "field", "Unknown field 'status'."),
    ("edit", {"version": "first", "field": "diagnosis", "value": "d"}, "version", "A valid integer is required."),
    ("edit", {"version": "{version}", "field": "evidence_remove", "value": "3"}, "evidence",
     "No such evidence reference; reload the page."),
    ("edit", {"version": "{version}", "field": "evidence_add", "step": "one"}, "evidence",
     "evidence step must be a whole number."),
    ("edit", {"version": "{version}"}, "non_field_errors", "Send changes, or one field with its value."),
    ("edit", {"version": "{version}", "field": "category", "value": "bad-luck"}, "detail",  # the taxonomy's
     "Unknown error category 'bad-luck'."),
    ("edit", {"version": "{version}", "field": "error_step", "value": "7"}, "detail",  # the trace's
     "error_step must be a step of this trace (0..2)."),
    ("submit", {}, "version", "This field is required."),
    ("submit", {"version": "-1"}, "version", "Ensure this value is greater than or equal to 0."),
    # proposals
    ("propose", {"corrected_action": " "}, "corrected_action", "A proposal needs a corrected action."),
    ("propose", {"rationale": "why"}, "corrected_action", "A proposal needs a corrected action."),
    ("propose", {"corrected_action": "x" * 20_001}, "corrected_action",
     "Ensure this field has no more than 20000 characters."),
    ("status", {"status": "gone"}, "status", "status must be one of proposed, accepted, rejected."),
    # replays
    ("replay", {}, "pairs", "This field is required."),
    ("replay", {"pairs": "0"}, "pairs", "pairs must be between 1 and 200."),
    ("replay", {"pairs": "many"}, "pairs", "pairs must be a whole number."),
    ("replay", {"pairs": "2", "runner": "nope"}, "runner", "Unknown runner 'nope'."),
    ("replay", {"pairs": "2", "seed": "-1"}, "seed", f"seed must be between 0 and {MAX_SEED}."),
    ("replay", {"pairs": "2", "seed": str(2**63)}, "seed", f"seed must be between 0 and {MAX_SEED}."),
    ("replay", {"pairs": "2", "retry": "twice"}, "retry", "retry must be one of resample, original."),
    ("replay", {"pairs": "2", "mode": "solo"}, "mode", "mode must be one of paired, recovery."),
    ("replay", {"pairs": "2", "hint": "perhaps"}, "hint", "Must be a valid boolean."),
    ("replay", {"pairs": "2", "max_steps": "99"}, "options.max_steps", "max_steps must be between 1 and 50."),
    ("replay", {"pairs": "2", "temperature": "hot"}, "options.temperature", "temperature must be a number."),
    ("replay", {"pairs": "2", "temperature": "3"}, "options.temperature", "temperature must be between 0 and 2."),
    ("replay-rejected", {"pairs": "2"}, "detail", "This proposal was rejected; replay another one."),
    # the grading rules
    ("grading", {"min_pairs": "x"}, "min_pairs", "min_pairs must be a whole number."),
    ("grading", {"min_pairs": "201"}, "min_pairs", "min_pairs must be between 1 and 200."),
    ("grading", {"alpha": "0.9"}, "alpha", "alpha must be between 0.0001 and 0.5."),
    ("grading", {"alpha": "nan"}, "alpha", "alpha must be a number."),
    ("grading", {"evidence": "luck"}, "evidence", "evidence must be one of first, best."),
]


@pytest.mark.parametrize("use_case, data, field, message", REFUSALS,
                         ids=[f"{case[0]}-{case[2]}-{n}" for n, case in enumerate(REFUSALS)])
def test_the_api_and_the_page_refuse_alike(client, members, world, use_case, data, field, message):
    before = (Case.objects.values().get(pk=world["case"].pk), list(Proposal.objects.values()))
    api, page = send_both(client, members, world, use_case, data)
    assert_refused_alike(api, page, field, message, page_status=400 if USE_CASES[use_case][4] else None)
    assert (Case.objects.values().get(pk=world["case"].pk), list(Proposal.objects.values())) == before
    assert not Replay.objects.exists()


@pytest.mark.parametrize("use_case, data, field, message", [
    case for case in REFUSALS if not any(key in case[1] for key in ("max_steps", "temperature"))],
    ids=lambda value: value if isinstance(value, str) and len(value) < 30 else None)
def test_a_json_body_is_refused_as_the_form_is(client, members, world, use_case, data, field, message):
    """The API's JSON gets the answers its form does (the replay options a form sends as fields of their own are
    an object in JSON: test_webhook_options.py)."""
    api, page = send_both(client, members, world, use_case, data, encoding="json")
    assert_refused_alike(api, page, field, message, page_status=400 if USE_CASES[use_case][4] else None)


def test_a_stale_version_is_a_409_from_both(client, members, world):
    api, page = send_both(client, members, world, "edit", {"version": "0", "field": "diagnosis", "value": "late"})
    message = f"The case changed (version {world['case'].version}, you had 0); reload it."
    assert api.status_code == page.status_code == 409
    assert api.json() == {"detail": message} and message in page.content.decode()


def test_good_input_goes_through_both(client, members, world, django_capture_on_commit_callbacks):
    case = world["case"]
    api, page = send_both(client, members, world, "edit", {"version": "{version}", "field": "diagnosis",
                                                           "value": "  Subtracted 54.  "})
    assert api.status_code == 200 and api.json()["diagnosis"] == "Subtracted 54."
    assert page.status_code == 200 and Case.objects.get(pk=case.pk).version == case.version + 1  # unchanged: no edit
    api = api_client_for(members["curator"]).patch(f"/api/v1/aed/cases/{case.pk}/", {
        "version": Case.objects.get(pk=case.pk).version, "changes": {"evidence": [{"step": 1}]}}, format="json")
    assert api.status_code == 200 and api.json()["evidence"] == [{"step": 1}]
    api, page = send_both(client, members, world, "edit", {"version": "{version}", "field": "evidence_add",
                                                           "step": "2"})
    assert api.status_code == 200 and page.status_code == 200
    assert Case.objects.get(pk=case.pk).evidence == [{"step": 1}, {"step": 2}, {"step": 2}]
    api, page = send_both(client, members, world, "propose", {"corrected_action": "calc 391 - 45 ",
                                                              "rationale": " the task says 45 "})
    assert api.status_code == 201 and page.status_code == 200
    assert list(Proposal.objects.filter(case=case).values_list("corrected_action", "rationale"))[-2:] == [
        ("calc 391 - 45", "the task says 45")] * 2
    api, page = send_both(client, members, world, "status", {"status": "accepted"})
    assert api.status_code == 200 and page.status_code == 200
    with django_capture_on_commit_callbacks(execute=False):
        api, page = send_both(client, members, world, "replay", {"pairs": "3", "seed": "4", "retry": "original",
                                                                 "hint": "on"})
    assert api.status_code == 202 and page.status_code == 200
    assert list(Replay.objects.values_list("pairs", "seed", "retry")) == [(3, 4, "original")] * 2
    api, page = send_both(client, members, world, "grading", {"evidence": "best", "min_pairs": "8", "alpha": "0.01"})
    assert api.status_code == 200 and api.json()["min_pairs"] == 8 and page.status_code == 302
    api, page = send_both(client, members, world, "submit", {"version": "{version}"})
    assert api.status_code == 200 and api.json()["status"] == "submitted"
    assert page.status_code == 200 and Case.objects.get(pk=case.pk).version == api.json()["version"] + 1
