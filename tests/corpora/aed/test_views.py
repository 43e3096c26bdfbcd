"""AED pages: every page and htmx endpoint for every role, the trace import form, the trace list,
curating a case through the htmx endpoints (events, stale versions, refusals), model drafts,
proposals and replays, the dashboard, and escaping of trace, model and curator text."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from corpora.aed import services
from corpora.aed.importers import import_traces
from corpora.aed.models import Case, Proposal, Replay, ReplayRun, Trace
from corpora.aed.stats import GRADE_RULES
from dataplatform.jobs.models import Job, JobState
from tests.page_roles import CURATE, CURATE_POST, VISITORS, logged_in

from ... import trace_fixtures
from ...trace_fixtures import OPENHANDS
from .curation import HOSTILE, HX, add_traces, complete, demo, replay_with

pytestmark = pytest.mark.django_db

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"


@pytest.fixture
def trace(project):
    return add_traces(project, demo())[0]


@pytest.fixture
def curated(trace, members):
    """The admin's and the curator's own complete case on the trace, each with a proposal; a replay of the curator's."""
    made = {}
    for who in ("admin", "curator"):
        case = complete(services.open_case(trace=trace, curator=members[who]), members[who])
        proposal = services.add_proposal(case=case, actor=members[who], corrected_action="calc 391 - 45")
        made[who] = {"case": case, "proposal": proposal}
    made["replay"] = replay_with(made["curator"]["proposal"], members["curator"], [(True, False)] * 3)
    return made


# (method, route, args: "trace" / "case" / "proposal" / "replay" stand for ids, body, expected)
MATRIX = [
    ("get", "aed-overview", [], None, CURATE),
    ("post", "aed-import", [], None, CURATE_POST),  # no file: back to the overview with a message
    ("get", "aed-dashboard", [], None, CURATE),
    ("get", "aed-trace", ["trace"], None, CURATE),
    ("post", "aed-case-edit", ["case"], {"field": "diagnosis", "value": "Wrong operand."}, CURATE),
    ("post", "aed-case-submit", ["case"], {}, CURATE),
    ("post", "aed-case-draft", ["case"], {}, CURATE),
    ("get", "aed-case-draft-status", ["case"], None, CURATE),
    ("post", "aed-proposal-add", ["case"], {"corrected_action": "calc 391 - 45"}, CURATE),
    ("post", "aed-proposal-status", ["proposal"], {"status": "rejected"}, CURATE),
    ("post", "aed-replay-start", ["proposal"], {"pairs": "2"}, CURATE),
    ("get", "aed-replay", ["replay"], None, CURATE),
]


@pytest.mark.parametrize("who", VISITORS)
@pytest.mark.parametrize("method, route, args, body, expected", MATRIX, ids=[m[1] for m in MATRIX])
def test_every_page_and_endpoint_for_every_role(client, members, trace, curated, who, method, route, args, body,
                                                expected, django_capture_on_commit_callbacks):
    own = curated.get(who, curated["curator"])  # the admin and the curator act on their own case
    ids = {"trace": trace.pk, "case": own["case"].pk, "proposal": own["proposal"].pk, "replay": curated["replay"].pk}
    url = reverse(route, args=["alpha", *[ids[a] for a in args]])
    data = {**(body or {}), "version": Case.objects.get(pk=own["case"].pk).version} if method == "post" else None
    with django_capture_on_commit_callbacks(execute=False):  # no broker here: jobs are only queued
        response = getattr(logged_in(client, members, who), method)(url, data, **HX)
    if who == "anonymous":
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    else:
        assert response.status_code == expected[who], response.content[:300]


def test_only_the_owner_writes_a_case_and_its_proposals(client, members, curated):
    client.force_login(members["admin"])  # an admin may curate, but not inside the curator's case
    case, proposal = curated["curator"]["case"], curated["curator"]["proposal"]
    for route, arg, body in [("aed-case-edit", case.pk, {"field": "diagnosis", "value": "x"}),
                             ("aed-case-submit", case.pk, {}), ("aed-case-draft", case.pk, {}),
                             ("aed-proposal-add", case.pk, {"corrected_action": "x"}),
                             ("aed-proposal-status", proposal.pk, {"status": "rejected"}),
                             ("aed-replay-start", proposal.pk, {"pairs": "1"})]:
        response = client.post(reverse(route, args=["alpha", arg]), {**body, "version": case.version}, **HX)
        assert response.status_code == 404, route
    assert Case.objects.get(pk=case.pk).diagnosis == "Subtracted 54 instead of 45."
    assert Proposal.objects.get(pk=proposal.pk).status == "proposed"


def test_another_projects_traces_and_cases_are_not_found(client, members, curated, other_project):
    (foreign,) = add_traces(other_project, demo("t-foreign"))
    client.force_login(members["curator"])
    assert client.get(reverse("aed-trace", args=["alpha", foreign.pk])).status_code == 404
    assert client.get(reverse("aed-trace", args=["beta", foreign.pk])).status_code == 404
    assert client.get(reverse("aed-overview", args=["beta"])).status_code == 404
    case = curated["curator"]["case"]
    assert client.post(reverse("aed-case-edit", args=["beta", case.pk]), {"field": "diagnosis", "value": "x",
                                                                           "version": case.version}).status_code == 404


def test_import_errors_are_tabled_and_nothing_is_written(client, members, project):
    client.force_login(members["curator"])
    good = json.dumps(demo("t-good"))
    upload = SimpleUploadedFile("traces.jsonl", f"{good}\n{{bad\n{json.dumps({'trace_id': 'x'})}\n".encode())
    page = client.post(reverse("aed-import", args=["alpha"]), {"file": upload}).content.decode()
    assert "<th>File</th><th>Line</th><th>Field</th><th>Message</th>" in page
    assert '<td translate="no">traces.jsonl</td><td>2</td><td>(line)</td><td>invalid JSON' in page
    assert re.search(r'<td translate="no">traces.jsonl</td><td>3</td><td translate="no">[a-z_.]+</td>', page)
    assert "Nothing was written" in page and not Trace.objects.exists()

    upload = SimpleUploadedFile("traces.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("aed-import", args=["alpha"]), {"file": upload, "dry_run": "1"}).content.decode()
    assert '<span translate="no">traces.jsonl</span> (dry run)' in page and "Nothing was written" in page and not Trace.objects.exists()

    upload = SimpleUploadedFile("traces.jsonl", f"{good}\n{{bad\n".encode())
    page = client.post(reverse("aed-import", args=["alpha"]), {"file": upload, "skip_bad_lines": "1"}).content.decode()
    assert "1 created" in page and "1 line skipped" in page
    trace = Trace.objects.get()
    assert trace.trace_id == "t-good" and f'href="{reverse("aed-trace", args=["alpha", trace.pk])}"' in page


def test_trace_list_filters_by_environment_harness_model_case_and_grade(client, members, project):
    first, second, third = add_traces(project, demo("t-1"), demo("t-2", environment="web-v2", harness="swe-agent"),
                                      demo("t-3", policy_model="policy-b"))
    curator = members["curator"]
    case = complete(services.open_case(trace=first, curator=curator), curator)
    services.submit_case(case=case, version=case.version, actor=curator)
    case = services.open_case(trace=second, curator=curator)
    services.update_case(case=case, version=case.version, actor=curator, changes={"evidence_check": "supported"})
    client.force_login(curator)
    url = reverse("aed-overview", args=["alpha"])

    def listed(**query) -> list[str]:
        page = client.get(url, query).content.decode()
        return re.findall(r'<a href="/projects/alpha/aed/traces/\d+/" translate="no"[^>]*>([^<]+)</a>', page)

    assert listed() == ["t-1", "t-2", "t-3"]
    assert listed(environment="web-v2") == ["t-2"] and listed(harness="swe-agent") == ["t-2"]
    assert listed(policy_model="policy-b") == ["t-3"]
    assert listed(case="with") == ["t-1", "t-2"] and listed(case="without") == ["t-3"]
    assert listed(case="submitted") == ["t-1"]
    assert listed(grade="C") == ["t-2"] and listed(grade="ungraded") == ["t-1"] and listed(grade="A") == []
    page = client.get(url).content.decode()
    assert ">curator</span>: submitted" in page and ">curator</span>: draft · C" in page
    assert page.count("data-uncurated") == 1  # t-3, which nobody has opened a case on
    assert '<option value="web-v2" translate="no">web-v2</option>' in page and "<strong>3</strong>" in page


@pytest.mark.parametrize("n", [3, 60])
def test_overview_queries_do_not_grow_with_the_traces(client, members, project, n, django_assert_max_num_queries):
    traces = add_traces(project, *[demo(f"t-{i:03d}") for i in range(n)])
    for trace in traces[:3]:
        complete(services.open_case(trace=trace, curator=members["curator"]), members["curator"])
    client.force_login(members["curator"])
    client.get(reverse("aed-overview", args=["alpha"]))  # the first read of the kept figures counts them
    with django_assert_max_num_queries(14):
        page = client.get(reverse("aed-overview", args=["alpha"])).content.decode()
    assert page.count('href="/projects/alpha/aed/traces/') == min(n, 50)
    assert ('rel="next"' in page) == (n > 50)  # a keyset page: no count of the pages
    if n > 50:
        following = client.get(reverse("aed-overview", args=["alpha"]) + "?" + page.split('href="?')[-1].split('"')[0]
                               .replace("&amp;", "&")).content.decode()
        assert following.count('href="/projects/alpha/aed/traces/') == n - 50 and 'rel="next"' not in following


def test_the_trace_page_shows_the_steps_and_opens_the_case(client, members, project):
    long = "x" * 700
    record = demo()
    record["steps"][2]["observation"] = long
    (trace,) = add_traces(project, record)
    client.force_login(members["curator"])
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    case = Case.objects.get(trace=trace, curator=members["curator"])
    assert list(case.events.values_list("kind", flat=True)) == ["open"]
    assert page.count('class="step"') == 3 and "calc 391 - 54" in page and "Mark as first error" in page
    assert "<details class=\"observation\"><summary>Observation (700 characters)</summary>" in page
    assert '<p class="step-label">Observation</p><pre class="step-text step-observation">391</pre>' in page
    assert "Tool misuse" in page and "The agent calls an available tool with wrong arguments" in page
    for _, text in GRADE_RULES:
        assert escape(text) in page
    assert 'src="/static/corpora/aed.js"' in page and " style=" not in page and "onclick" not in page
    client.get(reverse("aed-trace", args=["alpha", trace.pk]))  # opening again: the same case, no new event
    assert Case.objects.filter(trace=trace).count() == 1 and case.events.count() == 1


def test_a_read_trace_s_page_shows_each_message_and_its_tool_calls_as_the_action(client, members, project):
    report = import_traces(project=project, lines=[trace_fixtures.body(OPENHANDS).splitlines()[0]], file=OPENHANDS)
    assert report.ok
    trace = Trace.objects.get(project=project)
    client.force_login(members["curator"])
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert page.count('class="step"') == 8
    assert escape('execute_bash({"command": "cat tests/test_slugify.py"})') in page  # step 2's second call
    assert '<span class="role" translate="no">tool</span>' in page and escape("assert slugify('a b') == 'a-b'") in page


def test_curate_a_case_through_the_htmx_endpoints(client, members, trace):
    curator = members["curator"]
    client.force_login(curator)
    client.get(reverse("aed-trace", args=["alpha", trace.pk]))
    case = Case.objects.get(trace=trace, curator=curator)
    edit = reverse("aed-case-edit", args=["alpha", case.pk])

    def post(url, **data):
        response = client.post(url, {"version": Case.objects.get(pk=case.pk).version, **data}, **HX)
        assert response.status_code == 200, response.content.decode()[:500]
        return response.content.decode()

    html = post(edit, field="error_step", value="1")
    assert 'data-error-step="1"' in html and "Saved (version 1)" in html
    assert 'id="grade" aria-labelledby="grade-title" hx-swap-oob="true"' in html  # the grade and history follow
    assert 'id="events" aria-labelledby="events-title" hx-swap-oob="true"' in html
    post(edit, field="category", value="tool-misuse")
    html = post(edit, field="diagnosis", value="  Subtracted 54 instead of 45.  ")
    assert ">Subtracted 54 instead of 45.</textarea>" in html
    html = post(edit, field="evidence_add", step="1", quote="calc 391 - 54")
    assert 'data-evidence="1"' in html and "<q class=\"quote\" translate=\"no\">calc 391 - 54</q>" in html
    post(edit, field="evidence_add", step="2")
    html = post(edit, field="evidence_remove", value="1")
    assert 'data-evidence="1"' in html
    html = post(edit, field="evidence_check", value="supported")
    assert '<span class="grade grade-C">C</span>' in html
    html = post(reverse("aed-case-submit", args=["alpha", case.pk]))
    assert "Case submitted." in html and "Submit again" in html

    case.refresh_from_db()
    assert (case.error_step, case.category, case.diagnosis, case.evidence_check, case.status) == (
        1, "tool-misuse", "Subtracted 54 instead of 45.", "supported", "submitted")
    assert case.evidence == [{"step": 1, "quote": "calc 391 - 54"}] and not case.model_authored
    events = list(case.events.order_by("id").values_list("kind", "origin", "actor__username", "payload"))
    assert [e[0] for e in events] == ["open", "edit", "edit", "edit", "edit", "edit", "edit", "edit", "submit"]
    assert all(origin == "human" and actor == "curator" for _, origin, actor, _ in events)
    assert events[1][3] == {"error_step": [None, 1]} and events[2][3] == {"category": ["", "tool-misuse"]}
    assert events[7][3] == {"evidence_check": ["unchecked", "supported"]}
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert page.count('class="event event-edit"') == 7 and 'class="event event-submit"' in page


def test_a_stale_version_is_refused_with_a_message(client, members, trace):
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    client.force_login(curator)
    edit = reverse("aed-case-edit", args=["alpha", case.pk])
    assert client.post(edit, {"field": "category", "value": "plan-error", "version": 0}, **HX).status_code == 200
    response = client.post(edit, {"field": "diagnosis", "value": "late", "version": 0}, **HX)
    html = response.content.decode()
    assert response.status_code == 409
    assert "The case changed (version 1, you had 0); reload it. Your change was not saved" in html
    assert 'data-version="1"' in html and '<option value="plan-error" title=' in html
    response = client.post(reverse("aed-case-submit", args=["alpha", case.pk]), {"version": 0}, **HX)
    assert response.status_code == 409
    case.refresh_from_db()
    assert case.diagnosis == "" and case.version == 1 and case.status == "draft"


def test_refused_values_answer_400_with_the_reason(client, members, trace):
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    client.force_login(curator)
    edit = reverse("aed-case-edit", args=["alpha", case.pk])
    for data, message in [({"field": "category", "value": "nope"}, "Unknown error category &#x27;nope&#x27;"),
                          ({"field": "error_step", "value": "9"}, "error_step must be a step of this trace (0..2)"),
                          ({"field": "error_step", "value": "x"}, "error_step must be a whole number"),
                          ({"field": "evidence_add", "step": "1", "quote": "not there"}, "does not appear in step 1"),
                          ({"field": "evidence_remove", "value": "0"}, "No such evidence reference"),
                          ({"field": "status", "value": "submitted"}, "Unknown field")]:
        response = client.post(edit, {**data, "version": 0}, **HX)
        assert response.status_code == 400 and message in response.content.decode(), data
    response = client.post(reverse("aed-case-submit", args=["alpha", case.pk]), {"version": 0}, **HX)
    assert response.status_code == 400
    assert "Not complete: set error_step, category, diagnosis first." in response.content.decode()
    assert Case.objects.get(pk=case.pk).version == 0


def test_without_htmx_a_change_redirects_to_the_trace_with_a_message(client, members, trace):
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    client.force_login(curator)
    response = client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                           {"field": "category", "value": "plan-error", "version": 0}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("aed-trace", args=["alpha", trace.pk])
    assert "Saved (version 1)." in response.content.decode()
    response = client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                           {"field": "category", "value": "plan-error", "version": 0}, follow=True)
    assert "The case changed" in response.content.decode()


def test_proposals_are_added_and_a_rejected_one_stays_listed(client, members, trace):
    curator = members["curator"]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    client.force_login(curator)
    html = client.post(reverse("aed-proposal-add", args=["alpha", case.pk]),
                       {"corrected_action": "calc 391 - 45", "rationale": "the task says 45"}, **HX).content.decode()
    proposal = Proposal.objects.get(case=case)
    assert "calc 391 - 45" in html and "the task says 45" in html and "Replay this proposal" in html
    assert 'id="events" aria-labelledby="events-title" hx-swap-oob="true"' in html
    response = client.post(reverse("aed-proposal-add", args=["alpha", case.pk]), {"corrected_action": " "}, **HX)
    assert response.status_code == 400 and "A proposal needs a corrected action." in response.content.decode()

    html = client.post(reverse("aed-proposal-status", args=["alpha", proposal.pk]), {"status": "rejected"},
                       **HX).content.decode()
    assert 'class="proposal proposal-rejected"' in html and '<span class="badge badge-rejected">Rejected</span>' in html
    assert "calc 391 - 45" in html and "Replay this proposal" not in html and ">Reopen</button>" in html
    response = client.post(reverse("aed-replay-start", args=["alpha", proposal.pk]), {"pairs": "2"}, **HX)
    assert response.status_code == 400 and "This proposal was rejected" in response.content.decode()
    response = client.post(reverse("aed-proposal-status", args=["alpha", proposal.pk]), {"status": "gone"}, **HX)
    assert response.status_code == 400
    assert Proposal.objects.get().status == "rejected"
    assert list(case.events.filter(kind__in=["propose", "proposal_status"]).values_list("kind", "payload")) == [
        ("propose", {"proposal": proposal.pk, "corrected_action": "calc 391 - 45"}),
        ("proposal_status", {"proposal": proposal.pk, "status": ["proposed", "rejected"]})]
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert "Rejected" in page and "calc 391 - 45" in page


def test_the_replay_form_creates_a_replay_and_its_job(client, members, trace, django_capture_on_commit_callbacks):
    curator = members["curator"]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    client.force_login(curator)
    with django_capture_on_commit_callbacks(execute=False) as published:  # nothing reaches a broker
        html = client.post(reverse("aed-replay-start", args=["alpha", proposal.pk]),
                           {"pairs": "4", "runner": "builtin", "seed": "7", "max_steps": "5", "temperature": "0.3",
                            "url": "https://ignored.example", "retry": "original"}, **HX).content.decode()
    replay = Replay.objects.get()
    assert (replay.pairs, replay.runner, replay.seed, replay.options, replay.created_by, replay.retry) == (
        4, "builtin", 7, {"max_steps": 5, "temperature": 0.3}, curator, "original")
    assert "arm R: original" in html
    job = Job.objects.get(pk=replay.job_id)
    assert (job.kind, job.params, job.state) == ("aed.replay", {"replay": replay.pk}, "queued") and len(published) == 1
    url = reverse("aed-replay", args=["alpha", replay.pk])
    assert f'id="replay-{replay.pk}" class="replay" hx-get="{url}" hx-trigger="every 1s"' in html
    assert f'id="job-progress-{job.pk}"' in html and f"Replay {replay.pk} started (4 pairs)." in html
    assert case.events.filter(kind="replay").get().payload == {"replay": replay.pk, "proposal": proposal.pk,
                                                                "pairs": 4, "runner": "builtin", "retry": "original"}

    html = client.get(url, **HX).content.decode()  # still running: it keeps polling, no table yet
    assert "hx-get" in html and "table-2x2" not in html
    for pair, (c, r) in enumerate([(True, False), (True, False), (True, True), (False, False)]):
        ReplayRun.objects.create(replay=replay, pair=pair, arm="C", seed=7 + pair, passed=c)
        ReplayRun.objects.create(replay=replay, pair=pair, arm="R", seed=7 + pair, passed=r)
    services.refresh_table(replay)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, progress_done=8, progress_total=8)
    html = client.get(url, **HX).content.decode()
    assert "hx-get" not in html.split('id="grade"')[0]  # finished: no more polling
    assert '<td class="n11" title="n11: both arms pass">1</td>' in html
    assert '<td class="n10" title="n10: only the corrected arm passes">2</td>' in html
    assert ">0</td>" in html and '<td class="n00" title="n00: neither passes">1</td>' in html
    assert '<dd class="pass-c">75%</dd>' in html and '<dd class="pass-r">25%</dd>' in html
    assert '<dd class="net-gain">+0.500</dd>' in html and '<dd class="mcnemar">0.5</dd>' in html
    assert re.search(r'<dd class="ci">\[[-+]0\.\d{3}, \+0\.\d{3}\]</dd>', html)
    assert 'id="grade" aria-labelledby="grade-title" hx-swap-oob="true"' in html and "grade-B" in html


def test_replay_options_are_checked(client, members, trace):
    curator = members["curator"]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
    client.force_login(curator)
    url = reverse("aed-replay-start", args=["alpha", proposal.pk])
    for data, message in [({"runner": "webhook", "url": "ftp://x"}, "is not an http(s) URL"),
                          ({"runner": "webhook", "url": "http://10.0.0.1/run"}, "not allowed here"),
                          ({"pairs": "0"}, "pairs must be between 1 and 200."), ({"pairs": "x"}, "pairs must be a whole"),
                          ({"runner": "nope"}, "Unknown runner"), ({"max_steps": "99"}, "max_steps must be between"),
                          ({"temperature": "hot"}, "temperature must be a number.")]:
        response = client.post(url, {"pairs": "2", **data}, **HX)  # pairs, as the form always sends it
        assert response.status_code == 400 and message in response.content.decode(), data
    assert not Replay.objects.exists() and not Job.objects.exists()


def test_draft_with_the_model_queues_a_job_and_marks_the_draft_model_authored(client, members, trace,
                                                                             django_capture_on_commit_callbacks):
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    client.force_login(curator)
    with django_capture_on_commit_callbacks(execute=False) as published:
        html = client.post(reverse("aed-case-draft", args=["alpha", case.pk]), **HX).content.decode()
    job = Job.objects.get(kind="aed.draft")
    assert job.params["case"] == case.pk and job.created_by == curator and len(published) == 1
    status_url = reverse("aed-case-draft-status", args=["alpha", case.pk])
    assert f'hx-get="{status_url}" hx-trigger="every 1s"' in html and f'id="job-progress-{job.pk}"' in html
    assert "disabled" in html

    # What the job does when the model answers (the draft service with its model stands in here).
    case = services.update_case(case=case, version=case.version, actor=curator, origin="model",
                                changes={"error_step": 1, "category": "tool-misuse", "diagnosis": HOSTILE})
    services.add_proposal(case=case, actor=None, corrected_action="calc 391 - 45", origin="model", model_id="m-1")
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, progress_done=1, progress_total=1,
                                         result={"drafted": True})
    html = client.get(status_url, **HX).content.decode()
    assert "hx-trigger" not in html.split('id="case"')[0]  # the job ended: the draft box stops polling
    assert 'id="case" class="case"' in html and 'hx-swap-oob="true"' in html
    assert html.count('<span class="badge badge-model">model-authored</span>') == 4  # step, category, diagnosis, proposal
    assert ESCAPED in html and HOSTILE not in html
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert page.count("model-authored</span>") == 4
    client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                {"field": "diagnosis", "value": "Subtracted 54.", "version": case.version}, **HX)
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert page.count("model-authored</span>") == 1  # only the model's proposal; a human edited the case
    assert list(case.events.values_list("kind", "origin")) == [
        ("open", "human"), ("edit", "model"), ("propose", "model"), ("edit", "human")]


def test_an_invalid_model_draft_says_so(client, members, trace):
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    job = Job.objects.create(project=trace.project, kind="aed.draft", params={"case": case.pk}, created_by=curator,
                             state=JobState.SUCCEEDED, result={"drafted": False, "attempts": []})
    client.force_login(curator)
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert f'id="job-progress-{job.pk}"' in page and "The model's answers were not a valid draft" in page


def test_the_dashboard_shows_grades_gains_pass_rates_categories_and_breakdowns(client, members, project):
    first, second, third = add_traces(project, demo("t-1"), demo("t-2", environment="web-v2"),
                                      demo("t-3", policy_model="policy-b"))
    curator = members["curator"]
    gains = {first: [(True, False)] * 6 + [(True, True), (False, False)],  # n10 = 6: A, gain +0.75
             second: [(True, False), (False, False)]}  # gain +0.5, not significant: B
    for trace in (first, second):
        case = complete(services.open_case(trace=trace, curator=curator), curator)
        proposal = services.add_proposal(case=case, actor=curator, corrected_action="calc 391 - 45")
        replay_with(proposal, curator, gains[trace])
    case = services.open_case(trace=third, curator=curator)
    services.update_case(case=case, version=case.version, actor=curator,
                         changes={"category": "plan-error", "evidence_check": "contradicted"})
    client.force_login(curator)
    page = client.get(reverse("aed-dashboard", args=["alpha"])).content.decode()
    assert '<strong id="n-cases">3</strong>' in page and '<strong id="n-replayed">2</strong>' in page
    assert '<strong id="mean-gain">+0.625</strong>' in page and 'id="mean-gain-ci">95% CI [' in page
    assert '<strong id="pass-c">80%</strong>' in page and '<strong id="pass-r">10%</strong>' in page  # 8/10, 1/10
    for grade, n in (("A", 1), ("B", 1), ("C", 0), ("D", 1), ("ungraded", 0)):
        assert f"<tr><td>{grade}</td><td>{n}</td>" in page
    assert '<td><code>tool-misuse</code></td><td translate="no">Tool misuse</td><td>2</td>' in page
    assert '<td><code>plan-error</code></td><td translate="no">Plan error</td><td>1</td>' in page
    assert "<h3>By environment</h3>" in page and '<tr><td translate="no">web-v2</td><td>1</td><td>1</td><td>+0.500</td></tr>' in page
    assert '<tr><td translate="no">calc-v1</td><td>2</td><td>1</td><td>+0.750</td></tr>' in page
    assert "<h3>By policy model</h3>" in page and '<tr><td translate="no">policy-b</td><td>1</td><td>0</td><td>—</td></tr>' in page
    assert page.count("<svg") == 3 and "Cases by grade" in page and "Pooled pass rate by arm" in page
    assert "McNemar p &lt; 0.05" in page  # the grade rules


def test_trace_case_and_model_text_are_escaped(client, members, project):
    record = demo(f"t-{HOSTILE}", environment=HOSTILE, harness=HOSTILE)
    record["steps"][1]["content"] = f"thinking {HOSTILE}"
    record["steps"][1]["observation"] = f"obs {HOSTILE}"
    record["steps"][2]["observation"] = HOSTILE * 20  # folded
    record["meta"]["note"] = HOSTILE
    (trace,) = add_traces(project, record)
    curator = members["curator"]
    case = services.open_case(trace=trace, curator=curator)
    case = services.update_case(case=case, version=case.version, actor=curator,
                                changes={"error_step": 1, "diagnosis": HOSTILE, "evidence": [{"step": 1, "quote": HOSTILE}]})
    proposal = services.add_proposal(case=case, actor=curator, corrected_action=HOSTILE, rationale=HOSTILE)
    Replay.objects.filter(pk=replay_with(proposal, curator, [(True, False)]).pk).update(options={"note": HOSTILE})
    client.force_login(curator)
    pages = [client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode(),
             client.get(reverse("aed-overview", args=["alpha"])).content.decode(),
             client.get(reverse("aed-overview", args=["alpha"]), {"environment": HOSTILE}).content.decode(),
             client.get(reverse("aed-dashboard", args=["alpha"])).content.decode()]
    case.refresh_from_db()
    pages.append(client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                             {"field": "category", "value": "plan-error", "version": case.version},
                             **HX).content.decode())
    pages.append(client.post(reverse("aed-proposal-add", args=["alpha", case.pk]),
                             {"corrected_action": HOSTILE}, **HX).content.decode())
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page
    trace_page = pages[0]
    assert trace_page.count(ESCAPED) >= 8  # id, env, harness, 2 step texts, 20 folded, meta, diagnosis, ...
    assert f"thinking {ESCAPED}" in trace_page and f"obs {ESCAPED}" in trace_page
    assert f'<textarea name="value" id="id_diagnosis" rows="5" translate="no" placeholder="Why this step is the first decisive error, and what it should have been.">{ESCAPED}</textarea>' in trace_page
    assert ESCAPED in pages[1] and ESCAPED in pages[3] and ESCAPED in pages[5]


def test_the_project_page_links_to_aed_for_curators_only(client, members, project):
    client.force_login(members["curator"])
    assert reverse("aed-overview", args=["alpha"]) in client.get(reverse("project-detail", args=["alpha"])).content.decode()
    client.force_login(members["annotator"])
    assert reverse("aed-overview", args=["alpha"]) not in client.get(
        reverse("project-detail", args=["alpha"])).content.decode()


def test_the_model_checks_the_evidence_and_the_curator_confirms_or_overrides(client, members, trace,
                                                                            django_capture_on_commit_callbacks):
    curator = members["curator"]
    case = complete(services.open_case(trace=trace, curator=curator), curator)
    client.force_login(curator)
    with django_capture_on_commit_callbacks(execute=False) as published:
        html = client.post(reverse("aed-case-check", args=["alpha", case.pk]), **HX).content.decode()
    job = Job.objects.get(kind="aed.check_evidence")
    assert job.params["case"] == case.pk and len(published) == 1 and "Evidence check job" in html
    # What the job stores when the model answers (the service with its model is tested in test_services).
    Case.objects.filter(pk=case.pk).update(model_evidence_check="contradicted", model_evidence_model_id="m-1",
                                           model_evidence_rationale=HOSTILE)
    page = client.get(reverse("aed-trace", args=["alpha", trace.pk])).content.decode()
    assert '<span translate="no">m-1</span> finds it <strong>contradicted</strong>' in page and ESCAPED in page and HOSTILE not in page
    assert 'id="confirm-check"' in page and 'id="diagnosed-by">Diagnosed by the curator.' in page
    case.refresh_from_db()
    html = client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                       {"field": "evidence_check", "value": "contradicted", "version": case.version},
                       **HX).content.decode()
    assert "(you confirmed it)" in html and 'id="confirm-check"' not in html
    case.refresh_from_db()
    html = client.post(reverse("aed-case-edit", args=["alpha", case.pk]),
                       {"field": "evidence_check", "value": "supported", "version": case.version},
                       **HX).content.decode()
    assert "(you overrode it)" in html and 'id="confirm-check"' in html


def test_a_claude_code_session_s_reasoning_and_calls_show_escaped(client, members, project):
    entries = [{"type": "user", "uuid": "u", "parentUuid": None, "sessionId": "s", "message": {
                    "role": "user", "content": HOSTILE}},
               {"type": "assistant", "uuid": "a", "parentUuid": "u", "sessionId": "s", "message": {
                   "role": "assistant", "id": "m", "content": [
                       {"type": "thinking", "thinking": f"think {HOSTILE}"},
                       {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": HOSTILE}}]}}]
    report = import_traces(project=project, lines=[json.dumps(entry) for entry in entries], file="session.jsonl")
    assert report.ok, report.errors
    client.force_login(members["curator"])
    page = client.get(reverse("aed-trace", args=["alpha", Trace.objects.get(project=project).pk])).content.decode()
    assert "<script>" not in page and escape(f"think {HOSTILE}") in page and escape(HOSTILE) in page
