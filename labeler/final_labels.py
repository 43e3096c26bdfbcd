"""The final label of a task or a trajectory, kept in step with its label events (issue 43: compute once, read many).

A task's (trajectory's) final label under a taxonomy is its newest submitted reviewer label, else the model's
label; its values are replayed from the label's events. Every service that writes a label event records, in the
same transaction, what the final label became as of that event (`record`): a `FinalLabel` row, valid from the
event up to the next event of the item's labels. An export bounded by an event id (its data version) reads, per
item, the one row valid at that bound, in SQL (labeler/exporters.py), instead of replaying every label in Python.

`derive` is the replay itself, for the rows `record` writes and for the migration that wrote them for the events
there were. It reads plain dicts, so that the migration can give it its historical models' rows.
"""

import json

from django.db import transaction

from . import figures
from .export_filters import MULTI, SINGLE
from .models import FinalLabel, Label, LabelEvent, LabelEventKind, LabelOrigin, SweTask, Trajectory
from .taxonomy import UNASSIGNED, TaxonomySpec

LABEL_FIELDS = ("id", "origin", "author_id", "model_id", "rationales", "l1_source")
EVENT_FIELDS = ("id", "label_id", "kind", "origin", "changes")
# The published labeler's `labels` record (labeler/exporters.py UPSTREAM_LABEL): its values, its rationales.
UPSTREAM_VALUES = ("code_language", "task_type_l1", "domain_l1", "task_spec_type", "dependency_context",
                   "task_type_l2", "domain_l2", "scope", "cognitive_complexity", "time_estimate")
UPSTREAM_RATIONALE_OF = {"task_type_rationale": "task_type_l1", "domain_rationale": "domain_l1",
                         "l2_task_type_rationale": "task_type_l2", "l2_domain_rationale": "domain_l2"}


def replay(events: list[dict]) -> dict:
    """A label's state after its events: values, who set each field, and its status."""
    state = {"values": {}, "provenance": {}, "status": None}
    for event in events:
        if event["kind"] in (LabelEventKind.AUTO, LabelEventKind.PREFILL, LabelEventKind.EDIT):
            for name, (_, new) in event["changes"].items():
                state["values"][name] = new
                state["provenance"][name] = event["origin"]
        if event["kind"] in (LabelEventKind.AUTO, LabelEventKind.SUBMIT):
            state["status"] = "submitted"
        elif event["kind"] == LabelEventKind.AUTO_ERROR:
            state["status"] = "error"
        state["last_event"] = event["id"]
    return state


def final_label(labels: dict[int, dict], events: list[dict]) -> dict | None:
    """The final label of one item from its labels (id -> LABEL_FIELDS) and their events in id order: the label
    with its replayed state and review_status (reviewed, auto or error), or None."""
    by_label: dict[int, list[dict]] = {}
    for event in events:
        by_label.setdefault(event["label_id"], []).append(event)
    final = None
    for label_id, label_events in by_label.items():
        label = labels[label_id] | replay(label_events)
        if label["origin"] == LabelOrigin.HUMAN:
            if label["status"] == "submitted" and (final is None or final["review_status"] != "reviewed"
                                                   or final["last_event"] < label["last_event"]):
                final = label | {"review_status": "reviewed"}
        elif final is None or final["review_status"] != "reviewed":
            final = label | {"review_status": "auto" if label["status"] == "submitted" else "error"}
    return final


def columns(label: dict | None, spec: TaxonomySpec) -> dict:
    """A FinalLabel's fields for `label` (final_label's answer) under the taxonomy `spec`."""
    if label is None:
        return {"label_id": None, "review_status": "unlabeled", "category": UNASSIGNED, "label_origin": None,
                "model_id": None, "l1_source": None, "columns": _value_columns({}), "upstream_labels": None,
                "values_json": "{}", "rationales_json": "{}", "provenance_json": "{}"}
    values, rationales = label["values"], label["rationales"] or {}
    return {
        "label_id": label["id"], "review_status": label["review_status"], "category": spec.category_for(values),
        "label_origin": label["origin"], "model_id": label["model_id"], "l1_source": label["l1_source"] or None,
        "columns": _value_columns(values),
        "upstream_labels": {**{name: values.get(name) for name in UPSTREAM_VALUES},
                            **{key: rationales.get(name, "") for key, name in UPSTREAM_RATIONALE_OF.items()},
                            "raw_response": ""},
        "values_json": json.dumps(values, sort_keys=True),
        "rationales_json": json.dumps(label["rationales"], sort_keys=True),
        "provenance_json": json.dumps(label["provenance"], sort_keys=True)}


def _value_columns(values: dict) -> dict:
    return {**{name: values.get(name) for name in SINGLE}, **{name: values.get(name) or [] for name in MULTI}}


def derive(labels: dict[int, dict], events: list[dict], spec: TaxonomySpec) -> list[tuple[int, dict]]:
    """(event id, FinalLabel fields as of it) for every event of one item's labels (id order)."""
    return [(event["id"], columns(final_label(labels, events[:n + 1]), spec)) for n, event in enumerate(events)]


def lock_item(item: SweTask | Trajectory) -> list[dict]:
    """Called first in a transaction that will write a label event of `item`: its events are then numbered in the
    order their transactions commit, so each one's `record` sees every event before it. Returns the item's labels
    as they are under the lock, what `write_event` moves the kept figures from (labeler/figures.py)."""
    type(item).objects.select_for_update().filter(pk=item.pk).values_list("pk").first()
    return figures.labels_of(item)


def write_event(*, label: Label, before: list[dict], **fields) -> LabelEvent:
    """Write a label event (`fields`: kind, origin, actor, changes), record the final label it makes and move the
    kept figures (review states, agreement) from `before`, the item's labels lock_item returned."""
    event = LabelEvent.objects.create(label=label, project_id=label.project_id, **fields)
    record(label=label, event=event)
    figures.label_changed(label, before)
    return event


def record(*, label: Label, event: LabelEvent) -> FinalLabel:
    """In the transaction that wrote `event` (after lock_item): the final label of the label's item under its
    taxonomy as of the event, valid from it on (the row valid until then ends there). Three queries: the item's
    events with their labels, the end of the row before, the new row."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("final_labels.record must run in the transaction that wrote the event.")
    item = {"task_id": label.task_id} if label.task_id is not None else {"trajectory_id": label.trajectory_id}
    of_label = [f"label__{name}" for name in LABEL_FIELDS[1:]]
    rows = list(LabelEvent.objects.filter(**{f"label__{key}": value for key, value in item.items()},
                                          label__taxonomy_id=label.taxonomy_id, id__lte=event.pk)
                .order_by("id").values(*EVENT_FIELDS, *of_label))
    labels = {row["label_id"]: {"id": row["label_id"], **{name: row[f"label__{name}"] for name in LABEL_FIELDS[1:]}}
              for row in rows}
    events = [{name: row[name] for name in EVENT_FIELDS} for row in rows]
    FinalLabel.objects.filter(**item, taxonomy_id=label.taxonomy_id, until_event=None).update(until_event=event.pk)
    # label.taxonomy: the services' own instance (its parsed definition cached), no query.
    return FinalLabel.objects.create(**item, taxonomy_id=label.taxonomy_id, since_event=event.pk,
                                     **columns(final_label(labels, events), label.taxonomy.definition))
