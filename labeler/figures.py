"""The SWE Labeler's kept figures (dataplatform/tallies), so its pages read a few rows instead of recounting the
project: tasks and trajectories by review state, review claims by state, and the agreement tables
(labeler/agreement.py).

Review state: an item's labels under a taxonomy make three flags, auto-labeled (a submitted model label), failed
(a model label in error) and reviewed (a submitted reviewer label); the tally counts items per taxonomy and set of
flags ("<taxonomy id>|auto+reviewed"; no flags: not kept, it is "all" minus the rest). Every label change passes
through `final_labels.write_event` (after `final_labels.lock_item` took the item's labels as they were), which
calls `label_changed`; imports add to "all"; the review queue's services move claims between states."""

from collections import Counter

from django.db import connection
from django.db.models import Count

from dataplatform.tallies import registry, selectors, services
from dataplatform.tallies.registry import Figure

from . import agreement
from .agreement import LABEL_COLUMNS
from .models import Label, LabelOrigin, LabelStatus, ReviewClaim, SweTask, Trajectory, TrajectoryReviewClaim

FLAGS = (("auto", LabelOrigin.MODEL, LabelStatus.SUBMITTED), ("error", LabelOrigin.MODEL, LabelStatus.ERROR),
         ("reviewed", LabelOrigin.HUMAN, LabelStatus.SUBMITTED))
ALL = "all"


def _recount_states(project_id: int, model) -> dict[str, Figure]:
    """Items per taxonomy and flags, in SQL: one row per (item, taxonomy) inside, one per group out."""
    item = "task_id" if model is SweTask else "trajectory_id"
    flags = ", ".join(f"MAX(CASE WHEN l.origin = %s AND l.status = %s THEN 1 ELSE 0 END) AS {name}"
                      for name, _, _ in FLAGS)
    names = ", ".join(name for name, _, _ in FLAGS)
    sql = (f"SELECT taxonomy_id, {names}, COUNT(*) FROM (SELECT l.{item}, l.taxonomy_id, {flags} "
           f"FROM {Label._meta.db_table} l WHERE l.project_id = %s AND l.{item} IS NOT NULL "
           f"GROUP BY l.{item}, l.taxonomy_id) AS per_item GROUP BY taxonomy_id, {names}")
    params = [value for _, origin, status in FLAGS for value in (origin, status)] + [project_id]
    figures = {ALL: Figure(model.objects.filter(project_id=project_id).count())}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for taxonomy_id, *present, n in cursor.fetchall():
            key = state_key(taxonomy_id, {name for (name, _, _), on in zip(FLAGS, present, strict=True) if on})
            if key:
                figures[key] = Figure(n)
    return figures


TASK_STATES = registry.define("labeler.task_states", tables=(SweTask, Label),
                              recount=lambda project_id: _recount_states(project_id, SweTask))
TRAJECTORY_STATES = registry.define("labeler.trajectory_states", tables=(Trajectory, Label),
                                    recount=lambda project_id: _recount_states(project_id, Trajectory))


def state_key(taxonomy_id: int, flags: set[str]) -> str:
    """The tally key of a set of flags under a taxonomy; "" for none (not kept)."""
    return f"{taxonomy_id}|{'+'.join(name for name, _, _ in FLAGS if name in flags)}" if flags else ""


def flags_of(labels: list[dict]) -> set[str]:
    """The review flags of one item's labels under one taxonomy (rows with origin and status)."""
    return {name for name, origin, status in FLAGS
            if any(row["origin"] == origin and row["status"] == status for row in labels)}


def items_added(project_id: int, model, n: int) -> None:
    """An import wrote `n` tasks (or trajectories): in its transaction."""
    services.add(project_id, TASK_STATES if model is SweTask else TRAJECTORY_STATES, {ALL: n})


def labels_of(item: SweTask | Trajectory) -> list[dict]:
    """The item's labels under every taxonomy, as the figures read them (taken before and after each change)."""
    field = "trajectory" if isinstance(item, Trajectory) else "task"
    return list(Label.objects.filter(**{field: item}).order_by("id").values(*LABEL_COLUMNS))


def label_changed(label: Label, before: list[dict]) -> None:
    """After a change to `label` (its item's labels were `before`, which is brought up to date for the next change
    in the same transaction): the item's review state and, for a task, its agreement figures move with it."""
    item = label.item
    after = labels_of(item)
    taxonomy_id = label.taxonomy_id
    old = [row for row in before if row["taxonomy_id"] == taxonomy_id]
    new = [row for row in after if row["taxonomy_id"] == taxonomy_id]
    before[:] = after
    was, now = state_key(taxonomy_id, flags_of(old)), state_key(taxonomy_id, flags_of(new))
    if was != now:
        name = TRAJECTORY_STATES if isinstance(item, Trajectory) else TASK_STATES
        services.add(item.project_id, name, {key: change for key, change in ((was, -1), (now, 1)) if key})
    if label.task_id is not None:
        spec = label.taxonomy.definition
        change = agreement.contribution(new, spec, taxonomy_id)
        change.subtract(agreement.contribution(old, spec, taxonomy_id))
        services.add(item.project_id, agreement.AGREEMENT, {key: n for key, n in change.items() if n})


def item_count(project_id: int, *, trajectories: bool = False) -> int:
    """How many tasks (or trajectories) the project has, from the kept tally."""
    return selectors.counts(project_id, TRAJECTORY_STATES if trajectories else TASK_STATES).get(ALL, 0)


def state_counts(project_id: int, taxonomy_id: int, *, trajectories: bool = False) -> dict[str, int]:
    """How many items there are, and per review state and flag under the taxonomy, from the kept tally:
    {all, auto, errors, reviewed} as the overview shows them, and under "states" the items each of the lists'
    state filters (REVIEW_STATES; "" for none) matches."""
    kept = selectors.counts(project_id, TRAJECTORY_STATES if trajectories else TASK_STATES)
    counts = Counter({"all": kept.get(ALL, 0)})
    prefix = f"{taxonomy_id}|"
    for key, n in kept.items():
        if not key.startswith(prefix) or not n:
            continue
        flags = set(key[len(prefix):].split("+"))
        counts["auto"] += n if "auto" in flags else 0
        counts["errors"] += n if "error" in flags else 0
        counts["reviewed"] += n if "reviewed" in flags else 0
        counts["state:auto"] += n if "auto" in flags and "reviewed" not in flags else 0
        counts["labeled"] += n
    counts["state:unlabeled"] = counts["all"] - counts.pop("labeled", 0)
    states = {"": counts["all"], "unlabeled": counts["state:unlabeled"], "auto": counts["state:auto"],
              "error": counts["errors"], "reviewed": counts["reviewed"]}
    return {key: counts[key] for key in ("all", "auto", "errors", "reviewed")} | {"states": states}


# --- review claims ---------------------------------------------------------------------------------

QUEUE_OF = {ReviewClaim: "tasks", TrajectoryReviewClaim: "trajectories"}


def _recount_claims(project_id: int) -> dict[str, Figure]:
    figures = {}
    for model, queue in QUEUE_OF.items():
        for row in model.objects.filter(project_id=project_id).values("state").annotate(n=Count("id")).order_by():
            figures[f"{queue}|{row['state']}"] = Figure(row["n"])
    return figures


CLAIM_STATES = registry.define("labeler.review_claims", tables=(ReviewClaim, TrajectoryReviewClaim),
                               recount=_recount_claims)


def claims_counter(claim_model, project_id: int):
    """What dataplatform.claims calls, in the claim's transaction, with each change of a claim's state
    ({"claims|<state>": ±1}): the queue's kept counts move with it."""
    queue = QUEUE_OF[claim_model]

    def counted(change: dict[str, int]) -> None:
        services.add(project_id, CLAIM_STATES,
                     {f"{queue}|{key.removeprefix('claims|')}": delta for key, delta in change.items()})
    return counted


def claim_counts(project_id: int) -> dict[str, dict[str, int]]:
    """queue ("tasks", "trajectories") -> {state: claims}, from the kept tally."""
    counts: dict[str, dict[str, int]] = {queue: {} for queue in QUEUE_OF.values()}
    for key, n in selectors.counts(project_id, CLAIM_STATES).items():
        queue, state = key.split("|", 1)
        counts[queue][state] = n
    return counts
