"""The ATD page: every page and endpoint for every role, the live near-tie count, escaping of hostile
prompt and candidate text, freezing and starting runs through the page, the import form."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherAnswer, TeacherRun
from dataplatform.accounts.models import Membership
from tests.page_roles import VISITORS, logged_in

pytestmark = pytest.mark.django_db
DENIED = {"annotator": 403, "trainer": 403, "outsider": 404}
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def make_run(project, qs, **prompt_fields) -> ScoringRun:
    run = ScoringRun.objects.create(project=project, template_version="judge-v1")
    for n, q in enumerate(qs):
        prompt, _ = AtdPrompt.objects.get_or_create(
            project=project, external_id=f"p{n}",
            defaults={"source_sha256": "0" * 64, "messages": [{"role": "user", "content": f"question {n}"}],
                      "candidate_a": f"A{n}", "candidate_b": f"B{n}", **prompt_fields})
        Score.objects.create(run=run, prompt=prompt, q=q, q_ab=q)
    return run


@pytest.fixture
def atd(project):
    run = make_run(project, [0.5, 0.51, 0.52, 0.5200001, 0.1, 0.9])
    selection = Selection.objects.create(project=project, run=run, name="ties", version=1, epsilon=0.02, size=0)
    return {"run": run, "selection": selection}


def endpoints(atd):
    run, selection = atd["run"], atd["selection"]
    return [
        ("get", "/projects/alpha/atd/", None, 200),
        ("get", f"/projects/alpha/atd/?run={run.pk}&epsilon=0.05", None, 200),
        ("get", f"/projects/alpha/atd/runs/{run.pk}/tie-counts?epsilon=0.02", None, 200),
        ("post", "/projects/alpha/atd/score", {"method": "judge", "debias": "1", "batch_size": "8"}, 302),
        ("post", "/projects/alpha/atd/freeze", {"run": run.pk, "name": "ties", "epsilon": "0.02"}, 302),
        ("post", f"/projects/alpha/atd/selections/{selection.pk}/teacher", {"budget": "3", "debias": "1"}, 302),
        ("post", "/projects/alpha/atd/import",
         {"file": SimpleUploadedFile("p.jsonl", b'{"id": "n1", "prompt": "hi", "candidates": ["a", "b"]}')}, 200),
    ]


@pytest.mark.parametrize("who", VISITORS)
@pytest.mark.parametrize("n", range(7))
def test_every_endpoint_for_every_role(client, members, atd, who, n, django_capture_on_commit_callbacks):
    method, url, data, success = endpoints(atd)[n]
    with django_capture_on_commit_callbacks(execute=False):
        response = getattr(logged_in(client, members, who), method)(url, data)
    if who == "anonymous":
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    else:
        assert response.status_code == {"admin": success, "curator": success, **DENIED}[who], url


def test_another_project_cannot_reach_the_run(client, members, atd, other_project,
                                              django_capture_on_commit_callbacks):
    stranger = members["outsider"]
    Membership.objects.create(user=stranger, project=other_project, role="curator")
    client.force_login(stranger)
    assert client.get(f"/projects/beta/atd/runs/{atd['run'].pk}/tie-counts").status_code == 404
    assert client.post("/projects/beta/atd/freeze", {"run": atd["run"].pk, "name": "x",
                                                     "epsilon": "0.1"}).status_code == 404
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(f"/projects/beta/atd/selections/{atd['selection'].pk}/teacher", {}).status_code == 404
    page = client.get(f"/projects/beta/atd/?run={atd['run'].pk}")
    assert page.status_code == 200 and b"question 0" not in page.content and b"Run " + str(
        atd["run"].pk).encode() not in page.content
    assert TeacherRun.objects.count() == 0 and Selection.objects.filter(project=other_project).count() == 0


def test_live_count_partial(client, members, atd):
    client.force_login(members["curator"])
    url = f"/projects/alpha/atd/runs/{atd['run'].pk}/tie-counts"
    at_boundary = client.get(url, {"epsilon": "0.02"}, HTTP_HX_REQUEST="true")
    assert at_boundary.status_code == 200
    html = at_boundary.content.decode()
    assert 'id="tie-counts"' in html and "<html" not in html
    assert '<strong class="kept-count">3</strong> of 6' in html  # 0.5, 0.51, 0.52; not 0.5200001
    assert "50.0%" in html
    wide = client.get(url, {"epsilon": "0.5"}).content.decode()
    assert '<strong class="kept-count">6</strong>' in wide and "100.0%" in wide
    assert client.get(url, {"epsilon": "nope"}).status_code == 400
    assert client.get(url, {"epsilon": "0.9"}).status_code == 400


def test_page_shows_histogram_live_input_and_forms(client, members, atd):
    teacher = TeacherRun.objects.create(selection=atd["selection"], model_name="t-model")
    TeacherAnswer.objects.create(run=teacher, prompt=AtdPrompt.objects.get(external_id="p0"), bit="", status="tie")
    client.force_login(members["admin"])
    html = client.get("/projects/alpha/atd/").content.decode()
    assert "<svg" in html and f"q (both orders, debiased) under scoring run {atd['run'].pk}" in html
    assert f'hx-get="/projects/alpha/atd/runs/{atd["run"].pk}/tie-counts"' in html
    assert 'hx-trigger="input changed delay:250ms, change"' in html
    assert '<span translate="no">ties</span> v1' in html and "t-model" in html
    assert 'value="atd.dpo"' in html and 'value="atd.scored"' in html and "/projects/alpha/exports/new" in html
    assert "<script>" not in html and "style=" not in html  # CSP: no inline scripts or styles


def test_hostile_text_is_escaped(client, members, project):
    make_run(project, [0.5], messages=[{"role": "user", "content": HOSTILE}])
    AtdPrompt.objects.filter(external_id="p0").update(candidate_a=HOSTILE, candidate_b=HOSTILE, external_id=HOSTILE)
    client.force_login(members["curator"])
    for html in (client.get("/projects/alpha/atd/").content.decode(),
                 client.get(f"/projects/alpha/atd/runs/{ScoringRun.objects.get().pk}/tie-counts").content.decode()):
        assert HOSTILE not in html and "<script>alert" not in html and "<img src=x" not in html
        assert escape(HOSTILE)[:40] in html


def test_freeze_via_the_page(client, members, atd):
    client.force_login(members["curator"])
    response = client.post("/projects/alpha/atd/freeze", {"run": atd["run"].pk, "name": "near", "epsilon": "0.02"},
                           follow=True)
    assert response.status_code == 200
    selection = Selection.objects.get(name="near")
    assert selection.version == 1 and selection.size == 3 and selection.epsilon == 0.02
    assert "Froze near v1: 3 prompts" in response.content.decode()
    client.post("/projects/alpha/atd/freeze", {"run": atd["run"].pk, "name": "near", "epsilon": "0.5"})
    assert Selection.objects.get(name="near", version=2).size == 6
    bad = client.post("/projects/alpha/atd/freeze", {"run": atd["run"].pk, "name": "no spaces!", "epsilon": "0.1"},
                      follow=True)
    assert "letters, digits" in bad.content.decode() and not Selection.objects.filter(version=3).exists()
    assert client.post("/projects/alpha/atd/freeze", {"run": 999999, "name": "x", "epsilon": "0.1"}).status_code == 404


def test_score_and_teacher_via_the_page(client, members, atd, django_capture_on_commit_callbacks, settings):
    settings.ATD_TEACHER_ENDPOINTS = ["http://vllm:8000/v1/"]  # listed with a slash: compared without
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        client.post("/projects/alpha/atd/score", {"method": "likelihood", "batch_size": "4"})
        refused = client.post("/projects/alpha/atd/score", {"method": "judge", "batch_size": "0"}, follow=True)
        client.post(f"/projects/alpha/atd/selections/{atd['selection'].pk}/teacher",
                    {"model_name": "teach", "base_url": "http://vllm:8000/v1", "budget": "7"})
        bad_url = client.post(f"/projects/alpha/atd/selections/{atd['selection'].pk}/teacher",
                              {"base_url": "javascript:alert(1)"}, follow=True)
        unlisted = client.post(f"/projects/alpha/atd/selections/{atd['selection'].pk}/teacher",
                               {"base_url": "http://10.0.0.5:8000/v1"}, follow=True)
    run = ScoringRun.objects.exclude(pk=atd["run"].pk).get()
    assert run.method == "likelihood" and run.debias is False and run.batch_size == 4 and run.job.kind == "atd.score"
    assert "Batch size must be between" in refused.content.decode()
    teacher = TeacherRun.objects.get()
    assert (teacher.model_name, teacher.base_url, teacher.budget, teacher.debias) == ("teach", "http://vllm:8000/v1",
                                                                                      7, False)
    assert "not an http(s) URL" in bad_url.content.decode()
    assert "not allowed here" in unlisted.content.decode() and TeacherRun.objects.count() == 1
    page = client.get("/projects/alpha/atd/").content.decode()
    assert f'id="job-progress-{run.job.pk}"' in page
    assert '<option value="http://vllm:8000/v1/" translate="no">' in page  # only listed endpoints are offered


def test_import_form(client, members, project):
    client.force_login(members["curator"])
    lines = "\n".join([json.dumps({"id": "ok", "prompt": "hi", "candidates": ["a", "b"]}), json.dumps({"id": ""})])
    failed = client.post("/projects/alpha/atd/import", {"file": SimpleUploadedFile("pool.jsonl", lines.encode())})
    html = failed.content.decode()
    assert failed.status_code == 200 and "Nothing was written" in html and not AtdPrompt.objects.exists()
    skipped = client.post("/projects/alpha/atd/import", {"file": SimpleUploadedFile("pool.jsonl", lines.encode()),
                                                         "skip_bad_lines": "1"})
    assert "1 created" in skipped.content.decode() and AtdPrompt.objects.get().external_id == "ok"


def test_position_biased_near_ties_are_counted_left_out_and_kept_on_request(client, members, project):
    run = make_run(project, [0.5, 0.5, 0.51])
    scores = list(Score.objects.filter(run=run).order_by("id"))
    for score, (q_ab, q_ba) in zip(scores, [(0.9, 0.9), (0.5, 0.5), (0.52, 0.5)], strict=True):
        score.q_ab, score.q_ba, score.position_bias = q_ab, q_ba, abs(q_ab - (1 - q_ba))
        score.save()
    client.force_login(members["curator"])
    url = f"/projects/alpha/atd/runs/{run.pk}/tie-counts"
    html = client.get(url, {"epsilon": "0.02"}).content.decode()
    assert '<strong class="kept-count">2</strong> of 3' in html and "<strong>1</strong> more" in html
    assert "left out" in html and "0.8000" not in html  # the biased one is not in the sample
    kept = client.get(url, {"epsilon": "0.02", "include_biased": "1"}).content.decode()
    assert '<strong class="kept-count">3</strong> of 3' in kept and "0.8000" in kept
    loose = client.get(url, {"epsilon": "0.02", "bias_threshold": "0.9"}).content.decode()
    assert '<strong class="kept-count">3</strong>' in loose
    assert client.get(url, {"epsilon": "0.02", "bias_threshold": "2"}).status_code == 400

    page = client.get("/projects/alpha/atd/", {"run": run.pk, "histogram": "position_bias"}).content.decode()
    assert f"position bias |q_ab − (1 − q_ba)| under scoring run {run.pk}" in page
    assert 'id="id_bias_threshold"' in page and 'hx-include="#id_epsilon, #id_include_biased"' in page
    response = client.post("/projects/alpha/atd/freeze", {"run": run.pk, "name": "ties", "epsilon": "0.02",
                                                          "bias_threshold": "0.2"}, follow=True)
    assert "Froze ties v1: 2 prompts with |q − 0.5| ≤ 0.02, 1 position-biased left out (bias &gt; 0.2)." in \
        response.content.decode()
    selection = Selection.objects.get(project=project, name="ties")
    assert (selection.size, selection.excluded_biased, selection.recipe["bias_threshold"]) == (2, 1, 0.2)
    page = client.get("/projects/alpha/atd/").content.decode()
    assert "Position-biased near ties (bias &gt; 0.2): 1 left out." in page
    assert '<option value="one_word">One word' in page and '<option value="logprobs">' in page


def test_the_page_costs_the_same_queries_for_one_selection_or_many(client, members, atd,
                                                                     django_assert_max_num_queries):
    """Each selection's teacher runs show their answer counts: read for the whole page at once."""
    prompt = AtdPrompt.objects.get(external_id="p0")

    def teacher_for(selection):
        teacher = TeacherRun.objects.create(selection=selection, model_name=f"t-{selection.pk}")
        TeacherAnswer.objects.create(run=teacher, prompt=prompt, bit="A", status="ok")

    teacher_for(atd["selection"])
    client.force_login(members["admin"])
    with CaptureQueriesContext(connection) as one:
        client.get("/projects/alpha/atd/")
    for version in range(2, 6):
        teacher_for(Selection.objects.create(project=atd["run"].project, run=atd["run"], name="ties", version=version,
                                             epsilon=0.02, size=0))
    with django_assert_max_num_queries(len(one.captured_queries)):
        html = client.get("/projects/alpha/atd/").content.decode()
    assert html.count("t-model") == 0 and all(f"t-{s.pk}" in html for s in Selection.objects.all())


def test_selections_come_a_keyset_page_at_a_time(client, members, atd, project):
    Selection.objects.bulk_create([Selection(project=project, run=atd["run"], name="more", version=n, epsilon=0.02)
                                   for n in range(1, 25)])  # 25 in all with the fixture's
    client.force_login(members["curator"])
    first = client.get(f"/projects/alpha/atd/?run={atd['run'].pk}")
    shown = first.context["selections_page"].rows
    assert [s.pk for s in shown] == list(Selection.objects.order_by("-pk").values_list("pk", flat=True)[:20])
    assert first.context["selections_page"].next_query.startswith(f"run={atd['run'].pk}&before=")
    older = client.get(f"/projects/alpha/atd/?{first.context['selections_page'].next_query}")
    rest = older.context["selections_page"].rows
    assert len(rest) == 5 and rest[-1].pk == atd["selection"].pk and older.context["selections_page"].next_query is None
    assert b'rel="next"' in first.content and b'rel="next"' not in older.content
