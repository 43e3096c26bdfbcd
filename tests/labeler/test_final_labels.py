"""The final label recorded with every label event (labeler/final_labels.py): one row per event, each valid up to
the next; the migration that records them for the events there were writes the rows the services write."""

import importlib

import pytest
from django.apps import apps
from django.db import transaction

from labeler import final_labels, services
from labeler.models import FinalLabel, Label, LabelEvent

from ..doubles import RecordingProgress
from .conftest import STAGE_ONE, STAGE_TWO, answer

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("labeler.migrations.0010_final_labels")
FIELDS = ("task_id", "trajectory_id", "taxonomy_id", "since_event", "until_event", "label_id", "review_status",
          "category", "label_origin", "model_id", "l1_source", "columns", "upstream_labels", "values_json",
          "rationales_json", "provenance_json")


@pytest.fixture
def reviewed(project, make_tasks, scripted, members):
    tasks = make_tasks(3)
    scripted({"stage1": [answer(STAGE_ONE)] * 3, "stage2": [answer(STAGE_TWO)] * 3})
    services.autolabel_project(project=project, progress=RecordingProgress())
    for reviewer in (members["annotator"], members["curator"]):
        label = services.start_review(item=tasks[0], reviewer=reviewer)
        label = services.edit_label(label=label, version=label.version, actor=reviewer,
                                    changes={"scope": "multi-file"})
        services.submit_label(label=label, version=label.version, actor=reviewer)
    return tasks


def recorded() -> list[tuple]:
    return list(FinalLabel.objects.order_by("task_id", "trajectory_id", "since_event").values_list(*FIELDS))


def test_every_event_records_its_item_s_final_label_valid_until_the_next(reviewed):
    rows = list(FinalLabel.objects.filter(task=reviewed[0]).order_by("since_event"))
    events = list(LabelEvent.objects.filter(label__task=reviewed[0]).order_by("id").values_list("id", flat=True))
    assert [row.since_event for row in rows] == events
    assert [row.until_event for row in rows] == [*events[1:], None]
    # The model's label, then each reviewer's: the later submitted review is the final label.
    assert [row.review_status for row in rows][0] == "auto" and rows[-1].review_status == "reviewed"
    assert rows[-1].label == Label.objects.get(task=reviewed[0], author__username="curator")
    assert rows[-1].columns["scope"] == "multi-file" and '"scope": "human"' in rows[-1].provenance_json


def test_the_migration_records_what_the_services_record(reviewed):
    written = recorded()
    assert len(written) == LabelEvent.objects.count() > 3
    FinalLabel.objects.all().delete()
    MIGRATION.record_final_labels(apps, None)
    assert recorded() == written


@pytest.mark.django_db(transaction=True)  # the test's own transaction would hide that there is none
def test_recording_needs_the_event_s_transaction(reviewed):
    label = Label.objects.filter(task=reviewed[1]).first()
    event = LabelEvent.objects.filter(label=label).first()
    with transaction.atomic():
        final_labels.record(label=label, event=event)  # inside one: fine
    with pytest.raises(RuntimeError):
        final_labels.record(label=label, event=event)
