"""The SWE Labeler review page in Chromium: claim a task, then label it with the keyboard only.

The model's label comes from the scripted backend (tests/labeler/conftest.py), so no model is loaded.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from labeler import services
from labeler.models import Label, LabelOrigin, LabelStatus, ReviewClaim, SweTask

from ..doubles import RecordingProgress, ScriptedBackend
from ..labeler.conftest import STAGE_ONE, STAGE_TWO, answer
from .pages import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(1)>"


@pytest.fixture
def autolabeled(project, use_backend):
    """One task with the scripted model's label (every rationale replaced when one is given)."""
    def run(*, rationale: str | None = None):
        task = SweTask.objects.create(project=project, instance_id="org__repo-0", repo="org/repo",
                                      problem_statement="The API returns 500", source_sha256="0" * 64,
                                      patch="diff --git a/app/views.py b/app/views.py\n")

        def text(values):
            if rationale is None:
                return answer(values)
            return "```json\n" + json.dumps({k: {"value": v, "rationale": rationale} for k, v in values.items()}) + "\n```"

        # The script answers in swe_v1's vocabulary; a new project would start on swe_v2.
        services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v1"))
        backend = ScriptedBackend({"stage1": [text(STAGE_ONE)], "stage2": [text(STAGE_TWO)]})
        use_backend(backend)
        services.autolabel_project(project=project, progress=RecordingProgress())
        return task
    return run


def field(page, name):
    return page.locator(f"fieldset[data-field='{name}']")


def walk(page, order, start, to):
    """Press j (down) or k (up) until the focus moves from field `start` to field `to`."""
    steps = order.index(to) - order.index(start)
    for _ in range(abs(steps)):
        page.keyboard.press("j" if steps > 0 else "k")


def test_review_one_task_with_the_keyboard_only(page, live_server, members, autolabeled):
    task = autolabeled()
    spec = services.settings_for(task.project).taxonomy.definition
    log_in(page, live_server, "annotator")
    page.goto(f"{live_server.url}/projects/alpha/labeler/")
    page.get_by_role("button", name="Review next task").click()
    expect(page.get_by_role("heading", name=re.compile(task.instance_id))).to_be_visible()
    expect(page.locator("#shortcut-help")).to_contain_text("pick the n-th option")

    # From here on: keys only. The first field has the focus; j and k walk the fields in page order.
    order = spec.fields()
    expect(field(page, order[0])).to_be_focused()
    walk(page, order, order[0], "domain_l1")
    expect(field(page, "domain_l1")).to_be_focused()
    page.keyboard.press("5")  # the 5th family; no option 50-59 exists, so it is picked at once
    expect(field(page, "domain_l1").locator("input[value='database_storage']")).to_be_checked()
    expect(field(page, "domain_l1").locator(".prov")).to_have_text("human")
    # The tags now offered are database_storage's (and "unspecified"); the old web_backend tag is gone.
    db_tags = spec.tags_under("domain", "database_storage")
    expect(field(page, "domain_l2").locator("input")).to_have_count(len(db_tags) + 1)
    expect(field(page, "domain_l1")).to_be_focused()  # the re-rendered editor keeps the focus

    walk(page, order, "domain_l1", "code_language")  # 21 options: two quick digits pick the 12th
    page.keyboard.press("1")
    page.keyboard.press("2")
    expect(field(page, "code_language").locator("input[value='rust']")).to_be_checked()
    walk(page, order, "code_language", "domain_l2")  # pressed at once; the keys wait for the save in flight
    page.keyboard.press("2")
    expect(field(page, "domain_l2").locator(f"input[value='{db_tags[1]}']")).to_be_checked()
    expect(field(page, "domain_l2")).to_be_focused()
    page.keyboard.press("a")
    expect(page.locator(".messages")).to_contain_text(f"Submitted your label of {task.instance_id}")
    assert page.console_errors == []  # among others: no CSP violation

    label = Label.objects.get(task=task, origin=LabelOrigin.HUMAN, author=members["annotator"])
    assert label.status == LabelStatus.SUBMITTED
    assert label.values == {**STAGE_ONE, **STAGE_TWO, "domain_l1": "database_storage", "code_language": "rust",
                            "domain_l2": [db_tags[1]]}
    assert label.provenance["domain_l1"] == "human" and label.provenance["scope"] == "model"
    events = list(label.events.order_by("id").values_list("kind", "origin", "changes"))
    assert [(kind, origin) for kind, origin, _ in events] == [
        ("prefill", "model"), ("edit", "human"), ("edit", "human"), ("edit", "human"), ("submit", "human")]
    assert events[1][2] == {"domain_l1": ["web_backend", "database_storage"], "domain_l2": [["rest-api"], []]}
    assert events[2][2] == {"code_language": ["python", "rust"]}
    assert events[3][2] == {"domain_l2": [[], [db_tags[1]]]}
    assert ReviewClaim.objects.get(task=task).state == "done"

    page.wait_for_load_state("load")  # the reloaded page's keys are its script: a key pressed before is lost
    page.keyboard.press("n")  # nothing left
    expect(page.locator(".messages")).to_contain_text("Nothing left to review")


def test_hostile_task_and_model_text_never_runs(page, live_server, members, autolabeled):
    task = autolabeled(rationale=HOSTILE)
    task.problem_statement = f"It breaks: {HOSTILE}"
    task.patch = f"diff --git a/x b/x\n@@ -1 +1 @@\n-{HOSTILE}\n+ok\n"
    task.save()
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, live_server, "annotator")
    page.goto(f"{live_server.url}/projects/alpha/labeler/")
    page.get_by_role("button", name="Review next task").click()
    expect(page.locator(".problem")).to_have_text(f"It breaks: {HOSTILE}")
    expect(page.locator(".diff-removed")).to_have_text(f"-{HOSTILE}")
    expect(field(page, "scope").locator(".rationale")).to_have_text(HOSTILE)
    first = services.settings_for(task.project).taxonomy.definition.fields()[0]
    page.wait_for_load_state("load")  # the keys are the page's script: a key pressed before it runs is lost
    page.keyboard.press("3")  # a save re-renders the editor from the server: still text
    expect(field(page, first).locator(".prov")).to_have_text("human")
    expect(field(page, first).locator(".rationale")).to_have_text(HOSTILE)
    assert page.locator("main img, main script").count() == 0
    assert dialogs == [] and page.console_errors == []
