"""The newcomer's walk in the embedded mode (issue 38): the app started as `make run` starts it, then walked.

`bin/run` itself runs in a subprocess (embedded_app.py), with a DATA_DIR of its own and no DATABASE_URL or
REDIS_URL: SQLite, the filesystem broker, a Celery worker with its beat, the demo (`bootstrap_demo`) and uvicorn,
on a free PORT. The suite's own database is never touched; whatever the test checks, it checks through the pages,
as a person would.

1. The demo's admin invites a curator, an annotator and a trainer (Django admin's *Add user*, then the project's
   *Add a member*): the demo creates only its admin.
2. While the demo's jobs still run, the curator curates a failure (first error step, category, diagnosis),
   proposes a corrected action and starts its replay, and creates an export: the single worker takes them next,
   before the labeling that the demo queues for the background once it is ready.
3. Meanwhile each role crawls every page reachable from the home page by GET links (bounded: a few URLs per path
   shape), as a newcomer clicks around while the demo fills: its jobs write to SQLite beside the web server.
4. Once the demo is ready, the rest of each workflow's first action, by the role that does it: the annotator
   corrects a token and watches the model continue (tokens stream in one by one) and reviews a SWE label; the
   curator freezes a near-tie selection and reads the replay's outcome; the trainer downloads the export's shard.
5. Then the demo's admin picks Chinese with the switch on the log-in page and does the same first actions again,
   finding every control by its Chinese name, taken from the catalogs: a control left untranslated fails the walk.

Throughout, every answer (pages, htmx fragments, scripts, styles) is recorded: none may be 500 or more (503
included), and no page may log a console error or throw. The crawl also refuses 4xx: a link shown to a role
must lead somewhere that role may go.
"""

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from .embedded_app import (
    COLLEAGUES_PASSWORD,
    App,
    Visitor,
    Words,
    assert_clean,
    click_through,
    crawl,
    follow_home_link,
    running_app,
    visit_as,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.model,
              pytest.mark.timeout(900)]  # the app's start, the demo's model jobs (~2 min on 2 cores), the walks

ROLES = ("admin", "curator", "annotator", "trainer")
DEMO_TIMEOUT = 420_000  # ms: the demo promises under two minutes on 2 cores; the walk shares those cores
JOB_TIMEOUT = 480_000  # ms: a replay or an export queued behind the demo's seed job (or, on a machine that ran the
# demo faster than the walk queued them, behind the labeling it queues for the background: ~4 min)


@pytest.fixture(scope="module")
def embedded_app(tmp_path_factory):
    from django.conf import settings

    with running_app(tmp_path_factory.mktemp("make-run"), Path(settings.DATA_DIR) / "models") as app:
        yield app


# --- the module's people: the demo admin invites the other three -----------------------------------------

@pytest.fixture(scope="module")
def colleagues(browser, embedded_app):
    """A curator, an annotator and a trainer, invited as the demo's admin would: a user each in Django's admin,
    then a member each of the demo project with that role."""
    admin = visit_as(browser, embedded_app, "admin")
    page = admin.page
    for role in ROLES[1:]:
        page.goto(f"{embedded_app.url}/")
        page.get_by_role("link", name="Admin", exact=True).click()
        page.get_by_role("link", name="Users").click()
        page.get_by_role("link", name="Add user").click()
        page.locator("#id_username").fill(role)
        page.locator("#id_password1").fill(COLLEAGUES_PASSWORD)
        page.locator("#id_password2").fill(COLLEAGUES_PASSWORD)
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".messagelist")).to_contain_text(role)
        page.goto(f"{embedded_app.url}/projects/demo/")
        page.locator("#id_member_username").fill(role)
        page.locator("#id_member_role").select_option(role)
        page.get_by_role("button", name="Add member").click()
        expect(page.locator("#members").get_by_role("cell", name=role, exact=True)).to_be_visible()
    assert_clean([admin], "inviting the colleagues")
    admin.close()
    return ROLES[1:]


def wait_for_the_demo(visitor: Visitor, app: App) -> None:
    """The home page shows the demo's progress bar until its seed job has run every workflow's model jobs."""
    page, words = visitor.page, visitor.words
    page.goto(f"{app.url}/")
    progress = page.locator(".demo-progress .job-progress .state")
    if progress.count():
        ended = "|".join(words(state) for state in ("Succeeded", "Failed", "Cancelled"))
        expect(progress).to_have_text(re.compile(ended), timeout=DEMO_TIMEOUT)  # it polls
        expect(progress, f"the demo's seed job did not succeed:\n{app.log_tail()}").to_have_text(words("Succeeded"))
        page.reload()
    expect(page.locator(".demo-progress")).to_have_count(0)
    print(f"demo ready {time.monotonic() - app.started:.0f} s after bin/run started")


# --- each workflow's first action, in the visitor's language -------------------------------------------------

def curate_a_failure(visitor: Visitor, app: App) -> None:
    page = visitor.page
    follow_home_link(visitor, app, "Curate a failure")
    click_through(page, page.locator("a[data-uncurated]").first)  # the curation keys are the page's script
    page.keyboard.press("j")
    page.keyboard.press("e")  # the focused (first) step is the first decisive error
    case_box = page.locator("#case")
    expect(case_box).to_have_attribute("data-error-step", "0")
    version = int(case_box.get_attribute("data-version"))
    # htmx binds the new case box's forms when its swap settles: a change made before that sends nothing.
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)
    page.locator("#id_category").select_option(index=1)
    expect(case_box).to_have_attribute("data-version", str(version + 1))  # each change is saved as it is made
    page.locator("#id_diagnosis").fill("The first step already used the wrong operand.")
    page.keyboard.press("Control+Enter")
    expect(case_box).to_have_attribute("data-version", str(version + 2))
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)


def submit_the_case(visitor: Visitor) -> None:
    page, words = visitor.page, visitor.words
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)  # the swapped box's forms are bound
    page.get_by_role("button", name=words("Submit case")).click()
    expect(page.locator(".case-notice")).to_have_text(words("Case submitted."))


def curate_a_failure_and_replay_it(visitor: Visitor, app: App) -> str:
    page = visitor.page
    curate_a_failure(visitor, app)
    page.get_by_label("Corrected action for the error step").fill("calc 17 * 23")
    page.get_by_role("button", name="Add proposal").click()
    proposal = page.locator("#proposals article.proposal").first
    expect(proposal.locator(".corrected-action")).to_have_text("calc 17 * 23")
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)
    proposal.get_by_text("Replay this proposal").click()
    proposal.get_by_label("Pairs").fill("1")  # one seeded pair: the cheapest replay that still gives a verdict
    proposal.get_by_role("button", name="Start replay").click()
    expect(page.locator("#proposals .replay .job-progress")).to_be_visible()
    submit_the_case(visitor)
    return page.url


def create_an_export(visitor: Visitor, app: App) -> None:
    page = visitor.page
    follow_home_link(visitor, app, "Pull an export")
    page.get_by_label("Record kind").select_option("platform.jobs")
    page.get_by_role("button", name="Create export").click()
    row = page.locator("section[aria-labelledby=export-table] tbody tr").first
    expect(row).to_contain_text("platform.jobs")


def correct_a_token_and_watch_it_stream(visitor: Visitor, app: App) -> None:
    page, words = visitor.page, visitor.words
    follow_home_link(visitor, app, "Correct your first response")
    page.get_by_role("button", name=words("Claim the next item")).click()
    workspace = page.locator("#workspace")
    expect(workspace).to_have_attribute("data-key", "1")
    page.wait_for_load_state("load")  # a token's candidates are the page's script: a click before it does nothing
    tokens = page.locator("#response .tok[tabindex]")
    tokens.nth(1).click()
    expect(page.locator("#cand-list button").first).to_be_visible()
    page.keyboard.press("2")  # the model's second choice at that token; the model continues from it
    expect(workspace).to_have_attribute("data-key", "2", timeout=120_000)  # the page reloads on the new node
    streamed = page.evaluate("Number(sessionStorage.streamedTokens || 0)")
    assert streamed >= 1, "no token arrived while the model wrote"  # the text grew token by token
    assert page.locator("#response .tok").count() >= streamed  # the node the page reloaded on holds them
    expect(workspace).to_have_attribute("data-needs-stream", "0")
    page.wait_for_load_state("load")  # the reloaded page's keys
    page.keyboard.press("a")  # accept the corrected response
    expect(workspace).to_have_attribute("data-can-write", "0")  # it reloads read-only


def review_a_label(visitor: Visitor, app: App) -> None:
    page, words = visitor.page, visitor.words
    follow_home_link(visitor, app, "Review a label")
    page.get_by_role("button", name=words("Review next task")).click()
    expect(page.locator("#shortcut-help")).to_be_attached()
    page.wait_for_load_state("load")  # the review keys are the page's script
    page.keyboard.press("a")  # accept the model's label as it stands
    submitted = words("Submitted your label of %(item)s. Press n for the next task.").split("%(item)s")[0]
    expect(page.locator(".messages")).to_contain_text(submitted)


def freeze_a_near_tie_selection(visitor: Visitor, app: App, name: str) -> None:
    page, words = visitor.page, visitor.words
    follow_home_link(visitor, app, "Filter near-ties")
    page.locator("#id_name").fill(name)
    page.get_by_role("button", name=words("Freeze selection")).click()
    expect(page.get_by_text(name).first).to_be_visible()


def read_the_replay(page, trace_url: str) -> None:
    """The replay has run on the worker: its table of outcomes (one pair: one count of one) is on the trace page."""
    page.goto(trace_url)
    replay = page.locator("#proposals .replay").first
    expect(replay.locator(".job-progress .state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)  # it polls
    expect(replay.locator(".table-2x2")).to_be_visible()
    counts = [int(replay.locator(f"td.{cell}").inner_text()) for cell in ("n11", "n10", "n01", "n00")]
    assert sorted(counts) == [0, 0, 0, 1], counts


def download_the_export(visitor: Visitor, app: App) -> None:
    page, words = visitor.page, visitor.words
    follow_home_link(visitor, app, "Pull an export")
    row = page.locator("section[aria-labelledby=export-table] tbody tr").first
    expect(row.locator(".state")).to_have_text(words("Succeeded"), timeout=JOB_TIMEOUT)
    row.get_by_role("link", name=words("files & snippets")).click()
    shard = page.get_by_role("link", name=re.compile(r"\.parquet$")).first
    with page.expect_download() as download:
        shard.click()
    data = download.value.path().read_bytes()
    assert len(data) > 8 and data[:4] == data[-4:] == b"PAR1", "the shard is not a Parquet file"


# --- the walk ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def early_work(browser, embedded_app, colleagues):
    """While the demo's seed job runs, the curator curates a failure and starts its replay, and creates an export:
    the single worker takes them next, before the labeling the demo queues for the background once it is ready.
    Returns the trace's URL."""
    curator = visit_as(browser, embedded_app, "curator")
    trace_url = curate_a_failure_and_replay_it(curator, embedded_app)
    create_an_export(curator, embedded_app)
    assert_clean([curator], "the curator's first actions")
    curator.close()
    return trace_url


@pytest.mark.parametrize("role", ROLES)
def test_every_page_a_role_reaches_from_the_home_page(browser, embedded_app, early_work, role):
    # As a newcomer clicks around while the demo fills (its jobs writing to SQLite beside the web server).
    began = time.monotonic()
    visitor = visit_as(browser, embedded_app, role)
    visited, left = crawl(visitor.page, embedded_app)
    print(f"{role}: {len(visited)} pages, {len(visitor.answers)} answers in {time.monotonic() - began:.0f} s, "
          f"{time.monotonic() - embedded_app.started:.0f} s after bin/run started; not visited: {left}")
    refused = [page for page in visited if page[0] is None or page[0] >= 400]
    assert_clean([visitor], f"{role}'s crawl")
    assert not refused, f"{role} was shown links to pages it cannot open: {refused}"
    assert len(visited) > 3  # the crawl got past the home page
    visitor.close()


def test_each_workflows_first_action(browser, embedded_app, early_work):
    app = embedded_app
    began = time.monotonic()
    admin = visit_as(browser, app, "admin")
    wait_for_the_demo(admin, app)
    annotator = visit_as(browser, app, "annotator")
    correct_a_token_and_watch_it_stream(annotator, app)
    review_a_label(annotator, app)
    curator = visit_as(browser, app, "curator")
    freeze_a_near_tie_selection(curator, app, "first-walk")
    read_the_replay(curator.page, early_work)
    trainer = visit_as(browser, app, "trainer", downloads=True)
    download_the_export(trainer, app)
    visitors = [admin, annotator, curator, trainer]
    print(f"the workflows' first actions after the demo's: {time.monotonic() - began:.0f} s, "
          f"{sum(len(visitor.answers) for visitor in visitors)} answers; "
          f"{time.monotonic() - app.started:.0f} s after bin/run started")
    assert_clean(visitors, "the workflows' first actions")
    for visitor in visitors:
        visitor.close()


def test_the_first_actions_in_chinese(browser, embedded_app, early_work):
    """The demo's admin, in Chinese: a correction that streams, a label accepted, a case submitted, a selection
    frozen, the export downloaded. (Its own export would queue behind the labeling the demo runs in the
    background; the curator's has run.)"""
    app = embedded_app
    admin = visit_as(browser, app, "admin", downloads=True, words=Words("zh-hans"))
    wait_for_the_demo(admin, app)
    correct_a_token_and_watch_it_stream(admin, app)
    review_a_label(admin, app)
    curate_a_failure(admin, app)
    submit_the_case(admin)
    freeze_a_near_tie_selection(admin, app, "walk-zh-hans")
    download_the_export(admin, app)
    assert_clean([admin], "the first actions in Chinese")
    admin.close()
