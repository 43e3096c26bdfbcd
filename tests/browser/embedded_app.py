"""The embedded app as `make run` starts it (`bin/run` in a subprocess), and the people who walk it in a browser:
their log-in (in English or, by the log-in page's switch, another language), every answer and console error they
meet, and a crawl of every page reachable from the home page. Used by test_newcomer_walk.py."""

import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.utils import translation
from playwright.sync_api import expect

from .pages import COUNT_STREAMED_TOKENS

ROOT = Path(__file__).resolve().parents[2]
COLLEAGUES_PASSWORD = secrets.token_urlsafe(12)  # the invited colleagues'; the demo admin's is the one bin/run prints
STARTUP_TIMEOUT = 240  # seconds: migrate, bootstrap_demo, the model's check (and its conversion, the first time)
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


# --- the app ---------------------------------------------------------------------------------------------

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


@contextmanager
def running_app(data_dir: Path, models: Path):
    """`bin/run` with a DATA_DIR of its own and no DATABASE_URL or REDIS_URL: SQLite, the filesystem broker, a
    worker, the demo and uvicorn on a free port, until the block ends. `models` (the suite's converted model, which
    bin/run's model check converts once under its file lock) is borrowed, so DATA_DIR holds no second copy."""
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


# --- the people, and what their browsers saw ---------------------------------------------------------------

class Words:
    """The interface's words in one language, looked up in the catalogs the pages use: outside English, a word
    with no translation fails the walk (a control left untranslated)."""

    def __init__(self, language: str = "en"):
        self.language = language

    def __call__(self, text: str) -> str:
        with translation.override(self.language):
            translated = translation.gettext(text)
        if self.language != "en":
            assert translated != text, f"{text!r} has no {self.language} translation"
        return translated


ENGLISH = Words("en")


@dataclass
class Visitor:
    """One person's browser context, and every answer and console error it met."""
    role: str
    context: object
    page: object
    words: Words = ENGLISH
    answers: list = field(default_factory=list)  # (status, method, url)
    errors: list = field(default_factory=list)  # "page url: message"

    def server_errors(self) -> list:
        return [answer for answer in self.answers if answer[0] >= 500]

    def close(self) -> None:
        self.context.close()


def visit_as(browser, app: App, role: str, *, downloads: bool = False, words: Words = ENGLISH) -> Visitor:
    context = browser.new_context(accept_downloads=downloads)
    context.add_init_script(COUNT_STREAMED_TOKENS)
    visitor = Visitor(role=role, context=context, page=context.new_page(), words=words)
    context.on("response", lambda answer: visitor.answers.append(
        (answer.status, answer.request.method, answer.url)))
    context.on("console", lambda message: message.type == "error" and visitor.errors.append(
        f"{message.page.url if message.page else '?'}: {message.text}"))
    context.on("weberror", lambda error: visitor.errors.append(
        f"{error.page.url if error.page else '?'}: {error.error}"))
    log_in(visitor.page, app, role, words)
    return visitor


def log_in(page, app: App, role: str, words: Words = ENGLISH) -> None:
    page.goto(f"{app.url}/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.wait_for_load_state("load")  # the page's scripts: a key pressed before them can be lost
    if words.language != "en":
        # The switch on the log-in page (named in English: the page is still English), remembered in a cookie.
        page.get_by_label("Language").select_option(words.language)
        expect(page.locator("html")).to_have_attribute("lang", words.language)
    page.get_by_label(words("Username")).fill(role)
    page.get_by_label(words("Password")).fill(app.admin_password if role == "admin" else COLLEAGUES_PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=words("Projects"), exact=True)).to_be_visible()


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


def follow_home_link(visitor: Visitor, app: App, label: str) -> None:
    visitor.page.goto(f"{app.url}/")
    click_through(visitor.page, visitor.page.get_by_role("link", name=visitor.words(label)).first)


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
