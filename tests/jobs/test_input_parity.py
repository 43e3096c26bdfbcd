"""One input layer (dataplatform/jobs/inputs.py): starting a job from the API and from the project page's form
reads one serializer, so the same bad input gets the same refusal from both, on the same field with the same
message, and good input starts a job through both. A form sends each of the kind's params as a field of its own;
JSON sends them as the object `params`."""

import pytest
from django.urls import reverse

from dataplatform.jobs.models import Job
from tests.conftest import api_client_for

from ..input_parity import assert_refused_alike

pytestmark = pytest.mark.django_db
DEMO = "demo.sample_continuations"


def send_both(client, members, form: dict, *, encoding: str):
    """`form` as the page sends it; the API gets it as a form too, or as JSON with the params in `params`."""
    params = {key: value for key, value in form.items() if key != "kind"}
    body = form if encoding == "multipart" else {**({"kind": form["kind"]} if "kind" in form else {}), "params": params}
    api = api_client_for(members["curator"]).post("/api/v1/projects/alpha/jobs/", body, format=encoding)
    client.force_login(members["curator"])
    return api, client.post(reverse("job-create", args=["alpha"]), form)


REFUSALS = [
    ({"prompt": "hi"}, "kind", "This field is required."),
    ({"kind": "demo.nope", "prompt": "hi"}, "kind", None),  # the registry's: names the known kinds
    ({"kind": DEMO, "prompt": "hi", "n": "99"}, "params.n", "Ensure this value is less than or equal to 8."),
    ({"kind": DEMO, "prompt": "hi", "temperature": "hot"}, "params.temperature", "A valid number is required."),
    ({"kind": DEMO, "n": "2"}, "params.prompt", "This field is required."),
]


@pytest.mark.parametrize("encoding", ["multipart", "json"])
@pytest.mark.parametrize("form, field, message", REFUSALS, ids=[case[1] for case in REFUSALS])
def test_the_api_and_the_page_refuse_alike(client, members, project, form, field, message, encoding):
    api, page = send_both(client, members, form, encoding=encoding)
    assert_refused_alike(api, page, field, message)  # a kind's params: under `params`, a line each on the page
    assert not Job.objects.exists()


@pytest.mark.parametrize("encoding", ["multipart", "json"])
def test_good_input_starts_a_job_through_both(client, members, project, encoding, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        api, page = send_both(client, members, {"kind": DEMO, "prompt": "hi", "n": "2", "max_tokens": "8"},
                              encoding=encoding)
    assert api.status_code == 202 and page.status_code == 302
    assert [job.params for job in Job.objects.order_by("id")] == [
        {"prompt": "hi", "n": 2, "max_tokens": 8, "temperature": 0.8, "top_k": 5}] * 2
