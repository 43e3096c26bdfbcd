"""Hostile text in every field that reaches a workflow page stays text (issue #8, "Hardening").

Each workflow's data is created with classic HTML/JS payloads in its text fields, then every page a user
really visits is loaded in Chromium twice, by one signed-in user:

- in a tab that *ignores* the Content-Security-Policy, so an unescaped payload would really run: the
  `window.__pwned` flag, `alert()` dialogs and a DOM audit (inline scripts, on* attributes, javascript:
  URLs) must all stay empty, and the payload must be visible as literal text where the field is shown
  (so a page cannot pass by not rendering the field);
- in a tab that *enforces* the CSP, recording `securitypolicyviolation` events and CSP console errors: a
  blocked inline script means the template did not escape, so any violation fails the test. The HTML
  as served must not contain the raw payload markup either.

The last test checks the CSP header itself on every HTML page, without a browser.
"""

import json
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from annotate import services as annotate_services
from annotate.models import AnnotationConfig, Item, Review, Session
from corpora.aed import services as aed_services
from corpora.aed.models import Replay
from corpora.atd.models import AtdPrompt, Score, ScoringRun, Selection, TeacherAnswer, TeacherRun
from dataplatform.accounts.models import Membership, Project, Role
from dataplatform.exports import services as export_services
from dataplatform.jobs.models import Job, JobState
from dataplatform.jobs.services import execute_job
from labeler import services as labeler_services
from labeler.models import Label, SweTask, Trajectory

from ..corpora.aed.curation import add_traces, demo
from ..factories import UserFactory
from ..labeler.conftest import STAGE_ONE, STAGE_TWO
from .pages import DOM_AUDIT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FLAG = "window.__pwned=1"
PAYLOADS = {
    "script": f"<script>{FLAG}</script>",
    "img": f'<img src=x onerror="{FLAG}">',
    "svg": f'<svg onload="{FLAG}">',
    "attribute": f'"><script>{FLAG}</script>',  # breaks out of a double-quoted attribute
    "single-quoted": f"'><img src=x onerror={FLAG}>",  # ... or a single-quoted one
    "textarea": f"</textarea><script>{FLAG}</script>",
    "title": f"</title><script>{FLAG}</script>",
    "json": f"</script><script>{FLAG}</script>",  # breaks out of JSON embedded in a <script>
    "alert": "<img src=x onerror=alert(1)>",  # seen by page.on("dialog")
    "url": f"javascript:{FLAG}",  # dangerous wherever text may become a link
    "template": "{{7*7}} {% now 'Y' %}",  # template injection: must show literally, never 49
}
HOSTILE = " ".join(PAYLOADS.values())
# For CharField(200) columns (names, ids, model ids): still closes attributes, runs handlers, alerts, templates.
SHORT = " ".join(PAYLOADS[name] for name in ("attribute", "img", "svg", "alert", "template", "url"))
assert len(SHORT) <= 200

# Markup that only an unescaped payload could put into the served HTML.
RAW_MARKUP = ["<script>window.__pwned", "<img src=x", "<svg onload", "</textarea><script>", "</title><script>"]

# Registered before any page script: CSP violations are collected per document.
CSP_LISTENER = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"}: ${event.sample}`);
});
"""


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def script_src(policy: str) -> list[str]:
    """The sources of the policy's script-src (default-src when there is none)."""
    directives = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            directives[words[0].lower()] = [word.lower() for word in words[1:]]
    return directives.get("script-src", directives.get("default-src", ["*"]))


def assert_strict_csp(policy: str | None, where: str) -> None:
    assert policy, f"{where} has no Content-Security-Policy header"
    sources = script_src(policy)
    assert "'unsafe-inline'" not in sources and "'unsafe-eval'" not in sources, f"{where}: script-src {sources}"


class Browsing:
    """Two tabs of one signed-in user: `free` ignores the CSP (an unescaped payload would really run there),
    `strict` enforces it and records every violation."""

    def __init__(self, browser, live_server, user):
        self.base = live_server.url
        self.contexts = [browser.new_context(bypass_csp=True), browser.new_context()]
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": session_cookie(user), "url": self.base}
        for context in self.contexts:
            context.add_cookies([cookie])
        self.free, self.strict = (context.new_page() for context in self.contexts)
        self.strict.add_init_script(CSP_LISTENER)
        self.dialogs: list[str] = []
        self.csp_console: list[str] = []
        for page in (self.free, self.strict):
            page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.strict.on("console", lambda message: message.type == "error" and "Content Security Policy" in message.text
                       and self.csp_console.append(message.text))

    def close(self):
        for context in self.contexts:
            context.close()

    def visit(self, path: str):
        """Load `path` in both tabs and fail on anything that ran, was blocked or was served unescaped.
        Returns the free tab, where the caller checks the payloads are shown as text."""
        self.check_strict(path)
        self.free.goto(self.base + path)  # waits for "load": every image's onerror and svg onload has fired by then
        self.assert_nothing_ran(path)
        return self.free

    def check_strict(self, path: str) -> None:
        response = self.strict.goto(self.base + path)
        assert response.ok, f"{path}: HTTP {response.status}"
        assert_strict_csp(response.headers.get("content-security-policy"), path)
        html = response.text()
        raw = [markup for markup in RAW_MARKUP if markup in html]
        assert not raw, f"{path} serves unescaped markup {raw}"
        self.strict.wait_for_timeout(50)  # violation events are dispatched as tasks once parsing has queued them
        blocked = self.strict.evaluate("window.__cspViolations") + self.csp_console
        assert not blocked, f"{path}: the CSP blocked {len(blocked)} inline scripts, e.g. {blocked[:3]}"

    def findings(self) -> dict:
        return {"flag": self.free.evaluate("window.__pwned"), "dialogs": list(self.dialogs),
                "dom": self.free.evaluate(DOM_AUDIT)}

    def assert_nothing_ran(self, where: str) -> None:
        assert self.findings() == {"flag": None, "dialogs": [], "dom": []}, where


@pytest.fixture
def browse(browser, live_server):
    opened = []

    def open_as(user) -> Browsing:
        opened.append(Browsing(browser, live_server, user))
        return opened[-1]

    yield open_as
    for browsing in opened:
        browsing.close()


def shows(page, selector: str, text: str) -> None:
    """The element shows `text` literally (it was rendered, and rendered as text)."""
    expect(page.locator(selector).first).to_contain_text(text)


@pytest.fixture
def hostile_project(project, members):
    """Alpha, renamed and described with payloads, plus an annotator whose username is one."""
    Project.objects.filter(pk=project.pk).update(name=SHORT, description=HOSTILE)
    project.refresh_from_db()
    user = UserFactory(username=PAYLOADS["attribute"] + PAYLOADS["alert"])
    Membership.objects.create(project=project, user=user, role=Role.ANNOTATOR)
    members["hostile"] = user
    return project


def failed_job(project, kind: str, **params) -> Job:
    return Job.objects.create(project=project, kind=kind, params=params, state=JobState.FAILED,
                              status_message=HOSTILE, error=HOSTILE)


def wait_until(page, expression: str, timeout_s: float = 10.0) -> None:
    """Poll `expression` with page.evaluate until it is true. (Playwright's wait_for_function compiles a polled
    predicate with `new Function` in the page, which the strict tab's CSP refuses as eval whenever the condition
    is not already true at the first check: the test failed now and then.)"""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {expression}"
        page.wait_for_timeout(20)


def test_the_detectors_see_an_unescaped_payload(browse, members, live_server):
    """The checks below can fail: markup put into the page unescaped runs in the free tab and is blocked
    (and reported) in the strict one."""
    tabs = browse(members["curator"])
    tabs.visit("/")
    assert tabs.findings() == {"flag": None, "dialogs": [], "dom": []}
    injected = PAYLOADS["img"] + PAYLOADS["alert"]
    for page in (tabs.free, tabs.strict):
        page.evaluate("html => document.body.insertAdjacentHTML('beforeend', html)", injected)
        wait_until(page, "document.querySelectorAll('img[src=x]').length === 2 && "
                         "[...document.querySelectorAll('img[src=x]')].every(img => img.complete)")
    wait_until(tabs.free, "window.__pwned === 1")
    found = tabs.findings()
    assert found["flag"] == 1 and found["dialogs"] == ["1"] and len(found["dom"]) == 2
    wait_until(tabs.strict, "window.__cspViolations.length === 2")
    assert all(v.startswith("script-src") for v in tabs.strict.evaluate("window.__cspViolations"))


# --- onPanda ---------------------------------------------------------------------------------------


class PayloadVocabulary:
    """Stands in for the model's tokenizer: each token id is one payload, so model output is hostile."""

    def __init__(self):
        self.pieces = {100 + n: payload.encode() for n, payload in enumerate(PAYLOADS.values())}

    def token_pieces(self, ids):
        return [self.pieces[token_id] for token_id in ids]


def test_onpanda_pages(browse, members, hostile_project, use_backend):
    project = hostile_project
    vocabulary = PayloadVocabulary()
    use_backend(vocabulary)
    AnnotationConfig.objects.update_or_create(project=project, defaults={"model_name": SHORT})
    ids = list(vocabulary.pieces)
    rollout = {"token_ids": ids, "logprobs": [-0.1] * len(ids), "finish_reason": "stop", "model_id": SHORT,
               "seed": 0, "top": [[[t, -0.1], [ids[(n + 1) % len(ids)], -1.0], [ids[(n + 2) % len(ids)], -2.0]]
                                  for n, t in enumerate(ids)],
               # Parsed already: the project's model (a payload) has no backend that could parse it on claim.
               "channels": ["content"] * len(ids),
               "message": {"role": "assistant", "content": HOSTILE, "finish_reason": "stop"}}
    for n in range(2):
        Item.objects.create(project=project, external_id=f"{n} {SHORT}", source_sha256=f"{n:064d}", prompt_ids=[1],
                            messages=[{"role": "system", "content": HOSTILE}, {"role": "user", "content": HOSTILE}],
                            rollout=rollout)
    mine = annotate_services.open_session(claim=annotate_services.claim_next(project=project,
                                                                             annotator=members["annotator"]))
    node = mine.current_node
    node.origins[1], node.origins[2] = "typed", "candidate"  # a typed rewrite and a picked candidate
    node.save()
    theirs = annotate_services.open_session(claim=annotate_services.claim_next(project=project,
                                                                               annotator=members["hostile"]))
    Session.objects.filter(pk=theirs.pk).update(status="accepted")
    Review.objects.create(session=theirs, reviewer=members["admin"], decision="rejected", comment=HOSTILE)

    tabs = browse(members["annotator"])
    page = tabs.visit(reverse("annotate-workspace", args=[mine.pk]))
    assert SHORT in page.title()
    shows(page, "h1", SHORT)
    expect(page.locator(".prompt-text")).to_have_text([HOSTILE, HOSTILE])
    expect(page.locator("#response .tok")).to_have_text(list(PAYLOADS.values()))
    expect(page.locator("#response .tok.origin-typed")).to_have_text(PAYLOADS["img"])
    # The candidates come as JSON from the API and are built by workspace.js.
    page.locator("#response .tok[tabindex]").nth(3).click()
    expect(page.locator("#cand-list button")).to_have_count(3)
    for n, name in enumerate(["attribute", "single-quoted", "textarea"]):
        shows(page, f"#cand-list li:nth-child({n + 1})", json.dumps(PAYLOADS[name]))
    tabs.assert_nothing_ran("workspace candidates")

    tabs = browse(members["admin"])
    page = tabs.visit(reverse("annotate-review", args=[project.slug]))
    shows(page, "tbody", HOSTILE)  # the review comment
    shows(page, "tbody", members["hostile"].username)
    shows(page, "tbody", SHORT)  # the item's external id
    page = tabs.visit(reverse("annotate-queue", args=[project.slug]))
    expect(page.locator("#id_model_name")).to_have_value(SHORT)
    shows(page, "#queue-state ~ table", members["hostile"].username)  # the claims table
    page = tabs.visit(reverse("project-detail", args=[project.slug]))
    shows(page, "h1", SHORT)
    shows(page, "main > p", HOSTILE)  # the description
    page = tabs.visit(reverse("project-list"))
    shows(page, "tbody", SHORT)


# --- SWE Labeler -------------------------------------------------------------------------------------


def hostile_taxonomy():
    """The shipped taxonomy under a new version, with payloads in titles, names, definitions and descriptions
    (and a dimension choice whose slug is markup: the slug rules allow < > and /)."""
    data = yaml.safe_load((Path(labeler_services.__file__).parent / "taxonomies" / "swe_v1.yaml").read_text())
    data["version"], data["title"] = "hostile", SHORT
    axis = data["axes"]["task_type"]
    axis["description"] = HOSTILE
    family = next(f for f in axis["families"] if f["slug"] == STAGE_ONE["task_type_l1"])
    family["name"] = family["definition"] = HOSTILE
    family["tags"][0]["name"] = family["tags"][0]["definition"] = HOSTILE
    dimension = data["dimensions"]["code_language"]
    dimension["description"] = HOSTILE
    dimension["choices"].append({"slug": "<script>x</script>", "name": HOSTILE, "definition": HOSTILE})
    return labeler_services.load_taxonomy(text=yaml.safe_dump(data, sort_keys=False), filename="hostile.yaml")


def diff_of(text: str) -> str:
    return (f"diff --git a/{SHORT} b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-{text}\n+{text}\n {text}\n")


def test_swe_labeler_pages(browse, members, hostile_project):
    project = hostile_project
    taxonomy = hostile_taxonomy()
    labeler_services.update_settings(project=project, taxonomy=taxonomy)
    tasks = [SweTask.objects.create(project=project, instance_id=f"{n} {SHORT}", repo=SHORT, problem_statement=HOSTILE,
                                    patch=diff_of(HOSTILE), test_patch=diff_of(HOSTILE), fail_to_pass=[HOSTILE],
                                    pass_to_pass=[HOSTILE], source_sha256=f"{n:064d}") for n in range(2)]
    values = {**STAGE_ONE, **STAGE_TWO}
    Label.objects.create(project=project, task=tasks[0], taxonomy=taxonomy, origin="model", status="submitted",
                         values=values, rationales={name: HOSTILE for name in values}, model_id=SHORT)
    Label.objects.create(project=project, task=tasks[1], taxonomy=taxonomy, origin="model", status="error",
                         error=HOSTILE, model_id=SHORT)

    tabs = browse(members["admin"])
    page = tabs.visit(reverse("labeler-overview", args=[project.slug]) + "?state=error")
    shows(page, "#setup-title + p", SHORT)  # the taxonomy's title
    shows(page, ".task-list pre.error", HOSTILE)  # the model's failed answer
    shows(page, ".task-list", f"1 {SHORT}")

    page = tabs.visit(reverse("labeler-task", args=[project.slug, tasks[0].pk]))
    shows(page, "pre.problem", HOSTILE)
    for kind in ("removed", "added", "context"):  # one line of each kind in the patch and in the test patch
        expect(page.locator(f".diff-{kind}")).to_contain_text([HOSTILE, HOSTILE])
    shows(page, ".diff-file", SHORT)
    expect(page.locator("ul.tests code")).to_have_text([HOSTILE, HOSTILE])
    language = page.locator("fieldset[data-field='code_language']")
    shows(page, "fieldset[data-field='task_type_l1'] .field-help", HOSTILE)  # axis description
    shows(page, "fieldset[data-field='task_type_l1'] .rationale", HOSTILE)
    family = page.locator(f"fieldset[data-field='task_type_l1'] input[value='{STAGE_ONE['task_type_l1']}']")
    expect(family.locator("xpath=..")).to_contain_text(HOSTILE)  # family name
    expect(family.locator("xpath=..")).to_have_attribute("title", HOSTILE)  # family definition
    shows(page, "fieldset[data-field='task_type_l2'] .options", HOSTILE)  # tag name
    expect(language.locator(".field-help")).to_have_text(HOSTILE)
    shows(page, "fieldset[data-field='code_language'] .options", "<script>x</script>")  # the choice slug
    shows(page, "table.comparison", SHORT)  # the model id
    shows(page, "table.comparison", HOSTILE)  # a rationale
    # Pick the hostile choice: htmx swaps in the re-rendered editor, whose scripts htmx would run.
    language.locator("input[value='<script>x</script>']").check()
    expect(page.locator("fieldset[data-field='code_language'] input[value='<script>x</script>']")).to_be_checked()
    expect(language.locator(".prov")).to_have_text("human")
    shows(page, "fieldset[data-field='code_language'] .field-help", HOSTILE)
    tabs.assert_nothing_ran("labeler editor after an htmx swap")

    page = tabs.visit(reverse("labeler-task", args=[project.slug, tasks[1].pk]))
    shows(page, ".label-side .warning", HOSTILE)

    # A trajectory (the trajectory mode): the agent's text, reasoning, tool calls and results, its own label.
    call = {"id": "c1", "type": "function", "function": {"name": SHORT, "arguments": json.dumps({"x": HOSTILE})}}
    trajectory = Trajectory.objects.create(
        project=project, task=tasks[0], trajectory_id=f"run {SHORT}", instance_id=tasks[0].instance_id,
        model=SHORT, scaffold=SHORT, source_sha256="9" * 64, messages=[
            {"role": "user", "content": HOSTILE},
            {"role": "assistant", "content": HOSTILE, "reasoning": HOSTILE, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "name": SHORT, "content": f"error {HOSTILE}"}])
    Label.objects.create(project=project, trajectory=trajectory, taxonomy=taxonomy, origin="model",
                         status="submitted", values=values, rationales={name: HOSTILE for name in values},
                         model_id=SHORT, l1_source="generated")
    page = tabs.visit(reverse("labeler-trajectory", args=[project.slug, trajectory.pk]))
    shows(page, "h1", SHORT)
    # request, reasoning (folded), answer, the call's arguments (JSON-escaped), the tool's result
    expect(page.locator("#trajectory-messages .step-text")).to_contain_text(
        [HOSTILE, HOSTILE, HOSTILE, "<script>window.__pwned=1</script>", HOSTILE])
    shows(page, "#trajectory-messages .step-call code", SHORT)
    shows(page, "#model-summary", HOSTILE)
    shows(page, "table.comparison", HOSTILE)


# --- AED -------------------------------------------------------------------------------------------------


def test_aed_pages(browse, members, hostile_project):
    project = hostile_project
    record = demo(f"t {SHORT}", task_id=SHORT, environment=SHORT, harness=SHORT, policy_model=SHORT,
                  meta={"note": HOSTILE})
    record["steps"][0]["content"] = HOSTILE
    record["steps"][1]["action"] = HOSTILE
    record["steps"][1]["observation"] = HOSTILE
    record["steps"][2]["observation"] = HOSTILE * 10  # long: folded in <details>
    (trace,) = add_traces(project, record)
    curator = members["curator"]
    case = aed_services.open_case(trace=trace, curator=curator)
    case = aed_services.update_case(case=case, version=case.version, actor=curator, changes={
        "error_step": 1, "category": case.taxonomy.categories[0]["slug"], "diagnosis": HOSTILE,
        "evidence": [{"step": 1, "quote": PAYLOADS["textarea"]}]})
    proposal = aed_services.add_proposal(case=case, actor=curator, corrected_action=HOSTILE, rationale=HOSTILE,
                                         origin="model", model_id=SHORT)
    # Stored directly: start_replay refuses a URL an admin did not list (AED_REPLAY_WEBHOOKS), but a page
    # must still escape whatever an older row holds.
    job = Job.objects.create(project=project, kind="aed.replay", params={}, state=JobState.FAILED,
                             status_message=HOSTILE, error=HOSTILE, created_by=curator)
    Replay.objects.create(proposal=proposal, runner="webhook", pairs=1, job=job, created_by=curator,
                          options={"url": PAYLOADS["url"], "max_steps": 3, "note": SHORT})
    failed_job(project, "aed.draft", case=case.pk)
    case.refresh_from_db()
    aed_services.submit_case(case=case, version=case.version, actor=curator)

    tabs = browse(curator)
    page = tabs.visit(reverse("aed-overview", args=[project.slug]))
    for column in range(1, 6):
        shows(page, f".trace-list td:nth-child({column})", SHORT)

    page = tabs.visit(reverse("aed-trace", args=[project.slug, trace.pk]))
    shows(page, "h1", SHORT)
    shows(page, ".trace-facts", SHORT)
    expect(page.locator("#step-0 .step-content")).to_have_text(HOSTILE)
    expect(page.locator("#step-1 .step-action")).to_have_text(HOSTILE)
    expect(page.locator("#step-1 .step-observation")).to_have_text(HOSTILE)
    expect(page.locator("#step-2 .step-observation")).to_have_text(HOSTILE * 10)
    meta = page.locator(".trace-side details", has_text="Trace metadata").locator("pre")
    expect(meta).to_contain_text(json.dumps(HOSTILE, ensure_ascii=False))  # the trace's meta, as JSON
    expect(page.locator("#id_diagnosis")).to_have_value(HOSTILE)
    expect(page.locator(".evidence-list q")).to_have_text(PAYLOADS["textarea"])
    expect(page.locator(".corrected-action")).to_have_text(HOSTILE)
    shows(page, ".proposal .rationale", HOSTILE)
    shows(page, ".proposal h3", SHORT)  # the model id
    shows(page, ".replay-head code", PAYLOADS["url"])
    shows(page, ".replay-head", SHORT)  # the replay's options
    shows(page, ".replay pre.error", HOSTILE)  # the replay job's error
    shows(page, ".replay .job-progress", HOSTILE)  # ... and its status message
    shows(page, "#draft pre.error", HOSTILE)  # the draft job's error
    shows(page, "#events .payload", PAYLOADS["script"])
    # Typed text saved through htmx comes back inside the <textarea> of the swapped case box.
    page.locator("#id_diagnosis").fill(HOSTILE + " (typed)")
    page.get_by_role("button", name="Save diagnosis").click()
    expect(page.locator(".case-notice")).to_contain_text("Saved")
    expect(page.locator("#id_diagnosis")).to_have_value(HOSTILE + " (typed)")
    page.locator("#id_corrected_action").fill(HOSTILE + " (typed)")
    page.get_by_role("button", name="Add proposal").click()
    expect(page.locator(".corrected-action")).to_have_text([HOSTILE, HOSTILE + " (typed)"])
    tabs.assert_nothing_ran("AED trace page after htmx swaps")

    page = tabs.visit(reverse("aed-dashboard", args=[project.slug]))
    shows(page, "table.breakdown", SHORT)  # environment, harness and policy model names


# --- ATD -------------------------------------------------------------------------------------------------


def test_atd_page(browse, members, hostile_project):
    project = hostile_project
    prompt = AtdPrompt.objects.create(project=project, external_id=SHORT, source_sha256="a" * 64,
                                      messages=[{"role": "user", "content": HOSTILE}],
                                      candidate_a=HOSTILE, candidate_b=HOSTILE)
    run = ScoringRun.objects.create(project=project, model_id=SHORT, template_version=PAYLOADS["svg"],
                                    job=failed_job(project, "atd.score"))
    Score.objects.create(run=run, prompt=prompt, q=0.5, q_ab=0.5)
    selection = Selection.objects.create(project=project, run=run, name="near-ties", version=1, epsilon=0.02, size=1)
    teacher = TeacherRun.objects.create(selection=selection, model_name=SHORT, base_url=PAYLOADS["url"],
                                        model_id=SHORT, job=failed_job(project, "atd.teacher"))
    TeacherAnswer.objects.create(run=teacher, prompt=prompt, status="invalid", raw=HOSTILE)

    tabs = browse(members["admin"])
    page = tabs.visit(reverse("atd-overview", args=[project.slug]))
    shown = HOSTILE[:150]  # the sample cuts text at 200 characters
    for column in (6, 7, 8):  # the last user message, candidates A and B (after q, q_ab, q_ba, the bias)
        shows(page, f".atd-sample td:nth-child({column})", shown)
    shows(page, ".atd-sample td:nth-child(1)", SHORT)
    shows(page, ".atd-runs", SHORT)
    shows(page, ".atd-runs", PAYLOADS["svg"])
    shows(page, ".atd-runs pre.error", HOSTILE)
    shows(page, ".atd-teachers", SHORT)
    shows(page, ".atd-teachers", PAYLOADS["url"])
    shows(page, ".atd-teachers pre.error", HOSTILE)
    # Moving epsilon swaps in a new count and sample through htmx.
    page.locator("#id_epsilon").fill("0.3")
    expect(page.locator("#tie-counts")).to_contain_text("≤ 0.3")
    shows(page, ".atd-sample td:nth-child(6)", shown)
    tabs.assert_nothing_ran("ATD page after an htmx swap")


# --- exports and jobs --------------------------------------------------------------------------------


def test_export_and_job_pages(browse, members, hostile_project, export_storage_in_tmp):
    project = hostile_project
    admin = members["admin"]
    done = export_services.create_export(project=project, user=admin, publish=False,
                                         options={"kind": "platform.jobs", "filters": {"job_kind": HOSTILE}})
    execute_job(job_id=done.job_id)
    failed = export_services.create_export(project=project, user=admin, publish=False,
                                           options={"kind": "platform.jobs"})
    Job.objects.filter(pk=failed.job_id).update(state=JobState.FAILED, status_message=HOSTILE, error=HOSTILE)
    job = failed_job(project, "demo.sample_continuations", prompt=HOSTILE)
    job.result = {"backend": SHORT, "model_id": SHORT, "prompt_tokens": 1, "samples": [
        {"text": HOSTILE, "seed": 0, "token_ids": [1], "finish_reason": PAYLOADS["svg"],
         "first_token_alternatives": [{"text": HOSTILE, "token_id": 1, "logprob": -0.5}]}]}
    job.save()

    tabs = browse(admin)
    page = tabs.visit(reverse("export-list", args=[project.slug]))
    shows(page, f"#export-{failed.pk} pre.error", HOSTILE)
    shows(page, f"#export-{failed.pk} .job-progress", HOSTILE)  # the status message
    expect(page.locator(f"#export-{done.pk} .state")).to_have_text("Succeeded")

    page = tabs.visit(reverse("export-detail", args=[project.slug, done.pk]))
    shows(page, "main section code", PAYLOADS["script"])  # the filters
    readme = page.get_by_role("link", name="README.md").get_attribute("href")
    card = page.request.get(tabs.base + readme)
    # The dataset card carries the filter values verbatim: it must never be served as a page.
    assert card.ok and PAYLOADS["script"] in card.text()
    assert card.headers["content-type"].startswith("text/markdown")
    assert card.headers["x-content-type-options"] == "nosniff"

    page = tabs.visit(reverse("job-detail", args=[job.pk]))
    shows(page, "pre.error", HOSTILE)
    shows(page, ".job-progress", HOSTILE)
    shows(page, "main table th", "prompt")
    shows(page, "main table td", HOSTILE)  # the job's parameters
    shows(page, "#result pre.sample", HOSTILE)
    shows(page, "#result h3", PAYLOADS["svg"])
    shows(page, "#result details code", HOSTILE)
    shows(page, "#result p.muted", SHORT)

    page = tabs.visit(reverse("project-detail", args=[project.slug]))  # its job table shows the failed jobs
    shows(page, "#jobs-title ~ table pre.error", HOSTILE)


# --- the CSP header ------------------------------------------------------------------------------------


def test_every_html_page_sends_a_csp_without_inline_or_eval_scripts(client, members, project):
    pages = ["/accounts/login/", "/definitely-not-a-page/"]  # anonymous: the login page and a 404
    client.force_login(members["admin"])
    pages += [reverse(name) for name in ("project-list", "token-list")]
    pages += [reverse(name, args=[project.slug]) for name in (
        "project-detail", "annotate-queue", "annotate-review", "annotate-metrics", "labeler-overview",
        "labeler-metrics", "aed-overview", "aed-dashboard", "atd-overview", "export-list")]
    for path in pages:
        response = client.get(path)
        assert response.status_code in (200, 404), path
        assert response["Content-Type"].startswith("text/html"), path
        assert_strict_csp(response.headers.get("Content-Security-Policy"), path)
