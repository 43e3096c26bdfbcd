"""The newcomer's walk in the embedded mode (issue 38): the app started as `make run` starts it, then walked.

`bin/run` itself runs in a subprocess, with a DATA_DIR of its own and no DATABASE_URL or REDIS_URL: SQLite, the
filesystem broker, a Celery worker with its beat, the demo (`bootstrap_demo`) and uvicorn, on a free PORT. The
suite's own database is never touched; whatever the test checks, it checks through the pages, as a person would.

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

Throughout, every answer (pages, htmx fragments, scripts, styles) is recorded: none may be 500 or more (503
included), and no page may log a console error or throw. The crawl also refuses 4xx: a link shown to a role
must lead somewhere that role may go.
"""

import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from .pages import COUNT_STREAMED_TOKENS

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.model,
              pytest.mark.timeout(900)]  # the app's start, the demo's model jobs (~2 min on 2 cores), the walk

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("admin", "curator", "annotator", "trainer")
PASSWORD = secrets.token_urlsafe(12)  # the invited colleagues'; the demo admin's is the one bin/run prints
STARTUP_TIMEOUT = 240  # seconds: migrate, bootstrap_demo, the model's check (and its conversion, the first time)
DEMO_TIMEOUT = 420_000  # ms: the demo promises under two minutes on 2 cores; the walk shares those cores
JOB_TIMEOUT = 480_000  # ms: a replay or an export queued behind the demo's seed job (or, on a machine that ran the
# demo faster than the walk queued them, behind the labeling it queues for the background: ~4 min)
# What only the test process has: bin/test's database, Redis and queue, tests/parallel.py's DATA_DIR, and (in
# DJANGO_* and PYTEST_*, also left out) pytest-django's settings and the browser tests' leave to call the ORM from
# an event loop, DJANGO_ALLOW_ASYNC_UNSAFE: a server that needed it would fail for a real user.
TEST_ONLY_ENV = ("DATABASE_URL", "REDIS_URL", "CELERY_QUEUE", "DATA_DIR")
# ... and bin/run's own settings, which the test chooses (or leaves to their defaults, as a newcomer does).
RUN_ENV = ("PORT", "HOST", "RELOAD", "STOP_GRACE", "RUN_STARTED_AT", "MCP_SERVERS")

# The crawl: at most this many pages per role, this many URLs per path shape (ids as <n>, the query's keys).
MAX_PAGES = 80
PER_SHAPE = 2
# Links the crawl never follows: leaving, the language switch (a POST), downloads and the API's JSON (its docs
# page is a page), and in Django's admin the delete confirmations and the filtered or sorted variants of a list.
NOT_FOLLOWED = re.compile(r"/logout/|/i18n/|/api/(?!docs/)|/admin/.*(/delete/|\?)|/admin/r/")


# --- the app, as `make run` starts it ----------------------------------------------------------------------

@dataclass
class App:
    url: str
    data_dir: Path
    log_file: Path
    process: subprocess.Popen
    started: float

    @property
    def admin_password(self) -> str:
        return (self.data_dir / "demo-login.txt").read_text().strip()

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(app: App) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        if app.process.poll() is not None:
            pytest.fail(f"bin/run exited with {app.process.returncode} before serving:\n{app.log_tail()}")
        try:
            with urllib.request.urlopen(f"{app.url}/accounts/login/", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"bin/run did not serve {app.url} within {STARTUP_TIMEOUT} s:\n{app.log_tail()}")
        time.sleep(0.5)


def stop(process: subprocess.Popen) -> None:
    """As Ctrl-C would: bin/run stops its web server and worker; anything left after 30 s is killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # its group: a worker's pool process that outlived it
    except ProcessLookupError:
        pass
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def embedded_app(tmp_path_factory):
    from django.conf import settings

    data_dir = tmp_path_factory.mktemp("make-run")
    # The converted model is borrowed from the suite's DATA_DIR (bin/run's model_check converts it there once,
    # under its file lock), so that this DATA_DIR does not hold a second copy.
    models = Path(settings.DATA_DIR) / "models"
    models.mkdir(parents=True, exist_ok=True)
    (data_dir / "models").symlink_to(models.resolve(), target_is_directory=True)
    port = free_port()
    env = {name: value for name, value in os.environ.items()
           if name not in TEST_ONLY_ENV + RUN_ENV and not name.startswith(("DJANGO_", "PYTEST_"))}
    env.update(DATA_DIR=str(data_dir), PORT=str(port), STOP_GRACE="2")
    log_file = data_dir / "run.log"
    started = time.monotonic()
    with log_file.open("wb") as log:
        process = subprocess.Popen([str(ROOT / "bin" / "run")], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    app = App(url=f"http://127.0.0.1:{port}", data_dir=data_dir, log_file=log_file, process=process,
              started=started)
    try:
        wait_until_serving(app)
        print(f"bin/run served {app.url} {time.monotonic() - started:.1f} s after it started")
        yield app
    finally:
        stop(process)


# --- what the browser saw ------------------------------------------------------------------------------

@dataclass
class Visitor:
    """One person's browser context, and every answer and console error it met."""
    role: str
    context: object
    page: object
    answers: list = field(default_factory=list)  # (status, method, url)
    errors: list = field(default_factory=list)  # "page url: message"

    def server_errors(self) -> list:
        return [answer for answer in self.answers if answer[0] >= 500]

    def close(self) -> None:
        self.context.close()


def visit_as(browser, app: App, role: str, *, downloads: bool = False) -> Visitor:
    context = browser.new_context(accept_downloads=downloads)
    context.add_init_script(COUNT_STREAMED_TOKENS)
    visitor = Visitor(role=role, context=context, page=context.new_page())
    context.on("response", lambda answer: visitor.answers.append(
        (answer.status, answer.request.method, answer.url)))
    context.on("console", lambda message: message.type == "error" and visitor.errors.append(
        f"{message.page.url if message.page else '?'}: {message.text}"))
    context.on("weberror", lambda error: visitor.errors.append(
        f"{error.page.url if error.page else '?'}: {error.error}"))
    log_in(visitor.page, app, role)
    return visitor


def log_in(page, app: App, role: str) -> None:
    page.goto(f"{app.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.wait_for_load_state("load")  # the page's scripts: a key pressed before them can be lost
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(app.admin_password if role == "admin" else PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Projects", exact=True)).to_be_visible()


def assert_clean(visitors, where: str) -> None:
    failed = {visitor.role: visitor.server_errors() for visitor in visitors if visitor.server_errors()}
    errors = {visitor.role: visitor.errors for visitor in visitors if visitor.errors}
    assert not failed, f"{where}: answers of 500 or more: {failed}"
    assert not errors, f"{where}: console errors: {errors}"


def settled(page) -> None:
    """The page has loaded and htmx has swapped and settled what it fetched on load."""
    page.wait_for_load_state("load")
    expect(page.locator(".htmx-request, .htmx-settling, .htmx-added")).to_have_count(0, timeout=15_000)


def click_through(page, link) -> None:
    """Click a link and wait for its page's load (its scripts): a key or click before them can be lost, and a
    wait for the load state right after the click may still see the page the click left."""
    href = link.get_attribute("href")
    link.click()
    page.wait_for_url(lambda url: url.endswith(href))


def follow_home_link(page, app: App, label: str) -> None:
    page.goto(f"{app.url}/")
    click_through(page, page.get_by_role("link", name=label).first)


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
        page.locator("#id_password1").fill(PASSWORD)
        page.locator("#id_password2").fill(PASSWORD)
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


def wait_for_the_demo(page, app: App) -> None:
    """The home page shows the demo's progress bar until its seed job has run every workflow's model jobs."""
    page.goto(f"{app.url}/")
    progress = page.locator(".demo-progress .job-progress .state")
    if progress.count():
        expect(progress).to_have_text(re.compile("Succeeded|Failed|Cancelled"), timeout=DEMO_TIMEOUT)  # it polls
        expect(progress, f"the demo's seed job did not succeed:\n{app.log_tail()}").to_have_text("Succeeded")
        page.reload()
    expect(page.locator(".demo-progress")).to_have_count(0)
    print(f"demo ready {time.monotonic() - app.started:.0f} s after bin/run started")


# --- each workflow's first action ------------------------------------------------------------------------

def curate_a_failure_and_replay_it(page, app: App) -> str:
    follow_home_link(page, app, "Curate a failure")
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
    page.get_by_label("Corrected action for the error step").fill("calc 17 * 23")
    page.get_by_role("button", name="Add proposal").click()
    proposal = page.locator("#proposals article.proposal").first
    expect(proposal.locator(".corrected-action")).to_have_text("calc 17 * 23")
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)
    proposal.get_by_text("Replay this proposal").click()
    proposal.get_by_label("Pairs").fill("1")  # one seeded pair: the cheapest replay that still gives a verdict
    proposal.get_by_role("button", name="Start replay").click()
    expect(page.locator("#proposals .replay .job-progress")).to_be_visible()
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)  # the swapped box's forms are bound
    page.get_by_role("button", name="Submit case").click()
    expect(page.locator(".case-notice")).to_have_text("Case submitted.")
    return page.url


def create_an_export(page, app: App) -> None:
    follow_home_link(page, app, "Pull an export")
    page.get_by_label("Record kind").select_option("platform.jobs")
    page.get_by_role("button", name="Create export").click()
    row = page.locator("section[aria-labelledby=export-table] tbody tr").first
    expect(row).to_contain_text("platform.jobs")


def correct_a_token_and_watch_it_stream(page, app: App) -> None:
    follow_home_link(page, app, "Correct your first response")
    page.get_by_role("button", name="Claim the next item").click()
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


def review_a_label(page, app: App) -> None:
    follow_home_link(page, app, "Review a label")
    page.get_by_role("button", name="Review next task").click()
    expect(page.locator("#shortcut-help")).to_be_attached()
    page.wait_for_load_state("load")  # the review keys are the page's script
    page.keyboard.press("a")  # accept the model's label as it stands
    expect(page.locator(".messages")).to_contain_text("Submitted your label")


def freeze_a_near_tie_selection(page, app: App) -> None:
    follow_home_link(page, app, "Filter near-ties")
    page.locator("#id_name").fill("first-walk")
    page.get_by_role("button", name="Freeze selection").click()
    expect(page.get_by_text("first-walk").first).to_be_visible()


def read_the_replay(page, trace_url: str) -> None:
    """The replay has run on the worker: its table of outcomes (one pair: one count of one) is on the trace page."""
    page.goto(trace_url)
    replay = page.locator("#proposals .replay").first
    expect(replay.locator(".job-progress .state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)  # it polls
    expect(replay.locator(".table-2x2")).to_be_visible()
    counts = [int(replay.locator(f"td.{cell}").inner_text()) for cell in ("n11", "n10", "n01", "n00")]
    assert sorted(counts) == [0, 0, 0, 1], counts


def download_the_export(page, app: App) -> None:
    follow_home_link(page, app, "Pull an export")
    row = page.locator("section[aria-labelledby=export-table] tbody tr").first
    expect(row.locator(".state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    row.get_by_role("link", name="files & snippets").click()
    shard = page.get_by_role("link", name=re.compile(r"\.parquet$")).first
    with page.expect_download() as download:
        shard.click()
    data = download.value.path().read_bytes()
    assert len(data) > 8 and data[:4] == data[-4:] == b"PAR1", "the shard is not a Parquet file"


# --- the crawl -------------------------------------------------------------------------------------------

def shape(url: str) -> str:
    """A URL's path with its ids as <n>, and its query's keys: the URLs one page template answers."""
    parts = urlsplit(url)
    keys = sorted({key for key, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return re.sub(r"\d+", "<n>", parts.path) + ("?" + "&".join(keys) if keys else "")


def crawl(page, app: App) -> tuple[list, list]:
    """Breadth first from the home page over same-origin GET links: the site's pages first, Django's admin after
    them. Returns the pages visited (status, url, the page that linked to it) and those left at MAX_PAGES."""
    queues = {"site": deque([(f"{app.url}/", None)]), "admin": deque()}
    seen, shapes, visited = {f"{app.url}/"}, {}, []
    while len(visited) < MAX_PAGES and (queues["site"] or queues["admin"]):
        url, linked_from = (queues["site"] or queues["admin"]).popleft()
        answer = page.goto(url)
        visited.append((answer.status if answer else None, url, linked_from))
        if answer is None or "text/html" not in (answer.headers.get("content-type") or ""):
            continue
        settled(page)
        for href in page.eval_on_selector_all("a[href]:not([download])", "links => links.map(link => link.href)"):
            href = href.split("#")[0]
            if not href.startswith(f"{app.url}/") or href in seen or NOT_FOLLOWED.search(href):
                continue
            seen.add(href)
            key = shape(href)
            if shapes.get(key, 0) < PER_SHAPE:
                shapes[key] = shapes.get(key, 0) + 1
                queues["admin" if urlsplit(href).path.startswith("/admin/") else "site"].append((href, url))
    return visited, [url for url, _ in [*queues["site"], *queues["admin"]]]


# --- the walk ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def early_work(browser, embedded_app, colleagues):
    """While the demo's seed job runs, the curator curates a failure and starts its replay, and creates an export:
    the single worker takes them next, before the labeling the demo queues for the background once it is ready.
    Returns the trace's URL."""
    curator = visit_as(browser, embedded_app, "curator")
    trace_url = curate_a_failure_and_replay_it(curator.page, embedded_app)
    create_an_export(curator.page, embedded_app)
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
          f"{time.monotonic() - embedded_app.started:.0f} s after bin/run started; not visited (over {MAX_PAGES}): "
          f"{left}")
    refused = [page for page in visited if page[0] is None or page[0] >= 400]
    assert_clean([visitor], f"{role}'s crawl")
    assert not refused, f"{role} was shown links to pages it cannot open: {refused}"
    assert len(visited) > 3  # the crawl got past the home page
    visitor.close()


def test_each_workflows_first_action(browser, embedded_app, early_work):
    app = embedded_app
    began = time.monotonic()
    admin = visit_as(browser, app, "admin")
    wait_for_the_demo(admin.page, app)
    annotator = visit_as(browser, app, "annotator")
    correct_a_token_and_watch_it_stream(annotator.page, app)
    review_a_label(annotator.page, app)
    curator = visit_as(browser, app, "curator")
    freeze_a_near_tie_selection(curator.page, app)
    read_the_replay(curator.page, early_work)
    trainer = visit_as(browser, app, "trainer", downloads=True)
    download_the_export(trainer.page, app)
    visitors = [admin, annotator, curator, trainer]
    print(f"the workflows' first actions after the demo's: {time.monotonic() - began:.0f} s, "
          f"{sum(len(visitor.answers) for visitor in visitors)} answers; "
          f"{time.monotonic() - app.started:.0f} s after bin/run started")
    assert_clean(visitors, "the workflows' first actions")
    for visitor in visitors:
        visitor.close()
