"""`make run`'s demo end to end: bootstrap_demo, then a live Celery worker runs the demo.seed job with the real
embedded model until every workflow shows the model's output (tests/demo/ covers the bootstrap alone)."""

import io
import time

import pytest
from django.core.management import call_command

from annotate.models import Item
from corpora.aed import selectors as aed_selectors
from corpora.aed.models import Case, ReplayRun
from corpora.atd.models import Score, Selection
from dataplatform import demo
from dataplatform.accounts.models import Project
from dataplatform.jobs.models import Job, JobState
from labeler.models import Label, LabelOrigin, LabelStatus

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The demo's budget is two minutes on 2 cores; CI shares its cores with nothing else, a developer's machine
# may not.
TIMEOUT = 400


def test_the_demo_fills_every_workflow_through_a_live_worker(settings, tmp_path, start_worker):
    worker = start_worker()  # with the real DATA_DIR (the converted model), read before the override below
    settings.DATA_DIR = tmp_path  # where bootstrap_demo keeps the login
    out = io.StringIO()
    began = time.monotonic()
    call_command("bootstrap_demo", stdout=out)
    seed = Job.objects.get(kind=demo.SEED_KIND)
    deadline = time.monotonic() + TIMEOUT
    while not seed.is_terminal and time.monotonic() < deadline:
        time.sleep(0.5)
        seed.refresh_from_db()
    took = time.monotonic() - began
    assert seed.state == JobState.SUCCEEDED, f"{seed.state} after {took:.0f} s: {seed.error}\n{worker.log()}"
    print(f"demo ready in {took:.1f} s: {seed.result['jobs']}")

    project = Project.objects.get(slug="demo")
    assert all(part.ready(project) for part in demo.parts())
    assert [run["state"] for run in seed.result["jobs"]] == [JobState.SUCCEEDED] * 4
    items = Item.objects.filter(project=project)
    assert items.count() == 6 and all(item.rollout["token_ids"] for item in items)
    labels = Label.objects.filter(task__project=project, origin=LabelOrigin.MODEL)
    assert labels.count() >= 3 and labels.filter(status=LabelStatus.SUBMITTED).exists()
    later = Job.objects.get(pk__in=seed.result["later"])  # the other 21 tasks, in the background
    assert later.kind == "labeler.autolabel" and later.params["limit"] is None
    case = Case.objects.get(trace__project=project)
    assert ReplayRun.objects.filter(replay__proposal__case=case).count() == 12
    assert aed_selectors.grade_of(case, aed_selectors.grading_of(project)) in {"A", "B", "D"}
    selection = Selection.objects.get(project=project)
    assert Score.objects.filter(run=selection.run).count() == 12 and selection.size >= 1
    assert "Demo ready: data in all 4 workflows" in worker.log()

    # Run again, the demo is found: nothing new is queued.
    jobs = Job.objects.count()
    call_command("bootstrap_demo", stdout=io.StringIO())
    assert Job.objects.count() == jobs
