"""The AED curation page in Chromium: walk a trace with the keyboard, mark the first error, cite
evidence, pick a category, write a diagnosis, check the evidence and submit; hostile trace text stays text."""

import re

import pytest
from playwright.sync_api import expect

from corpora.aed import services
from corpora.aed.models import Case, Replay
from dataplatform.jobs.models import Job

from ..corpora.aed.curation import HOSTILE, add_traces, demo
from .pages import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def step(page, n):
    return page.locator(f"#step-{n}")


def test_curate_a_trace_with_the_keyboard_and_submit(page, live_server, members, project):
    (trace,) = add_traces(project, demo())
    log_in(page, live_server, "curator")
    page.goto(f"{live_server.url}/projects/alpha/")
    page.get_by_role("link", name="Agent error diagnosis").click()
    page.get_by_role("link", name="t-1").click()
    expect(page.get_by_role("heading", name=re.compile("t-1"))).to_be_visible()
    expect(page.locator("#shortcut-help")).to_contain_text("mark the focused step as the first error")
    case_box = page.locator("#case")
    expect(case_box).to_have_attribute("data-version", "0")
    page.wait_for_load_state("load")  # the keys are the page's script: a key pressed before it runs is lost

    page.keyboard.press("j")
    expect(step(page, 0)).to_be_focused()
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(step(page, 1)).to_be_focused()
    page.keyboard.press("e")
    page.keyboard.press("c")  # pressed at once: it waits for the mark to be saved, then cites with the new version
    expect(case_box).to_have_attribute("data-version", "2")
    expect(case_box).to_have_attribute("data-error-step", "1")
    expect(step(page, 1)).to_have_class(re.compile(r"\bis-error\b"))
    expect(step(page, 1)).to_have_class(re.compile(r"\bis-evidence\b"))
    expect(step(page, 1).locator(".badge-first-error")).to_be_visible()
    expect(step(page, 0).locator(".badge-first-error")).to_be_hidden()

    step(page, 2).locator(".step-observation").select_text()  # a quote: select text in a step, then c
    page.keyboard.press("c")
    expect(case_box).to_have_attribute("data-version", "3")
    expect(page.locator(".evidence-list li")).to_have_count(2)
    expect(page.locator(".evidence-list q").first).to_have_text("answer 337 is wrong")

    page.keyboard.press("t")
    expect(page.locator("#id_category")).to_be_focused()
    # htmx binds the swapped case box's forms when the swap settles (20 ms after the box is in the page): a
    # change made before that sends nothing (seen in CI).
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)
    page.locator("#id_category").select_option("tool-misuse")
    expect(case_box).to_have_attribute("data-version", "4")
    expect(page.locator("#category-help")).to_contain_text("wrong arguments")
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)

    step(page, 0).focus()
    page.keyboard.press("d")
    expect(page.get_by_label("Diagnosis")).to_be_focused()
    page.keyboard.type("Subtracted 54 instead of 45: the wrong operand.")
    page.keyboard.press("Control+Enter")
    expect(case_box).to_have_attribute("data-version", "5")
    expect(page.locator(".case-notice")).to_have_text("Saved (version 5).")

    page.get_by_label("Supported", exact=True).check()
    expect(case_box).to_have_attribute("data-version", "6")
    expect(page.locator("#grade .grade")).to_have_text("C")
    expect(page.locator(".htmx-settling, .htmx-added")).to_have_count(0)  # the swapped box's forms are bound
    page.get_by_role("button", name="Submit case").click()
    expect(page.locator(".case-notice")).to_have_text("Case submitted.")
    expect(page.locator("#events .event-submit")).to_have_count(1)
    assert page.console_errors == []  # among others: no CSP violation

    case = Case.objects.get(trace=trace, curator=members["curator"])
    assert (case.status, case.error_step, case.category, case.diagnosis, case.evidence_check) == (
        "submitted", 1, "tool-misuse", "Subtracted 54 instead of 45: the wrong operand.", "supported")
    assert case.evidence == [{"step": 1}, {"step": 2, "quote": "answer 337 is wrong"}]
    events = list(case.events.order_by("id").values_list("kind", "origin", "actor__username", "payload"))
    assert [kind for kind, *_ in events] == ["open", "edit", "edit", "edit", "edit", "edit", "edit", "submit"]
    assert all(origin == "human" and actor == "curator" for _, origin, actor, _ in events)
    assert events[1][3] == {"error_step": [None, 1]}
    assert events[2][3] == {"evidence": [[], [{"step": 1}]]}


def test_a_stale_tab_gets_a_message_and_keeps_the_typed_diagnosis(page, live_server, members, project):
    (trace,) = add_traces(project, demo())
    log_in(page, live_server, "curator")
    page.goto(f"{live_server.url}/projects/alpha/aed/traces/{trace.pk}/")
    case = Case.objects.get(trace=trace, curator=members["curator"])
    case.category, case.version = "plan-error", 1  # another tab saved meanwhile
    case.save()
    page.get_by_label("Diagnosis").fill("Typed here.")
    page.get_by_role("button", name="Save diagnosis").click()
    expect(page.locator(".case-error")).to_contain_text("The case changed (version 1, you had 0)")
    expect(page.locator("#case")).to_have_attribute("data-version", "1")
    expect(page.get_by_label("Diagnosis")).to_have_value("Typed here.")  # not lost; saved with the next click
    expect(page.locator(".unsaved-note")).to_be_visible()
    page.get_by_role("button", name="Save diagnosis").click()
    expect(page.locator(".case-notice")).to_have_text("Saved (version 2).")
    case.refresh_from_db()
    assert (case.category, case.diagnosis) == ("plan-error", "Typed here.")
    assert page.console_errors == [] or all("409" in e for e in page.console_errors)


def test_a_replay_refused_by_a_full_job_queue_says_why(page, live_server, members, project, settings):
    (trace,) = add_traces(project, demo())
    case = services.open_case(trace=trace, curator=members["curator"])
    Case.objects.filter(pk=case.pk).update(error_step=1)
    services.add_proposal(case=case, actor=members["curator"], corrected_action="calc 17 * 23")
    settings.JOB_MAX_QUEUED_PER_PROJECT = 1
    Job.objects.create(project=project, kind="aed.draft", params={"case": case.pk})
    log_in(page, live_server, "curator")
    page.goto(f"{live_server.url}/projects/alpha/aed/traces/{trace.pk}/")
    page.get_by_text("Replay this proposal").click()
    page.get_by_role("button", name="Start replay").click()
    expect(page.locator("#proposals .error")).to_contain_text("Alpha already has 1 jobs waiting for a worker")
    assert not Replay.objects.exists()


def test_hostile_trace_text_and_diagnosis_never_run(page, live_server, members, project):
    record = demo(f"t-{HOSTILE}", environment=HOSTILE)
    record["steps"][0]["content"] = f"thinking {HOSTILE}"
    record["steps"][1]["observation"] = f"obs {HOSTILE}"
    record["steps"][2]["observation"] = HOSTILE * 20  # long: folded in <details>
    (trace,) = add_traces(project, record)
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, "curator")
    page.goto(f"{live_server.url}/projects/alpha/aed/traces/{trace.pk}/")
    expect(step(page, 0).locator(".step-content")).to_have_text(f"thinking {HOSTILE}")
    expect(step(page, 1).locator(".step-observation")).to_have_text(f"obs {HOSTILE}")
    step(page, 2).focus()
    page.keyboard.press("o")
    expect(step(page, 2).locator(".step-observation")).to_have_text(HOSTILE * 20)
    step(page, 1).get_by_role("button", name="Mark as first error").click()  # a click works as well as e
    expect(page.locator("#case")).to_have_attribute("data-error-step", "1")
    page.get_by_label("Diagnosis").fill(HOSTILE)
    page.get_by_role("button", name="Save diagnosis").click()
    expect(page.locator(".case-notice")).to_be_visible()
    expect(page.get_by_label("Diagnosis")).to_have_value(HOSTILE)
    expect(page.locator("#events")).to_contain_text(HOSTILE)  # the history shows it as text too
    page.reload()
    expect(page.get_by_label("Diagnosis")).to_have_value(HOSTILE)
    assert page.locator("main img, main script").count() == 0
    assert dialogs == [] and page.console_errors == []
    assert Case.objects.get(trace=trace).diagnosis == HOSTILE
