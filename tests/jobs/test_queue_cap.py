"""The cap on queued jobs per project (JOB_MAX_QUEUED_PER_PROJECT) at every door that starts a job.

With alpha's queue full, each API operation that queues a job answers 429 with Retry-After, and each
HTML view that starts one says why; none of them writes a row. An API operation queues a job exactly
when it answers 202 (the OpenAPI document derives its 429 from that, dataplatform/openapi.py), so the
operations are taken from the document: a new one fails this test until it has a request below.
The service itself, and a concurrent burst: tests/jobs/test_services.py.
"""

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from corpora.aed.models import Case, Replay
from corpora.atd.models import ScoringRun, TeacherRun
from dataplatform.exports.models import Export
from dataplatform.jobs.models import Job, JobState

from ..role_matrix_world import build_world

pytestmark = pytest.mark.django_db

CAP = 3
FULL = f"Alpha already has {CAP} jobs waiting for a worker"

# A request that starts a job in alpha, per API path of the OpenAPI document.
API_STARTS = {
    "/api/v1/projects/{slug}/jobs/": {"kind": "demo.sample_continuations", "params": {"prompt": "hi"}},
    "/api/v1/jobs/{job_id}/retry/": {},
    "/api/v1/projects/{slug}/exports/": {"kind": "onpanda.sft"},
    "/api/v1/projects/{slug}/annotate/rollouts/": {},
    "/api/v1/projects/{slug}/labeler/autolabel/": {},
    "/api/v1/projects/{slug}/atd/runs/": {},
    "/api/v1/projects/{slug}/atd/selections/{selection_id}/teacher/": {},
    "/api/v1/aed/cases/{case_id}/draft/": {},
    "/api/v1/aed/cases/{case_id}/check-evidence/": {},
    "/api/v1/aed/proposals/{proposal_id}/replays/": {"pairs": 1},
}

# The HTML views that start a job: URL name -> (URL arguments from the world, form data; a value "beta:<id name>"
# is that id of beta's objects).
PAGE_STARTS = {
    "job-create": (["slug"], {"kind": "demo.sample_continuations", "prompt": "hi"}),
    "job-retry": (["job_id"], {}),
    "export-create": (["slug"], {"kind": "onpanda.sft", "format": "parquet"}),
    "annotate-rollouts": (["slug"], {}),
    "labeler-autolabel": (["slug"], {}),
    "labeler-compare": (["slug"], {"compare": "beta:taxonomy_id"}),  # beta's version against alpha's pinned one
    "atd-score": (["slug"], {}),
    "atd-teacher": (["slug", "selection_id"], {}),
    "aed-case-draft": (["slug", "case_id"], {}),
    "aed-case-check": (["slug", "case_id"], {}),
    "aed-replay-start": (["slug", "proposal_id"], {"pairs": "1"}),
}


@pytest.fixture
def full_world(settings):
    """The role matrix's world, with alpha's job queue full; its ids also name a failed job to retry."""
    world = build_world()
    alpha = world.alpha
    # The AED case needs its error step before a replay may start, and a diagnosis to check.
    Case.objects.filter(pk=alpha.ids["case_id"]).update(error_step=1, diagnosis="It multiplied the wrong numbers.")
    alpha.ids["job_id"] = Job.objects.create(project=alpha.project, kind="demo.sample_continuations",
                                             params={"prompt": "x"}, state=JobState.FAILED).pk
    queued = Job.objects.filter(project=alpha.project, state=JobState.QUEUED).count()
    assert queued <= CAP
    for _ in range(CAP - queued):
        Job.objects.create(project=alpha.project, kind="demo.sample_continuations", params={"prompt": "x"})
    settings.JOB_MAX_QUEUED_PER_PROJECT = CAP
    return world


def rows() -> dict:
    """What starting a job writes: the job, and the app's row that goes with it."""
    return {model.__name__: model.objects.count() for model in (Job, Export, ScoringRun, TeacherRun, Replay)} | {
        "queued": Job.objects.filter(state=JobState.QUEUED).count()}


def fill(template: str, ids: dict) -> str:
    return template.replace("{slug}", "alpha").format(**ids)


def test_every_api_operation_that_queues_a_job_documents_and_answers_429(full_world):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    queuing = {path: operation for path, item in schema["paths"].items() for operation in item.values()
               if isinstance(operation, dict) and "202" in operation.get("responses", {})}
    assert set(queuing) == set(API_STARTS)
    client = full_world.api_client("curator")
    before = rows()
    answers = {}
    for path, body in API_STARTS.items():
        documented = queuing[path]["responses"]["429"]
        assert "JOB_MAX_QUEUED_PER_PROJECT" in documented["description"] and "Retry-After" in documented["headers"]
        response = client.post(fill(path, full_world.alpha.ids), body, format="json")
        answers[path] = (response.status_code, response.get("Retry-After"), response.json()["detail"][:len(FULL)])
    assert answers == {path: (429, "30", FULL) for path in API_STARTS}
    assert rows() == before


def test_every_html_view_that_starts_a_job_says_the_queue_is_full(full_world):
    client = full_world.page_client("curator")
    before = rows()
    shown = {}
    for name, (arguments, form) in PAGE_STARTS.items():
        url = reverse(name, args=[full_world.alpha.ids[a] if a != "slug" else "alpha" for a in arguments])
        htmx = {"HTTP_HX_REQUEST": "true"} if name.startswith("aed-") else {}  # the AED views answer htmx with a partial
        form = {key: full_world.beta.ids[value[5:]] if str(value).startswith("beta:") else value
                for key, value in form.items()}
        response = client.post(url, form, follow=True, **htmx)
        shown[name] = FULL in response.content.decode()
    assert shown == dict.fromkeys(PAGE_STARTS, True)
    assert rows() == before
