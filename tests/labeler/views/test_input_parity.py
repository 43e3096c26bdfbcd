"""One input layer: each SWE Labeler use case with a page and an API checks its input with one serializer, so the
same bad input gets the same refusal from both, on the same field: the API's 400 body names the field with its
messages, the page shows them as "field: message" (the label editor in the editor it re-renders), and good input
works through both."""

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dataplatform.jobs.models import Job
from labeler import services
from labeler.models import LabelerSettings, SweTask, Taxonomy
from tests.conftest import api_client_for
from tests.input_parity import api_errors, assert_same_refusal, page_messages

pytestmark = pytest.mark.django_db

API = "/api/v1/projects/alpha/labeler/"
CHOOSE_A_TAXONOMY = "Choose one of the loaded taxonomy versions."


def _settings(project) -> dict:
    return LabelerSettings.objects.filter(project=project).values().first()


# --- the settings, and pinning a taxonomy version ---------------------------------------------------------

SETTINGS_REFUSALS = [
    ({"overlap": "0"}, "overlap", "Ensure this value is greater than or equal to 1."),
    ({"overlap": ""}, "overlap", "A valid integer is required."),
    ({"batch_size": "300"}, "batch_size", "Ensure this value is less than or equal to 256."),
    ({"max_tokens": "lots"}, "max_tokens", "A valid integer is required."),
    ({"trajectory_l1_mode": "sometimes"}, "trajectory_l1_mode", '"sometimes" is not a valid choice.'),
    ({"model_name": "tiny"}, "model_name", None),  # not served: the message names what is
    ({"taxonomy": "999999"}, "taxonomy", CHOOSE_A_TAXONOMY),
    ({"taxonomy": "swe v1"}, "taxonomy", CHOOSE_A_TAXONOMY),
    ({"taxonomy": ""}, "taxonomy", CHOOSE_A_TAXONOMY),
]


@pytest.mark.parametrize("data, field, message", SETTINGS_REFUSALS, ids=[str(case[0]) for case in SETTINGS_REFUSALS])
def test_the_settings_are_refused_alike(client, members, project, data, field, message):
    """Both pages that post settings (the settings form, the pin form) against the one API answer: one test
    each, not one per page, so that the members and settings are made once for both."""
    client.force_login(members["curator"])
    services.settings_for(project)
    before = _settings(project)
    api = api_client_for(members["curator"]).put(API + "settings/", data, format="json")
    for page_name in ("labeler-settings", "labeler-pin"):
        page = client.post(reverse(page_name, args=["alpha"]), data)
        assert_same_refusal(api, page, field, message)
        assert _settings(project) == before, page_name


def test_good_settings_and_pins_go_through_both(client, members, project):
    text = (services.TAXONOMY_DIR / "swe_v1.yaml").read_text(encoding="utf-8").replace('version: "1"', 'version: "9"')
    newer = services.load_taxonomy(text=text, filename="swe_v1.9.yaml")
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).put(API + "settings/", {"overlap": "3", "batch_size": 256},
                                                 format="json")
    assert api.status_code == 200 and (api.json()["overlap"], api.json()["batch_size"]) == (3, 256)
    assert page_messages(client.post(reverse("labeler-settings", args=["alpha"]), {"lease_minutes": "15"})) == [
        "Settings saved."]
    page = client.post(reverse("labeler-pin", args=["alpha"]), {"taxonomy": newer.pk})
    assert page_messages(page)[-1] == (f'Pinned taxonomy <span translate="no">{newer}</span>. '
                                       "Existing labels keep their version.")
    settings = services.settings_for(project)
    assert (settings.overlap, settings.batch_size, settings.lease_minutes, settings.taxonomy) == (3, 256, 15, newer)


# --- loading a taxonomy -----------------------------------------------------------------------------------

def _taxonomy_file(name: str = "swe.yaml", body: bytes | None = None) -> SimpleUploadedFile:
    if body is None:
        body = (services.TAXONOMY_DIR / "swe_v1.yaml").read_bytes().replace(b'version: "1"', b'version: "7"')
    return SimpleUploadedFile(name, body)


UPLOAD_REFUSALS = {
    "no file": (lambda: {}, "file", "Upload a taxonomy file, or the published definition files in the field 'file'."),
    "two files": (lambda: {"file": [_taxonomy_file("a.yaml"), _taxonomy_file("b.yaml")]}, "file",
                  "Send one file in the field 'file', not 2: each upload imports exactly one file."),
    "not UTF-8": (lambda: {"file": _taxonomy_file("x.yaml", b"name: \xff\xfe\n")}, "file", None),
    "pin": (lambda: {"file": _taxonomy_file(), "pin": "perhaps"}, "pin", "Must be a valid boolean."),
}


@pytest.mark.parametrize("case", UPLOAD_REFUSALS)
def test_a_taxonomy_upload_is_refused_alike(client, members, project, case):
    make, field, message = UPLOAD_REFUSALS[case]
    client.force_login(members["curator"])
    before = Taxonomy.objects.count()
    api = api_client_for(members["curator"]).post(API + "taxonomy/", make(), format="multipart")
    page = client.post(reverse("labeler-taxonomy-upload", args=["alpha"]), make())
    assert_same_refusal(api, page, field, message)
    assert Taxonomy.objects.count() == before


def test_a_taxonomy_over_its_limit_is_refused_alike(client, members, project, monkeypatch):
    monkeypatch.setattr(services, "MAX_TAXONOMY_BYTES", 10)
    client.force_login(members["curator"])
    api = api_client_for(members["curator"]).post(API + "taxonomy/", {"file": _taxonomy_file()}, format="multipart")
    page = client.post(reverse("labeler-taxonomy-upload", args=["alpha"]), {"file": _taxonomy_file()})
    assert_same_refusal(api, page, "file", "swe.yaml is larger than 10 bytes.")


def test_good_taxonomies_load_through_both_and_pin_unless_told_not_to(client, members, project):
    pinned = services.settings_for(project).taxonomy
    api = api_client_for(members["curator"]).post(API + "taxonomy/", {"file": _taxonomy_file(), "pin": "false"},
                                                  format="multipart")
    assert api.status_code == 201 and services.settings_for(project).taxonomy == pinned
    client.force_login(members["curator"])
    seven = Taxonomy.objects.get(pk=api.json()["id"])
    # As the page's form sends its box: "false" first, then the ticked box's value.
    page = client.post(reverse("labeler-taxonomy-upload", args=["alpha"]),
                       {"file": _taxonomy_file(), "pin": ["false", "true"]})
    assert page_messages(page)[-1].startswith(f'Pinned taxonomy <span translate="no">{seven}</span>')
    assert services.settings_for(project).taxonomy == seven  # the same file again: the same version


# --- importing tasks or trajectories ----------------------------------------------------------------------

def test_an_imports_kind_is_refused_alike_and_a_good_one_imports(client, members, project):
    line = json.dumps({"instance_id": "org__a-1", "problem_statement": "It breaks"}).encode()
    client.force_login(members["curator"])

    def data(kind: str) -> dict:
        return {"kind": kind, "file": SimpleUploadedFile("t.jsonl", line)}

    api = api_client_for(members["curator"]).post(API + "import/", data("both"), format="multipart")
    page = client.post(reverse("labeler-import", args=["alpha"]), data("both"))
    assert_same_refusal(api, page, "kind", "Must be 'tasks' or 'trajectories'.")
    assert not SweTask.objects.exists()
    api = api_client_for(members["curator"]).post(API + "import/", {**data("tasks"), "dry_run": "1"},
                                                  format="multipart")
    assert api.status_code == 200 and api.json()["dry_run"] and not SweTask.objects.exists()
    page = client.post(reverse("labeler-import", args=["alpha"]), data("tasks"))
    assert page.status_code == 200 and "1 created" in page.content.decode()
    assert SweTask.objects.get().instance_id == "org__a-1"


# --- auto-labeling (the job kind's parameters) ----------------------------------------------------------

AUTOLABEL_REFUSALS = [
    ({"limit": "0"}, "limit", "Ensure this value is greater than or equal to 1."),
    ({"limit": "many"}, "limit", "A valid integer is required."),
    ({"subjects": "both"}, "subjects", '"both" is not a valid choice.'),
    ({"retry_errors": "perhaps"}, "retry_errors", "Must be a valid boolean."),
]


@pytest.mark.parametrize("data, field, message", AUTOLABEL_REFUSALS, ids=[case[1] for case in AUTOLABEL_REFUSALS])
def test_auto_labeling_is_refused_alike(client, members, project, data, field, message,
                                        django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        api = api_client_for(members["curator"]).post(API + "autolabel/", data, format="json")
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), data)
    assert_same_refusal(api, page, field, message)
    assert not Job.objects.exists()


def test_good_auto_labeling_goes_through_both(client, members, project, django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        api = api_client_for(members["curator"]).post(API + "autolabel/", {"limit": "5"}, format="json")
        page = client.post(reverse("labeler-autolabel", args=["alpha"]), {"subjects": "trajectories"})
    assert api.status_code == 202
    assert [job.params for job in Job.objects.order_by("pk")] == [
        {"limit": 5, "retry_errors": False, "subjects": "tasks"},
        {"limit": None, "retry_errors": False, "subjects": "trajectories"}]
    assert page_messages(page) == [f"Job {Job.objects.order_by('pk').last().pk} is auto-labeling the trajectories."]


# --- editing a label, one field at a time, and accepting it -----------------------------------------------

def editor_error(response) -> str:
    found = re.search(r'<p class="error editor-error" role="alert">(.*?)</p>', response.content.decode(), re.S)
    return html.unescape(found.group(1)) if found else ""


def edit_both(client, members, label, data):
    api = api_client_for(members["annotator"]).patch(f"/api/v1/labels/{label.pk}/", data, format="json")
    page = client.post(reverse("labeler-edit", args=["alpha", label.pk]), data, HTTP_HX_REQUEST="true")
    return api, page


EDIT_REFUSALS = [
    ({"field": "scope", "value": "multi-file"}, "version", "This field is required."),
    ({"field": "scope", "value": "multi-file", "version": "x"}, "version", "A valid integer is required."),
    ({"field": "scope", "value": "multi-file", "version": "-1"}, "version",
     "Ensure this value is greater than or equal to 0."),
    ({"version": "{version}"}, "values", "This field is required."),
]


@pytest.mark.parametrize("data, field, message", EDIT_REFUSALS, ids=["no-version", "x", "negative", "nothing"])
def test_a_label_edit_is_refused_alike(client, members, claimed, data, field, message):
    task, label = claimed
    client.force_login(members["annotator"])
    data = {key: value.format(version=label.version) for key, value in data.items()}
    api, page = edit_both(client, members, label, data)
    assert api_errors(api) == {field: [message]}
    assert page.status_code == 400 and editor_error(page) == f"{field}: {message}"
    assert label.events.count() == 1  # the prefill only


def test_what_the_service_refuses_in_an_edit_reads_the_same_on_both(client, members, claimed):
    task, label = claimed
    client.force_login(members["annotator"])
    api, page = edit_both(client, members, label, {"field": "scope", "value": "nope", "version": label.version})
    assert api.status_code == page.status_code == 400
    assert editor_error(page) == api.json()["detail"] and "scope:" in api.json()["detail"]
    api, page = edit_both(client, members, label, {"field": "scope", "value": "multi-file",
                                                   "version": label.version + 5})
    assert api.status_code == page.status_code == 409
    assert editor_error(page).startswith(api.json()["detail"])


def test_good_edits_go_through_both_in_either_shape(client, members, claimed):
    task, label = claimed
    spec = label.taxonomy.definition
    client.force_login(members["annotator"])
    api = api_client_for(members["annotator"]).patch(f"/api/v1/labels/{label.pk}/", {
        "version": label.version, "field": "domain_l1", "value": "database_storage"}, format="json")
    assert api.status_code == 200 and api.json()["values"]["domain_l2"] == []
    tags = spec.tags_under("domain", "database_storage")[:2]
    page = client.post(reverse("labeler-edit", args=["alpha", label.pk]),
                       {"field": "domain_l2", "value": tags, "version": api.json()["version"]}, HTTP_HX_REQUEST="true")
    assert page.status_code == 200 and not editor_error(page)
    label.refresh_from_db()
    assert label.values["domain_l1"] == "database_storage" and label.values["domain_l2"] == tags
    api = api_client_for(members["annotator"]).patch(f"/api/v1/labels/{label.pk}/", {
        "version": label.version, "values": {"domain_l2": tags[:1]}}, format="json")
    assert api.status_code == 200 and api.json()["values"]["domain_l2"] == tags[:1]


ACCEPT_REFUSALS = [({}, "version", "This field is required."), ({"version": "x"}, "version", "A valid integer is required.")]


@pytest.mark.parametrize("data, field, message", ACCEPT_REFUSALS, ids=["missing", "x"])
def test_accepting_a_label_is_refused_alike(client, members, claimed, data, field, message):
    task, label = claimed
    client.force_login(members["annotator"])
    api = api_client_for(members["annotator"]).post(f"/api/v1/labels/{label.pk}/submit/", data, format="json")
    page = client.post(reverse("labeler-accept", args=["alpha", label.pk]), data)
    assert_same_refusal(api, page, field, message)
    label.refresh_from_db()
    assert label.status == "draft"
