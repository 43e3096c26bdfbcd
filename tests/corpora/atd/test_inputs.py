"""One input layer (corpora/atd/inputs.py): each ATD use case with an API and a page (start a scoring run, freeze a
selection, ask the teacher) reads its input with one serializer, so the same bad input gets the same refusal from
both, on the same field with the same message (the service's refusals too), and good input goes through both. A
model name or an endpoint too long is refused, naming the field; the page once cut them to 200 and 500."""

import pytest

from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherRun
from dataplatform.apiutils import MAX_INT
from tests.conftest import api_client_for

from ...input_parity import assert_refused_alike

pytestmark = pytest.mark.django_db
ALPHA = "/projects/alpha/atd/"
API = "/api/v1/projects/alpha/atd/"
NAME_IT = "Name the selection with letters, digits, - and _ only (at most 100)."


@pytest.fixture
def atd(project):
    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    for n, q in enumerate([0.5, 0.51, 0.9]):
        prompt = AtdPrompt.objects.create(project=project, external_id=f"p{n}", source_sha256=f"{n}" * 64,
                                          messages=[{"role": "user", "content": f"question {n}"}],
                                          candidate_a=f"A{n}", candidate_b=f"B{n}")
        Score.objects.create(run=run, prompt=prompt, q=q, q_ab=q)
    selection = Selection.objects.create(project=project, run=run, name="ties", version=1, epsilon=0.02, size=0)
    return {"run": run.pk, "selection": selection.pk}


# use case -> (API URL, page URL)
USE_CASES = {
    "score": (API + "runs/", ALPHA + "score"),
    "freeze": (API + "selections/", ALPHA + "freeze"),
    "teacher": (API + "selections/{selection}/teacher/", ALPHA + "selections/{selection}/teacher"),
}


def send_both(client, members, atd, use_case: str, data: dict, *, encoding: str):
    api_url, page_url = (url.format(**atd) for url in USE_CASES[use_case])
    data = {key: value.format(**atd) for key, value in data.items()}
    api = api_client_for(members["curator"]).post(api_url, data, format=encoding)
    client.force_login(members["curator"])
    return api, client.post(page_url, data)


def writes():
    return ScoringRun.objects.count(), Selection.objects.count(), TeacherRun.objects.count()


REFUSALS = [
    ("score", {"method": "vibes"}, "method", "method must be one of judge, likelihood, likelihood_mean."),
    ("score", {"batch_size": "0"}, "batch_size", "Batch size must be between 1 and 1024."),
    ("score", {"batch_size": "lots"}, "batch_size", "Batch size must be a whole number."),
    ("score", {"debias": "maybe"}, "debias", "Must be a valid boolean."),
    ("score", {"model_name": "m" * 201}, "model_name", "Ensure this field has no more than 200 characters."),
    ("freeze", {"run": "{run}", "name": "no spaces!", "epsilon": "0.1"}, "name", NAME_IT),
    ("freeze", {"run": "{run}", "name": "n" * 101, "epsilon": "0.1"}, "name", NAME_IT),
    ("freeze", {"run": "{run}", "epsilon": "0.1"}, "name", NAME_IT),
    ("freeze", {"run": "{run}", "name": "near"}, "epsilon", "This field is required."),
    ("freeze", {"run": "{run}", "name": "near", "epsilon": "0.7"}, "epsilon", "epsilon must be between 0 and 0.5."),
    ("freeze", {"run": "{run}", "name": "near", "epsilon": "wide"}, "epsilon", "epsilon must be a number."),
    ("freeze", {"run": "{run}", "name": "near", "epsilon": "0.1", "bias_threshold": "1.5"}, "bias_threshold",
     "the position-bias threshold must be between 0 and 1."),
    ("freeze", {"run": "one", "name": "near", "epsilon": "0.1"}, "run", "A valid integer is required."),
    ("teacher", {"model_name": "m" * 201}, "model_name", "Ensure this field has no more than 200 characters."),
    ("teacher", {"base_url": "http://vllm:8000/" + "v" * 500}, "base_url",
     "Ensure this field has no more than 500 characters."),
    ("teacher", {"base_url": "ftp://x"}, "base_url", None),  # the allow-list's reason
    ("teacher", {"base_url": "http://10.0.0.5:8000/v1"}, "base_url", None),
    ("teacher", {"budget": str(MAX_INT + 1)}, "budget", f"Ensure this value is less than or equal to {MAX_INT}."),
    ("teacher", {"budget": "some"}, "budget", "A valid integer is required."),
    ("teacher", {"mode": "shout"}, "mode", '"shout" is not a valid choice.'),
    ("teacher", {"mode": "likelihood"}, "detail",  # the service's: a judged selection
     "A selection scored by judge (p(a) vs p(b) at the verdict) is asked as one_word or logprobs, not likelihood."),
]


@pytest.mark.parametrize("encoding", ["multipart", "json"])
@pytest.mark.parametrize("use_case, data, field, message", REFUSALS,
                         ids=[f"{case[0]}-{case[2]}-{n}" for n, case in enumerate(REFUSALS)])
def test_the_api_and_the_page_refuse_alike(client, members, atd, settings, use_case, data, field, message, encoding):
    settings.ATD_TEACHER_ENDPOINTS = ["http://vllm:8000/v1"]
    api, page = send_both(client, members, atd, use_case, data, encoding=encoding)
    assert_refused_alike(api, page, field, message)
    assert writes() == (1, 1, 0)


def test_good_input_goes_through_both(client, members, atd, settings, django_capture_on_commit_callbacks):
    settings.ATD_TEACHER_ENDPOINTS = ["http://vllm:8000/v1"]
    with django_capture_on_commit_callbacks(execute=False):
        api, page = send_both(client, members, atd, "score", {"method": "likelihood", "batch_size": "4"},
                              encoding="multipart")
        assert api.status_code == 202 and page.status_code == 302
        api, page = send_both(client, members, atd, "freeze", {"run": "{run}", "name": "near", "epsilon": "0.02",
                                                               "include_biased": "1"}, encoding="multipart")
        assert api.status_code == 201 and page.status_code == 302
        api, page = send_both(client, members, atd, "teacher", {"base_url": " http://vllm:8000/v1/ ", "budget": "7",
                                                                "mode": "logprobs"}, encoding="multipart")
        assert api.status_code == 202 and page.status_code == 302
    # A form's unticked box is false, whatever the API's default for a JSON body that leaves it out (true).
    runs = ScoringRun.objects.exclude(pk=atd["run"]).order_by("id")
    assert list(runs.values_list("method", "batch_size", "debias")) == [("likelihood", 4, False)] * 2
    assert list(Selection.objects.filter(name="near").order_by("version").values_list("version", "epsilon", "include_biased")) == [
        (1, 0.02, True), (2, 0.02, True)]
    assert list(TeacherRun.objects.values_list("base_url", "budget", "mode", "debias")) == [
        ("http://vllm:8000/v1", 7, "logprobs", False)] * 2
    api = api_client_for(members["curator"]).post(USE_CASES["score"][0], {}, format="json")
    assert api.status_code == 202 and (api.json()["debias"], api.json()["batch_size"]) == (True, 32)
