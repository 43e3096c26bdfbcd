"""A person's first session: log in, open the project, run the demo job, watch it finish.

Real parts end to end: Chromium, Django's live server, PostgreSQL, Redis, a Celery worker and the model.
"""

import re

import pytest
from playwright.sync_api import expect

from dataplatform.jobs.models import Job

from .pages import log_in

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_run_the_demo_job_and_watch_its_progress_bar(page, live_server, project, members, start_worker):
    worker = start_worker()
    log_in(page, live_server, "curator")
    page.get_by_role("link", name="Alpha").click()
    page.get_by_label("Prompt").fill('Say hello to <script>alert("x")</script>')
    page.get_by_label("Samples").fill("2")
    page.get_by_label("Max tokens").fill("16")
    page.get_by_role("button", name="Run job").click()

    expect(page.get_by_role("heading", name=re.compile(r"Job \d+"))).to_be_visible()
    progress = page.locator(".job-progress")
    expect(progress.locator(".state")).to_have_text("Succeeded", timeout=120_000)
    expect(progress.locator("progress")).to_have_attribute("value", "100")

    page.get_by_role("link", name="Show the result").click()
    samples = page.locator("pre.sample")
    expect(samples).to_have_count(2)
    job = Job.objects.get()
    assert samples.first.inner_text().strip() == job.result["samples"][0]["text"].strip()
    assert page.get_by_text('<script>alert("x")</script>').count() == 1  # the prompt is shown as text
    assert page.console_errors == [], page.console_errors  # no CSP violations, no script errors
    assert worker.process.poll() is None


def test_system_page_is_green_with_a_worker(page, live_server, members, start_worker):
    start_worker()
    log_in(page, live_server, "admin")
    page.get_by_role("link", name="System").click()
    expect(page.get_by_test_id("overall")).to_have_text("all green", timeout=15_000)
    assert page.console_errors == []


def test_a_trainer_sees_no_job_form(page, live_server, members):
    log_in(page, live_server, "trainer")
    page.get_by_role("link", name="Alpha").click()
    expect(page.get_by_role("heading", name=re.compile("Alpha"))).to_be_visible()
    expect(page.get_by_label("Prompt")).to_have_count(0)


def test_api_docs_render_without_csp_errors(page, live_server, members):
    log_in(page, live_server, "admin")
    page.get_by_role("link", name="API docs").click()
    expect(page.get_by_text("/api/v1/projects/{slug}/jobs/").first).to_be_visible(timeout=15_000)
    assert page.console_errors == [], page.console_errors
