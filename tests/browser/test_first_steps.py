"""A newcomer's first steps on a freshly bootstrapped instance, in Chinese, on PostgreSQL with a Celery worker.

`bootstrap_demo` seeds the demo project and queues its jobs; a real Celery worker runs them with the
real embedded model. Then, from the log-in page, the demo admin follows the home page's links and does
each workflow's first real action: a correction that streams, a label accepted, a case submitted, a
selection frozen, an export downloaded. The walk picks Chinese with the switch on the log-in page
(remembered in a cookie) and finds every control by its Chinese name, taken from the catalogs, so a
control left untranslated fails the walk. The same actions in English are the newcomer's walk
(test_newcomer_walk.py), on the embedded mode's SQLite and filesystem broker; an English walk here
only repeated it on the cores both share.
"""

import io
import re
import time

import pytest
from django.core.management import call_command
from django.utils import translation
from playwright.sync_api import expect

from annotate.models import Item, Session
from corpora.aed.models import Case, ReplayRun
from corpora.atd.models import Score, Selection
from dataplatform.accounts.models import Project
from dataplatform.demo.parts import parts, seed_job_of
from dataplatform.jobs.models import TERMINAL_STATES, Job, JobState
from labeler.models import Label, LabelOrigin, LabelStatus

from .pages import COUNT_STREAMED_TOKENS

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.model,
              pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(900)]  # the demo's jobs, then a walk with the model streaming

DEMO_JOBS_TIMEOUT = 300  # seconds; the demo promises under two minutes on 2 cores


class Words:
    """The interface's words in one language, looked up in the catalogs the pages use."""

    def __init__(self, language: str):
        self.language = language

    def __call__(self, text: str) -> str:
        with translation.override(self.language):
            translated = translation.gettext(text)
        if self.language != "en":
            assert translated != text, f"{text!r} has no {self.language} translation"
        return translated


def wait_for_the_demo(timeout: float = DEMO_JOBS_TIMEOUT) -> Job:
    """Wait for the demo.seed job (it runs the demo's model jobs, then freezes the ATD selection)."""
    started = time.monotonic()
    while True:
        seed = Job.objects.filter(project__slug="demo", kind="demo.seed").first()
        if seed is not None and seed.is_terminal:
            break
        assert time.monotonic() - started < timeout, list(Job.objects.values_list("kind", "state", "status_message"))
        time.sleep(1)
    assert seed.state == JobState.SUCCEEDED, seed.error
    return seed


@pytest.fixture
def demo_instance(settings, tmp_path, start_worker, local_backend):
    """`make run`'s first minutes: bootstrap_demo, then a live worker runs the demo's jobs with the real model.

    DATA_DIR is a temporary folder (the demo login and the exports go there) that borrows the converted
    model from the real one, so the worker does not convert it again."""
    from django.core.files.storage import storages

    (tmp_path / "models").symlink_to(settings.DATA_DIR / "models")
    settings.DATA_DIR = tmp_path
    files = {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "files")}}
    settings.STORAGES = {**settings.STORAGES, "exports": files, "exports-files": files}
    for alias in ("exports", "exports-files"):  # the handler caches backends; rebuild from the new settings
        storages._storages.pop(alias, None)
    began = time.monotonic()
    call_command("bootstrap_demo", stdout=io.StringIO())
    worker = start_worker()
    seed = wait_for_the_demo()
    print(f"demo ready {time.monotonic() - began:.1f} s after bootstrap_demo: {seed.result['jobs']}")
    assert "Demo ready: data in all 4 workflows" in worker.log()
    # The demo queues the rest of its SWE labeling to go on in the background. Here it would only take the
    # cores from the walks (a cancelled job stops only at its next batch of 8 tasks, minutes later): the
    # worker is stopped, the job marked cancelled, and a fresh worker takes the walks' exports.
    worker.kill()
    Job.objects.filter(project__slug="demo").exclude(state__in=TERMINAL_STATES).update(state=JobState.CANCELLED)
    start_worker()
    yield (tmp_path / "demo-login.txt").read_text().strip()
    for alias in ("exports", "exports-files"):
        storages._storages.pop(alias, None)


def check_the_demo_data() -> None:
    """What the seed left: every workflow holds the model's output (tests/demo/ covers the bootstrap alone)."""
    project = Project.objects.get(slug="demo")
    assert all(part.ready(project) for part in parts())
    seed = seed_job_of(project)
    assert [run["state"] for run in seed.result["jobs"]] == [JobState.SUCCEEDED] * 4
    items = Item.objects.filter(project=project)
    assert items.count() == 6 and all(item.rollout["token_ids"] for item in items)
    assert Label.objects.filter(task__project=project, origin=LabelOrigin.MODEL).exists()
    later = Job.objects.get(pk__in=seed.result["later"])  # the other tasks, in the background
    assert later.kind == "labeler.autolabel"
    case = Case.objects.get(trace__project=project, status="submitted")
    assert ReplayRun.objects.filter(replay__proposal__case=case).count() == 2 * case.proposals.get().replays.get().pairs
    selection = Selection.objects.get(project=project)
    assert Score.objects.filter(run=selection.run).count() == 12 and selection.size >= 1
    jobs = Job.objects.count()
    call_command("bootstrap_demo", stdout=io.StringIO())  # run again: the demo is found, nothing is queued
    assert Job.objects.count() == jobs


def eventually(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def log_in_as_demo_admin(page, live_server, password: str, words: Words) -> None:
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    # The switch on the log-in page (named in English: the page is still English); it is remembered for the
    # pages that follow.
    page.get_by_label(Words("en")("Language")).select_option(words.language)
    expect(page.locator("html")).to_have_attribute("lang", words.language)
    page.get_by_label(words("Username")).fill("admin")
    page.get_by_label(words("Password")).fill(password)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=words("Projects"), exact=True)).to_be_visible()


def follow_home_link(page, live_server, words: Words, label: str) -> None:
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name=words(label)).first.click()


def correct_a_response(page, live_server, words: Words) -> None:
    follow_home_link(page, live_server, words, "Correct your first response")
    page.get_by_role("button", name=words("Claim the next item")).click()
    workspace = page.locator("#workspace")
    expect(workspace).to_have_attribute("data-key", "1")
    page.wait_for_load_state("load")  # the workspace's scripts are running
    page.locator("#response .tok[tabindex]").nth(1).click()
    expect(page.locator("#cand-list button").first).to_be_visible()
    page.keyboard.press("2")  # the model's second choice at that token; the model continues from it
    expect(workspace).to_have_attribute("data-key", "2", timeout=90_000)  # the page reloads on the new node
    assert page.evaluate("Number(sessionStorage.streamedTokens || 0)") >= 1  # tokens arrived one by one
    accepted = Session.objects.filter(status="accepted").count()
    # A key pressed before the reloaded page's scripts run is lost (seen when the CPU is shared with the other
    # test process), and the page ignores keys while the model writes.
    expect(workspace).to_have_attribute("data-needs-stream", "0")
    page.wait_for_load_state("load")
    page.keyboard.press("a")  # accept the corrected response (the next walk then claims a new item)
    eventually(lambda: Session.objects.filter(status="accepted").count() == accepted + 1)
    # The page reloads on the accepted session, read-only; a navigation before that would be interrupted by it.
    expect(workspace).to_have_attribute("data-can-write", "0")


def accept_a_label(page, live_server, words: Words) -> None:
    follow_home_link(page, live_server, words, "Review a label")
    submitted = Label.objects.filter(origin=LabelOrigin.HUMAN, status=LabelStatus.SUBMITTED).count()
    page.get_by_role("button", name=words("Review next task")).click()
    expect(page.locator("#shortcut-help")).to_be_attached()
    page.wait_for_load_state("load")  # the review keys are the page's script
    page.keyboard.press("a")  # accept the model's label as it stands
    expect(page.locator(".messages")).to_be_visible()
    assert Label.objects.filter(origin=LabelOrigin.HUMAN, status=LabelStatus.SUBMITTED).count() == submitted + 1


def submit_a_case(page, live_server, words: Words) -> None:
    follow_home_link(page, live_server, words, "Curate a failure")
    submitted = Case.objects.filter(status="submitted").count()
    page.locator("a[data-uncurated]").first.click()
    page.wait_for_load_state("load")  # the curation keys are the page's script
    page.keyboard.press("j")
    page.keyboard.press("e")  # the focused (first) step is the first decisive error
    case_box = page.locator("#case")
    expect(case_box).to_have_attribute("data-error-step", "0")
    expect(case_box).to_have_attribute("data-version", "1")
    # htmx binds the new case box's forms when its swap settles (20 ms after the box is in the page): a change
    # made before that sends nothing (seen under load).
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)
    page.locator("#id_category").select_option(index=1)
    expect(case_box).to_have_attribute("data-version", "2")  # each change is saved as it is made
    page.locator("#id_diagnosis").fill("The first step already used the wrong operand.")
    page.keyboard.press("Control+Enter")
    expect(case_box).to_have_attribute("data-version", "3")
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)  # the swapped box's forms are bound
    page.get_by_role("button", name=words("Submit case")).click()
    expect(page.locator(".case-notice")).to_have_text(words("Case submitted."))
    assert Case.objects.filter(status="submitted").count() == submitted + 1


def freeze_a_selection(page, live_server, words: Words) -> None:
    follow_home_link(page, live_server, words, "Filter near-ties")
    frozen = Selection.objects.count()
    page.locator("#id_name").fill(f"walk-{words.language}")
    page.get_by_role("button", name=words("Freeze selection")).click()
    expect(page.get_by_text(f"walk-{words.language}").first).to_be_visible()
    assert Selection.objects.count() == frozen + 1


def download_an_export(page, live_server, words: Words) -> None:
    follow_home_link(page, live_server, words, "Pull an export")
    page.get_by_label(words("Record kind")).select_option("platform.jobs")
    page.get_by_role("button", name=words("Create export")).click()
    row = page.locator("section[aria-labelledby=export-table] tbody tr").first
    expect(row.locator(".state")).to_have_text(words("Succeeded"), timeout=60_000)
    row.get_by_role("link", name=words("files & snippets")).click()
    shard = page.get_by_role("link", name=re.compile(r"\.parquet$")).first
    with page.expect_download() as download:
        shard.click()
    assert download.value.path().stat().st_size > 0


def test_first_steps_on_a_fresh_demo_in_chinese(browser, live_server, demo_instance):
    check_the_demo_data()
    words = Words("zh-hans")
    context = browser.new_context(accept_downloads=True)
    context.add_init_script(COUNT_STREAMED_TOKENS)
    page = context.new_page()
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    log_in_as_demo_admin(page, live_server, demo_instance, words)
    correct_a_response(page, live_server, words)
    accept_a_label(page, live_server, words)
    submit_a_case(page, live_server, words)
    freeze_a_selection(page, live_server, words)
    download_an_export(page, live_server, words)
    assert errors == []  # among others: no CSP violation
    context.close()
