"""Record kinds of the SWE Labeler: the label catalogue, three training views of it, and the trajectories.

- `swe.labels`: every task, one row, with its final label (if any) and where each field came from.
- `swe.pooled`: labeled tasks only (reviewed or auto-labeled by default), every category together.
- `swe.routed`: the same rows, written as one shard set per category (A, B, C, unassigned), so
  each category expert trains on its own files.
- `swe.balanced`: a category-balanced sample of a requested size, reproducible from its seed.
- `swe.trajectories`: every trajectory, one row, as a training conversation (reasoning, tool calls and
  results, a `tools` column: `dataplatform.conversations.training`), with its own final label (the trajectory
  mode), else its task's, so trajectories can be routed and balanced by category like their tasks.

A task's (trajectory's) final label is its newest submitted reviewer label, else the model's submitted label.
Labels change as reviewers edit them, so an export does not read their current state: it reads the final label
as of the export's data version (the highest event id when it started), which labeler/final_labels.py records
with every label event (`FinalLabel`, valid from its event to the next). A rerun of the same export therefore
writes the same rows, whatever happened since. The task kinds are values() kinds (on PostgreSQL read as Arrow);
swe.trajectories is a stored kind (exports/stored.py): each trajectory's messages are made once, its label is
read live.
"""

import dataclasses
import hashlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.db.models import Case, CharField, F, FilteredRelation, JSONField, Max, Q, TextField, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Coalesce, JSONObject
from django.db.models.lookups import Exact
from django.utils.translation import gettext_lazy, gettext_noop

from dataplatform.accounts.models import Project
from dataplatform.conversations.reading import read_conversation
from dataplatform.conversations.training import MESSAGES, TOOLS, messages_cell, tools_cell
from dataplatform.dbfunctions import JSONArrayContains, JSONStringOrNull, JSONTextList, JSONValue
from dataplatform.exports import stored
from dataplatform.exports.models import StoredRow
from dataplatform.exports.registry import ExportKind, ExportQuery, StoredRows, register
from dataplatform.exports.sources import read_batches, values_batches

from . import services
from .export_fields import TASK_LABEL_MEANINGS, TRAJECTORY_MEANINGS, UPSTREAM_MEANINGS
from .export_filters import MULTI, SINGLE, STATUSES, BalancedFilters, LabelFilters
from .models import LabelEvent, SweTask, Taxonomy, Trajectory
from .taxonomy import UNASSIGNED

TRAINING_STATUSES = ["reviewed", "auto"]
MAX_BALANCED = 10_000_000  # a balanced sample without a size: as many as the shares allow

TASK_COLUMNS = [
    ("instance_id", pa.string()), ("task_id", pa.int64()), ("repo", pa.string()), ("base_commit", pa.string()),
    ("problem_statement", pa.string()), ("patch", pa.string()), ("test_patch", pa.string()),
    ("fail_to_pass", pa.list_(pa.string())), ("pass_to_pass", pa.list_(pa.string())),
]
LABEL_COLUMNS = [
    ("taxonomy", pa.string()), ("taxonomy_version", pa.string()), ("category", pa.string()),
    ("review_status", pa.string()), ("label_origin", pa.string()), ("reviewer", pa.string()),
    ("model_id", pa.string()),
    *[(name, pa.string()) for name in SINGLE], *[(name, pa.list_(pa.string())) for name in MULTI],
    # Every field of the label (also those of taxonomies of another shape), its rationales, and who set each field.
    ("values_json", pa.string()), ("rationales_json", pa.string()), ("provenance_json", pa.string()),
]
SCHEMA = pa.schema(TASK_COLUMNS + LABEL_COLUMNS)


def data_version(project: Project) -> str:
    tasks = SweTask.objects.filter(project=project).aggregate(top=Max("id"))["top"] or 0
    events = _newest_event(LabelEvent.objects.filter(project=project, label__task__isnull=False))
    return f"{tasks}:{events}"


def _newest_event(events) -> int:
    """The id of the newest of `events` (the project's), 0 if none: walked newest first down the (project, id) index
    until one matches (0.05 ms beside 800k tasks' labels). Not as MAX(id): with the label joined, PostgreSQL sorted
    every event of the project for it (1.4 s); through the labels it took 0.5-4 s, through the tasks 1.3 s."""
    return events.order_by("-id").values_list("id", flat=True).first() or 0


def _bounds(query: ExportQuery) -> tuple[int, int]:
    tasks, events = (int(part) for part in (query.data_version or "0:0").split(":"))
    return tasks, events


def _taxonomy(query: ExportQuery) -> Taxonomy:
    if query.filters.get("taxonomy"):
        return Taxonomy.objects.get(pk=query.filters["taxonomy"])
    return services.settings_for(query.project).taxonomy


# --- the final label of each task, as of the data version ----------------------------------------------------

def _as_of(relation: str, taxonomy: Taxonomy, event_bound: int) -> FilteredRelation:
    """The item's FinalLabel under `taxonomy` valid at `event_bound` (at most one: they do not overlap)."""
    return FilteredRelation(relation, condition=Q(**{f"{relation}__taxonomy": taxonomy,
                                                     f"{relation}__since_event__lte": event_bound})
                            & (Q(**{f"{relation}__until_event__isnull": True})
                               | Q(**{f"{relation}__until_event__gt": event_bound})))


def _label_columns(final, taxonomy: Taxonomy) -> dict:
    """The LABEL_COLUMNS as expressions (to annotate in this order) on the final label: `final(name)` is the
    expression of its FinalLabel's field `name` (null where there is none: "unlabeled"). `label_columns`, its
    single and multi fields' document, comes first: the filters' label conditions read it."""
    return {
        "label_columns": final("columns"),
        "taxonomy": Value(taxonomy.name), "taxonomy_version": Value(taxonomy.version),
        "category": Coalesce(final("category"), Value(UNASSIGNED)),
        "review_status": Coalesce(final("review_status"), Value("unlabeled")),
        "label_origin": final("label_origin"), "reviewer": final("label__author__username"),
        "model_id": final("model_id"),
        **{name: KeyTextTransform(name, "label_columns") for name in SINGLE},
        **{name: Coalesce(KeyTransform(name, "label_columns"), Value([], output_field=JSONField()),
                          output_field=JSONField()) for name in MULTI},
        **{name: Coalesce(final(name), Value("{}"), output_field=TextField())
           for name in ("values_json", "rationales_json", "provenance_json")},
    }


def _bounded(model, query: ExportQuery):
    """The project's rows of `model` (tasks, trajectories) up to the data version's first bound, created
    between the filters' dates."""
    bound, _ = _bounds(query)
    rows = model.objects.filter(project=query.project, id__lte=bound)
    if query.filters.get("created_after"):
        rows = rows.filter(created_at__gte=query.filters["created_after"])
    if query.filters.get("created_before"):
        rows = rows.filter(created_at__lt=query.filters["created_before"])
    return rows


def _matching(rows, query: ExportQuery, default_statuses: list[str]):
    """`rows` (annotated with the label columns) that pass the filters: review status, category, label conditions."""
    statuses = query.filters.get("review_status") or default_statuses
    if not set(STATUSES) <= set(statuses):  # every status: no condition (the planner took it for 1 row in 250)
        rows = rows.filter(review_status__in=statuses)
    if query.filters.get("category"):
        rows = rows.filter(category__in=query.filters["category"])
    for condition in query.filters.get("where", []):
        field, _, wanted = condition.partition("=")
        # Exact as a plain comparison: the lookup a key transform brings would read `wanted` as JSON on SQLite.
        rows = rows.filter(JSONArrayContains("label_columns", field, wanted) if field in MULTI
                           else Exact(F(field), wanted))
    return rows


def _tasks(query: ExportQuery, default_statuses: list[str]):
    """The tasks that pass the filters, each with its final label's columns (`final`: its FinalLabel)."""
    taxonomy = _taxonomy(query)
    _, event_bound = _bounds(query)
    tasks = _bounded(SweTask, query).annotate(final=_as_of("final_labels", taxonomy, event_bound))
    return _matching(tasks.annotate(**_label_columns(lambda name: F(f"final__{name}"), taxonomy)), query,
                     default_statuses)


TASK_FIELDS = ["id", "instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
               "fail_to_pass", "pass_to_pass"]


def _values(query: ExportQuery, default_statuses: list[str]):
    return _tasks(query, default_statuses).values(*TASK_FIELDS, *(name for name, _ in LABEL_COLUMNS))


# --- the kinds ------------------------------------------------------------------------------------------

def label_values(query: ExportQuery):
    return _values(query, list(STATUSES))


def training_values(query: ExportQuery):
    return _values(query, TRAINING_STATUSES)


CANDIDATE_SCHEMA = pa.schema([("id", pa.int64()), ("instance_id", pa.string()), ("category", pa.string())])


def balanced_rows(query: ExportQuery) -> Iterator[list[dict]]:
    """Two passes: rank every matching task within its category by a seeded hash and allot the
    requested size across categories as evenly as they allow (a category with fewer rows gives
    its share to the others); then write the chosen rows. Memory: at most `size` keys per category.
    The categories are the experts' (A, B, C): tasks no expert takes are left out, as the paper's
    Balanced mix does, unless `include_unassigned`; and by default every category gives the same number
    (the paper's mix is 516 of each: all of its smallest category), `allocation=fill` spreads a short
    category's share over the others instead."""
    size, seed = query.filters.get("size") or MAX_BALANCED, query.filters["seed"]
    # category -> the ranks and task ids of its `size` lowest ranks (in numpy: 16 bytes a task, where a heap of Python
    # tuples took ~140 and made the worker grow with the project)
    smallest: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    available: dict[str, int] = {}
    candidates = _tasks(query, TRAINING_STATUSES)
    if not query.filters.get("include_unassigned"):
        candidates = candidates.exclude(category=UNASSIGNED)
    # The first pass reads three columns as Arrow (on PostgreSQL), in windows of the task ids as the kinds' reads do
    # (arrow_reads.ArrowKeysetReader): a keyset LIMIT over the label join leaves PostgreSQL free to join every later
    # task again, batch after batch.
    _, batches = values_batches(candidates.values("id", "instance_id", "category"), CANDIDATE_SCHEMA,
                                batch_size=query.batch_size, keys=_task_keys(query))
    for batch in batches:
        ranks = np.fromiter((int.from_bytes(hashlib.blake2b(f"{seed}:{instance_id}".encode(), digest_size=8).digest(),
                                            "big") for instance_id in batch.column("instance_id").to_pylist()),
                            dtype=np.uint64, count=batch.num_rows)
        task_ids = batch.column("id").to_numpy()
        categories = pc.dictionary_encode(batch.column("category"))
        codes = categories.indices.to_numpy()
        for code, category in enumerate(categories.dictionary.to_pylist()):
            mine = codes == code
            available[category] = available.get(category, 0) + int(mine.sum())
            kept = smallest.get(category, (np.empty(0, np.uint64), np.empty(0, np.int64)))
            smallest[category] = _lowest(np.concatenate([kept[0], ranks[mine]]),
                                         np.concatenate([kept[1], task_ids[mine]]), size)
    if query.filters.get("allocation", "equal") == "equal":
        categories = [c for c in _taxonomy(query).definition.categories if c != UNASSIGNED] + (
            [UNASSIGNED] if query.filters.get("include_unassigned") else [])
        wanted = [c for c in categories if not query.filters.get("category") or c in query.filters["category"]]
        share = min([size // max(1, len(wanted))] + [available.get(c, 0) for c in wanted])
        quota = {category: share for category in wanted}
    else:
        quota = allot(size, available)
    chosen = np.concatenate([np.empty(0, np.int64)] + [_lowest(ranks, task_ids, quota.get(category, 0))[1]
                                                       for category, (ranks, task_ids) in smallest.items()])
    query.notes["sampling"] = {"method": "per category, the rows with the lowest blake2b(seed:instance_id)",
                               "seed": seed, "size": query.filters.get("size"), "available": available,
                               "taken": quota, "allocation": query.filters.get("allocation", "equal"),
                               "unassigned": "included" if query.filters.get("include_unassigned") else "excluded"}
    chosen_ids = pa.array(np.sort(chosen), pa.int64())
    _, batches = read_batches(POOLED, query)
    for batch in batches:
        yield batch.filter(pc.is_in(batch.column("task_id"), value_set=chosen_ids))


def _lowest(ranks: np.ndarray, task_ids: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The `size` lowest ranks and their task ids, lowest first (a tie: the higher task id first)."""
    if len(ranks) <= size and size:
        return ranks, task_ids
    order = np.lexsort((-task_ids, ranks))[:size]
    return ranks[order], task_ids[order]


def allot(size: int, available: dict[str, int]) -> dict[str, int]:
    """Split `size` across categories as evenly as their counts allow (water-filling), remainder to the
    categories first in name order."""
    quota, remaining = {}, size
    pending = sorted(available, key=lambda category: (available[category], category))
    while pending:
        share, extra = divmod(remaining, len(pending))
        category = pending[0]
        if available[category] <= share:
            quota[category] = available[category]
            remaining -= available[category]
            pending.pop(0)
            continue
        for n, name in enumerate(sorted(pending)):
            quota[name] = share + (1 if n < extra else 0)
        break
    return quota


# --- the published labeler's output shape ---------------------------------------------------------------

# Its record (src/schema.py UnifiedInstance.to_dict()): the task's fields, then `labels` (LabelResult).
UPSTREAM_TEXT = ("dataset_source", "hints_text", "language", "created_at", "repo_description",
                 "repo_primary_language")
UPSTREAM_LABEL = pa.struct([
    *[(name, pa.string()) for name in ("code_language", "task_type_l1", "domain_l1", "task_spec_type",
                                       "dependency_context")],
    ("task_type_l2", pa.list_(pa.string())), ("domain_l2", pa.list_(pa.string())),
    *[(name, pa.string()) for name in ("scope", "cognitive_complexity", "time_estimate", "task_type_rationale",
                                       "domain_rationale", "l2_task_type_rationale", "l2_domain_rationale",
                                       "raw_response")],
])
UPSTREAM_SCHEMA = pa.schema([
    ("instance_id", pa.string()), ("dataset_source", pa.string()), ("repo", pa.string()),
    ("problem_statement", pa.string()), ("patch", pa.string()), ("test_patch", pa.string()),
    ("hints_text", pa.string()), ("language", pa.string()), ("created_at", pa.string()),
    ("base_commit", pa.string()), ("repo_description", pa.string()), ("repo_topics", pa.list_(pa.string())),
    ("repo_primary_language", pa.string()), ("labels", UPSTREAM_LABEL),
    ("task_id", pa.int64()), ("category", pa.string()), ("review_status", pa.string()),  # ours, beside theirs
])
def upstream_values(query: ExportQuery):
    """Every labeled task (reviewed and auto-labeled by default) as the published labeler writes its output, so
    that its tools read ours: the task's fields (the ones it knows, from the record as imported: text only) and
    `labels` with the final label's values and rationales (FinalLabel.upstream_labels)."""
    return _tasks(query, TRAINING_STATUSES).filter(final__label__isnull=False).values(
        "id", "instance_id", "repo", "problem_statement", "patch", "test_patch", "base_commit", "category",
        "review_status", **{UPSTREAM_RENAMED.get(name, name): JSONStringOrNull("extra", name) for name in UPSTREAM_TEXT},
        repo_topics=JSONTextList("extra", "repo_topics"), upstream_labels=F("final__upstream_labels"))


# values() names where a task's field takes the row's (Django refuses an annotation named like a field).
UPSTREAM_RENAMED = {"created_at": "extra_created_at"}


def _count(query: ExportQuery) -> int:
    task_bound, _ = _bounds(query)
    return SweTask.objects.filter(project=query.project, id__lte=task_bound).count()


# A kind's label follows the page's language; its description stays English (the manifest and the dataset card
# carry it: export files never change with the language), marked for the catalogs so a page can translate it.
# A final label is read as of the data version, but not all of a row is (hence no pinned exports of these kinds).
NOT_APPEND_ONLY = gettext_noop("a reviewer's name is read as it is now (an account renamed or deleted since changes "
                               "it), and without a taxonomy filter the project's current taxonomy is read.")
def _task_keys(query: ExportQuery):
    return _bounded(SweTask, query)


COMMON = {"schema": SCHEMA, "renamed": {"id": "task_id"}, "keys": _task_keys, "data_version": data_version, "group": "task",
          "group_by": ("instance_id",), "count": _count, "dedup_ignore": ("task_id",), "field_meanings": TASK_LABEL_MEANINGS,
          "not_append_only": NOT_APPEND_ONLY}

register(ExportKind(name="swe.labels", version=1, label=gettext_lazy("SWE labels (every task)"), values=label_values,
                    filters=LabelFilters, description=gettext_noop(
                        "One row per task with its final label (reviewer's, else the model's) and where each field "
                        "came from; unlabeled and failed tasks included."), **COMMON))
POOLED = register(ExportKind(name="swe.pooled", version=1, label=gettext_lazy("SWE labels, pooled"),
                             values=training_values,
                    filters=LabelFilters, description=gettext_noop(
                        "Labeled tasks of every category together (reviewed and auto-labeled by default)."), **COMMON))
register(ExportKind(name="swe.routed", version=1, label=gettext_lazy("SWE labels, routed by category"),
                    values=training_values, filters=LabelFilters, partition_field="category", description=gettext_noop(
                        "Labeled tasks as one shard set per category (A, B, C, unassigned) for category experts."),
                    **COMMON))
register(ExportKind(name="swe.upstream", version=1,
                    label=gettext_lazy("SWE labels, in the published labeler's output shape"),
                    values=upstream_values, keys=_task_keys, filters=LabelFilters, schema=UPSTREAM_SCHEMA,
                    data_version=data_version,
                    renamed={"id": "task_id", "upstream_labels": "labels",
                             **{name: row_name for row_name, name in UPSTREAM_RENAMED.items()}},
                    not_append_only=NOT_APPEND_ONLY,
                    group="task", group_by=("instance_id",), count=_count, dedup_ignore=("task_id",),
                    field_meanings=UPSTREAM_MEANINGS,
                    description=gettext_noop(
                        "Labeled tasks as the published SWE Labeler (alibaba/AgenticBigBang) writes its output: the "
                        "task's fields and `labels` (values and rationales), for its tools; import it back as tasks "
                        "to review its labels here.")))
register(ExportKind(name="swe.balanced", version=1, label=gettext_lazy("SWE labels, category-balanced sample"),
                    rows=balanced_rows, filters=BalancedFilters, description=gettext_noop(
                        "A sample of the requested size spread evenly over the categories, reproducible from its seed "
                        "(recorded in the manifest)."), **COMMON))


# --- trajectories, each with its own label or its task's -----------------------------------------------------

TRAJECTORY_SCHEMA = pa.schema([
    ("trajectory_id", pa.string()), ("instance_id", pa.string()), ("task_id", pa.int64()), ("model", pa.string()),
    ("scaffold", pa.string()), ("source_format", pa.string()),
    ("messages", MESSAGES),  # the trajectory in the training shape: reasoning, tool calls, tool results
    ("tools", TOOLS),  # the function schemas the agent was offered; null when none
    # Whose label the label columns are: "trajectory" (its own, the trajectory mode), "task" (its task's, where
    # the trajectory has none), or null (unlabeled); and where the trajectory label's level-1 values came from.
    ("label_subject", pa.string()), ("l1_source", pa.string()),
    *LABEL_COLUMNS,  # that final label, as swe.labels gives it ("unlabeled" when there is none)
])


def trajectory_data_version(project: Project) -> str:
    """"<highest trajectory id>:<highest label event id>": the trajectories, and their labels and their tasks'
    labels as of then."""
    trajectories = Trajectory.objects.filter(project=project).aggregate(top=Max("id"))["top"] or 0
    events = _newest_event(LabelEvent.objects.filter(project=project))
    return f"{trajectories}:{events}"


def _own_else_task(name: str) -> Case:
    """A FinalLabel field of the trajectory's own final label where it has one, else of its task's."""
    return Case(When(own__label__isnull=False, then=F(f"own__{name}")), default=F(f"of_task__{name}"))


def _trajectories(query: ExportQuery):
    """The trajectories up to the data version, each with its final label's columns (its own, else its task's)."""
    taxonomy = _taxonomy(query)
    _, event_bound = _bounds(query)
    return _bounded(Trajectory, query).annotate(
        own=_as_of("final_labels", taxonomy, event_bound), of_task=_as_of("task__final_labels", taxonomy, event_bound),
    ).annotate(**_label_columns(_own_else_task, taxonomy)).annotate(
        label_subject=Case(When(own__label__isnull=False, then=Value("trajectory")),
                           When(of_task__label__isnull=False, then=Value("task")), default=None,
                           output_field=CharField()),
        l1_source=Case(When(own__label__isnull=False, then=F("own__l1_source")), default=None,
                       output_field=CharField()))


# A trajectory's row is derived once (its messages in the training shape, made in Python: dataplatform.conversations)
# and stored (exports/stored.py): a trajectory never changes once imported. Its label columns, and its task's id
# (a task may be deleted), are read live, as of the export's data version, in one subquery: the live document.
STORED_COLUMNS = ("trajectory_id", "instance_id", "model", "scaffold", "source_format", "messages", "tools")
LIVE_COLUMNS = tuple(name for name in TRAJECTORY_SCHEMA.names if name not in STORED_COLUMNS)


def trajectory_sources(query: ExportQuery):
    """The trajectories up to the data version that pass the filters (their final label decides category, status
    and `where`: their own, else their task's). Without label filters no label is joined."""
    statuses = query.filters.get("review_status") or list(STATUSES)
    if set(statuses) >= set(STATUSES) and not query.filters.get("category") and not query.filters.get("where"):
        return _bounded(Trajectory, query)
    return _matching(_trajectories(query), query, list(STATUSES))


def derive_trajectories(project: Project, trajectory_ids: list[int]) -> Iterator[tuple[int, dict]]:
    """The stored part of each trajectory's row; one whose stored messages do not read (imported before they were
    stored normalised) gives none."""
    for row in Trajectory.objects.filter(project=project, pk__in=trajectory_ids).order_by("pk").values(
            "pk", "messages", "tools", *(name for name in STORED_COLUMNS if name not in ("messages", "tools"))):
        conversation = read_conversation(row["messages"], row["tools"]).conversation
        if conversation is not None:
            yield row.pop("pk"), {**row, "messages": messages_cell(conversation.for_training()),
                                  "tools": tools_cell(conversation.tools)}


def trajectory_live(query: ExportQuery):
    """The trajectories, each with its live columns as one JSON object (`live`)."""
    live = {name: JSONValue(F(name)) if name in MULTI else F(name) for name in LIVE_COLUMNS}
    return _trajectories(query).annotate(live=JSONObject(**live))


LABEL_FILTERS = ("review_status", "category", "where")


def note_unread(query: ExportQuery) -> None:
    """The manifest counts the trajectories up to the data version whose messages do not read (stored without a
    row), whatever their labels: every one is built first (as a build ahead does), then counted."""
    unfiltered = {name: value for name, value in query.filters.items() if name not in LABEL_FILTERS}
    if unfiltered != query.filters:  # else the export's own catch-up just built them (a second check: 0.16 s at 100k)
        stored.build(TRAJECTORIES, dataclasses.replace(query, filters=unfiltered))
    unread = StoredRow.objects.filter(kind=TRAJECTORIES.name, version=TRAJECTORIES.version, project=query.project,
                                      row__isnull=True, source_id__in=_bounded(Trajectory, query).values("pk")).count()
    if unread:
        query.notes["trajectories_not_read"] = unread


TRAJECTORIES = register(ExportKind(name="swe.trajectories", version=2, trl_format="language_modeling",
                    label=gettext_lazy("SWE trajectories, with their labels"),
                    stored=StoredRows(model=Trajectory, sources=trajectory_sources, derive=derive_trajectories,
                                      live_columns=LIVE_COLUMNS, live_document=trajectory_live, notes=note_unread), schema=TRAJECTORY_SCHEMA, data_version=trajectory_data_version,
                    not_append_only=NOT_APPEND_ONLY,
                    filters=LabelFilters, group="task", group_by=("instance_id", "trajectory_id"),
                    dedup_ignore=("task_id",),
                    count=lambda query: _bounded(Trajectory, query).count(), field_meanings=TRAJECTORY_MEANINGS,
                    description=gettext_noop(
                        "One row per trajectory as a training conversation (messages with reasoning_content and "
                        "tool_calls, a tools column) with its own final label (the trajectory mode), else its task's "
                        "(label_subject says which); every review status by default.")))
