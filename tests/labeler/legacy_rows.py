"""The old row generators of the SWE Labeler's kinds (Python rows= kinds before issue 43: each label's events
replayed at export time), kept as the oracle of the kinds that read the recorded final labels in SQL
(tests/kind_oracle.py)."""

import hashlib
import heapq
import json
from collections.abc import Iterator

import pyarrow as pa

from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.training import messages_cell, record_batch, tools_cell
from dataplatform.exports.registry import ExportQuery
from dataplatform.exports.sources import keyset_pages
from labeler.export_filters import MULTI, SINGLE, STATUSES
from labeler.exporters import (
    MAX_BALANCED,
    TRAINING_STATUSES,
    TRAJECTORY_SCHEMA,
    UPSTREAM_LABEL,
    UPSTREAM_TEXT,
    _bounded,
    _bounds,
    _taxonomy,
    allot,
)
from labeler.final_labels import UPSTREAM_RATIONALE_OF
from labeler.models import Label, LabelEvent, LabelEventKind, LabelOrigin, SweTask, Taxonomy, Trajectory
from labeler.taxonomy import UNASSIGNED

TRAJECTORY_PAGE = 200  # the old generator read a few hundred trajectories at a time


def _replay(events: list[dict]) -> dict:
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


def _final_labels(ids: list[int], taxonomy: Taxonomy, event_bound: int, of: str = "task_id") -> dict[int, dict]:
    """task id (or, with of="trajectory_id", trajectory id) -> its final label as of `event_bound`, with
    review_status; those without one are absent."""
    labels = {row["id"]: row for row in Label.objects.filter(**{f"{of}__in": ids}, taxonomy=taxonomy).values(
        "id", of, "origin", "author__username", "model_id", "rationales", "l1_source")}
    events: dict[int, list[dict]] = {}
    for event in (LabelEvent.objects.filter(label_id__in=list(labels), id__lte=event_bound).order_by("id")
                  .values("id", "label_id", "kind", "origin", "changes")):
        events.setdefault(event["label_id"], []).append(event)
    final: dict[int, dict] = {}
    for label_id, label_events in events.items():
        label = labels[label_id] | _replay(label_events)
        current = final.get(label[of])
        if label["origin"] == LabelOrigin.HUMAN:
            if label["status"] == "submitted" and (current is None or current["review_status"] != "reviewed"
                                                   or current["last_event"] < label["last_event"]):
                final[label[of]] = label | {"review_status": "reviewed"}
        elif current is None or current["review_status"] != "reviewed":
            status = "auto" if label["status"] == "submitted" else "error"
            final[label[of]] = label | {"review_status": status}
    return final


TASK_FIELDS = ["id", "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
               "fail_to_pass", "pass_to_pass"]


def _task_pages(query: ExportQuery, fields: list[str] = TASK_FIELDS) -> Iterator[list[dict]]:
    """The project's tasks up to the data version, a page at a time (keyset on id)."""
    tasks = _bounded(SweTask, query)
    last = 0
    while True:
        page = list(tasks.filter(id__gt=last).order_by("id").values(*fields)[:query.batch_size])
        if not page:
            return
        last = page[-1]["id"]
        yield page


def _matches(row: dict, query: ExportQuery, statuses: list[str]) -> bool:
    if row["review_status"] not in statuses:
        return False
    if query.filters.get("category") and row["category"] not in query.filters["category"]:
        return False
    for condition in query.filters.get("where", []):
        field, _, wanted = condition.partition("=")
        value = row[field]
        if (wanted not in value) if isinstance(value, list) else value != wanted:
            return False
    return True


def _matching(query: ExportQuery, default_statuses: list[str],
              fields: list[str] = TASK_FIELDS) -> Iterator[list[tuple[dict, dict | None, dict]]]:
    """(task, its final label or None, its row) of every task that passes the filters, a page at a time; the
    task with `fields` (the record's `extra` only where a kind writes it: it can be large)."""
    taxonomy = _taxonomy(query)
    spec = taxonomy.definition
    _, event_bound = _bounds(query)
    statuses = query.filters.get("review_status") or default_statuses
    for page in _task_pages(query, fields):
        final = _final_labels([task["id"] for task in page], taxonomy, event_bound)
        triples = [(task, final.get(task["id"]), _row(task, final.get(task["id"]), taxonomy, spec)) for task in page]
        yield [triple for triple in triples if _matches(triple[2], query, statuses)]


def _rows(query: ExportQuery, default_statuses: list[str]) -> Iterator[list[dict]]:
    """Rows of every task that passes the filters, a page of tasks at a time."""
    for page in _matching(query, default_statuses):
        yield [row for _, _, row in page]


def _row(task: dict, label: dict | None, taxonomy: Taxonomy, spec) -> dict:
    return {
        "instance_id": task["instance_id"], "task_id": task["id"], "repo": task["repo"],
        "base_commit": task["base_commit"], "problem_statement": task["problem_statement"], "patch": task["patch"],
        "test_patch": task["test_patch"], "fail_to_pass": task["fail_to_pass"], "pass_to_pass": task["pass_to_pass"],
        **_label_columns(label, taxonomy, spec),
    }


def _label_columns(label: dict | None, taxonomy: Taxonomy, spec) -> dict:
    values = label["values"] if label else {}
    return {
        "taxonomy": taxonomy.name, "taxonomy_version": taxonomy.version,
        "category": spec.category_for(values) if label else UNASSIGNED,
        "review_status": label["review_status"] if label else "unlabeled",
        "label_origin": label["origin"] if label else None,
        "reviewer": label["author__username"] if label else None,
        "model_id": label["model_id"] if label else None,
        **{name: values.get(name) for name in SINGLE}, **{name: values.get(name) or [] for name in MULTI},
        "values_json": json.dumps(values, sort_keys=True),
        "rationales_json": json.dumps(label["rationales"] if label else {}, sort_keys=True),
        "provenance_json": json.dumps(label["provenance"] if label else {}, sort_keys=True),
    }


def label_rows(query: ExportQuery) -> Iterator[list[dict]]:
    return _rows(query, list(STATUSES))


def training_rows(query: ExportQuery) -> Iterator[list[dict]]:
    return _rows(query, TRAINING_STATUSES)


def balanced_rows(query: ExportQuery) -> Iterator[list[dict]]:
    """Two passes: rank every matching task within its category by a seeded hash and allot the
    requested size across categories as evenly as they allow (a category with fewer rows gives
    its share to the others); then write the chosen rows. Memory: at most `size` keys per category.
    The categories are the experts' (A, B, C): tasks no expert takes are left out, as the paper's
    Balanced mix does, unless `include_unassigned`; and by default every category gives the same number
    (the paper's mix is 516 of each: all of its smallest category), `allocation=fill` spreads a short
    category's share over the others instead."""
    size, seed = query.filters.get("size") or MAX_BALANCED, query.filters["seed"]
    smallest: dict[str, list[tuple[int, int]]] = {}  # category -> max-heap (negated) of the `size` lowest ranks
    available: dict[str, int] = {}
    for rows in training_rows(query):
        for row in rows:
            if row["category"] == UNASSIGNED and not query.filters.get("include_unassigned"):
                continue
            rank = int.from_bytes(hashlib.blake2b(f"{seed}:{row['instance_id']}".encode(), digest_size=8).digest(), "big")
            heap = smallest.setdefault(row["category"], [])
            available[row["category"]] = available.get(row["category"], 0) + 1
            if len(heap) < size:
                heapq.heappush(heap, (-rank, row["task_id"]))
            elif -heap[0][0] > rank:
                heapq.heapreplace(heap, (-rank, row["task_id"]))
    if query.filters.get("allocation", "equal") == "equal":
        categories = [c for c in _taxonomy(query).definition.categories if c != UNASSIGNED] + (
            [UNASSIGNED] if query.filters.get("include_unassigned") else [])
        wanted = [c for c in categories if not query.filters.get("category") or c in query.filters["category"]]
        share = min([size // max(1, len(wanted))] + [available.get(c, 0) for c in wanted])
        quota = {category: share for category in wanted}
    else:
        quota = allot(size, available)
    chosen = {task_id for category, heap in smallest.items()
              for _, task_id in sorted(heap, reverse=True)[:quota.get(category, 0)]}
    query.notes["sampling"] = {"method": "per category, the rows with the lowest blake2b(seed:instance_id)",
                               "seed": seed, "size": query.filters.get("size"), "available": available,
                               "taken": quota, "allocation": query.filters.get("allocation", "equal"),
                               "unassigned": "included" if query.filters.get("include_unassigned") else "excluded"}
    for rows in training_rows(query):
        yield [row for row in rows if row["task_id"] in chosen]


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) else None


def upstream_rows(query: ExportQuery) -> Iterator[list[dict]]:
    """Every labeled task (reviewed and auto-labeled by default) as the published labeler writes its output, so
    that its tools read ours: the task's fields (the ones it knows, from the record as imported) and `labels`
    with the final label's values and rationales."""
    for page in _matching(query, TRAINING_STATUSES, [*TASK_FIELDS, "extra"]):
        rows = []
        for task, label, ours in page:
            if label is None:
                continue
            extra, values, rationales = task["extra"] or {}, label["values"], label["rationales"] or {}
            topics = extra.get("repo_topics")
            rows.append({
                "instance_id": task["instance_id"], "repo": task["repo"], "problem_statement": task["problem_statement"],
                "patch": task["patch"], "test_patch": task["test_patch"], "base_commit": task["base_commit"],
                **{name: _text_or_none(extra.get(name)) for name in UPSTREAM_TEXT},
                "repo_topics": [str(t) for t in topics] if isinstance(topics, list) else None,
                "labels": {**{name: values.get(name) for name in UPSTREAM_LABEL.names
                              if name not in UPSTREAM_RATIONALE_OF and name != "raw_response"},
                           **{key: rationales.get(name, "") for key, name in UPSTREAM_RATIONALE_OF.items()},
                           "raw_response": ""},
                "task_id": task["id"], "category": ours["category"], "review_status": ours["review_status"]})
        yield rows


def trajectory_rows(query: ExportQuery) -> Iterator[pa.RecordBatch]:
    """Every trajectory that passes the filters (its final label decides category, status and `where`: its own,
    else its task's). One whose stored messages do not read (imported before they were stored normalised) is
    counted in the manifest's notes, not written."""
    taxonomy = _taxonomy(query)
    spec = taxonomy.definition
    _, event_bound = _bounds(query)
    statuses = query.filters.get("review_status") or list(STATUSES)
    for page in keyset_pages(_bounded(Trajectory, query), batch_size=max(1, min(TRAJECTORY_PAGE, query.batch_size))):
        own = _final_labels([t.pk for t in page], taxonomy, event_bound, of="trajectory_id")
        of_task = _final_labels([t.task_id for t in page if t.task_id is not None], taxonomy, event_bound)
        rows = []
        for trajectory in page:
            conversation = read_conversation(trajectory.messages, trajectory.tools).conversation
            if conversation is None:
                query.notes["trajectories_not_read"] = query.notes.get("trajectories_not_read", 0) + 1
                continue
            label, subject = own.get(trajectory.pk), "trajectory"
            if label is None:
                label, subject = of_task.get(trajectory.task_id), "task"
            row = {"trajectory_id": trajectory.trajectory_id, "instance_id": trajectory.instance_id,
                   "task_id": trajectory.task_id, "model": trajectory.model, "scaffold": trajectory.scaffold,
                   "source_format": trajectory.source_format,
                   "messages": messages_cell(conversation.for_training()), "tools": tools_cell(conversation.tools),
                   "label_subject": subject if label else None,
                   "l1_source": (label["l1_source"] or None) if label and subject == "trajectory" else None,
                   **_label_columns(label, taxonomy, spec)}
            if _matches(row, query, statuses):
                rows.append(row)
        yield record_batch(rows, TRAJECTORY_SCHEMA)
