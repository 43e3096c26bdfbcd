"""Reads of the SWE Labeler, scoped to the requesting user.

Curators and admins see every task, trajectory and label of their projects. A reviewer (annotator role)
sees only the tasks and trajectories they have claimed, and on those only the model's label and their own.
Taxonomies are platform-wide reference data (like a schema): any member of a project may read them.
"""

from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, role_in, visible_projects
from dataplatform.dbfunctions import JSONArrayContains, RowComparison
from dataplatform.errors import Refused
from dataplatform.jobs.models import TERMINAL_STATES, Job, JobState

from . import figures
from .models import (
    Label,
    LabelOrigin,
    LabelStatus,
    ReviewClaim,
    ReviewClaimState,
    SweTask,
    Taxonomy,
    Trajectory,
    TrajectoryReviewClaim,
)

# Review status of a task, for filters: computed from its labels under the pinned taxonomy.
REVIEW_STATES = ("unlabeled", "auto", "error", "reviewed")


def taxonomies_visible_to(user, *, token: ApiToken | None = None) -> QuerySet[Taxonomy]:
    if not visible_projects(user, token=token).exists():
        return Taxonomy.objects.none()
    return Taxonomy.objects.all()


def tasks_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[SweTask]:
    """Curators: the project's tasks. Reviewers: the tasks they claimed. Anyone else: none."""
    if not visible_projects(user, token=token).filter(pk=project.pk).exists():
        return SweTask.objects.none()
    role = role_in(user, project)
    tasks = SweTask.objects.filter(project=project)
    if role in CAN_CURATE:
        return tasks
    if role in CAN_ANNOTATE:
        return tasks.filter(review_claims__reviewer=user).distinct()
    return SweTask.objects.none()


def task_for(user, project: Project, task_id: int, *, token: ApiToken | None = None) -> SweTask:
    task = tasks_visible_to(user, project, token=token).filter(pk=task_id).first()
    if task is None:
        raise Http404(gettext("No such task."))
    return task


def trajectories_visible_to(user, project: Project, *, token: ApiToken | None = None) -> QuerySet[Trajectory]:
    """Curators: the project's trajectories. Reviewers: the trajectories they claimed. Anyone else: none."""
    if not visible_projects(user, token=token).filter(pk=project.pk).exists():
        return Trajectory.objects.none()
    role = role_in(user, project)
    trajectories = Trajectory.objects.filter(project=project)
    if role in CAN_CURATE:
        return trajectories
    if role in CAN_ANNOTATE:
        return trajectories.filter(review_claims__reviewer=user).distinct()
    return Trajectory.objects.none()


def trajectory_for(user, project: Project, trajectory_id: int, *, token: ApiToken | None = None) -> Trajectory:
    trajectory = trajectories_visible_to(user, project, token=token).select_related("task").filter(
        pk=trajectory_id).first()
    if trajectory is None:
        raise Http404(gettext("No such trajectory."))
    return trajectory


def _visible_items(user, project: Project, item, *, token: ApiToken | None = None) -> QuerySet:
    visible = trajectories_visible_to if isinstance(item, Trajectory) else tasks_visible_to
    return visible(user, project, token=token)


def labels_of(user, item: SweTask | Trajectory) -> QuerySet[Label]:
    """A task's (or trajectory's) labels the user may see (the item itself must already be visible to them)."""
    field = "trajectory" if isinstance(item, Trajectory) else "task"
    labels = (Label.objects.filter(**{field: item}).select_related("taxonomy", "author")
              .order_by("taxonomy_id", "origin", "id"))
    if role_in(user, item.project) in CAN_CURATE:
        return labels
    return labels.filter(Q(origin=LabelOrigin.MODEL) | Q(author=user))


def label_for_writing(user, label_id: int, *, token: ApiToken | None = None) -> Label:
    """A reviewer's own label, in a project they can still annotate in."""
    projects = visible_projects(user, roles=CAN_ANNOTATE, token=token)
    label = (Label.objects.filter(project__in=projects, pk=label_id,
                                  origin=LabelOrigin.HUMAN, author=user)
             .select_related("taxonomy", "task", "task__project", "trajectory", "trajectory__project").first())
    if label is None:
        raise Http404(gettext("No such label."))
    return label


def label_for(user, label_id: int, *, token: ApiToken | None = None) -> Label:
    label = Label.objects.filter(pk=label_id).select_related(
        "taxonomy", "task", "task__project", "trajectory", "trajectory__project", "author").first()
    if label is None or not labels_of(user, label.item).filter(pk=label.pk).exists() or not _visible_items(
            user, label.item.project, label.item, token=token).filter(pk=label.item.pk).exists():
        raise Http404(gettext("No such label."))
    return label


def _review_flags(model, taxonomy: Taxonomy) -> dict[str, Exists]:
    # The item's project too: the planner may then walk the project's labels of one state in item order (the
    # label_project_* indexes) instead of every project's labels under the taxonomy.
    labels = Label.objects.filter(**{"trajectory" if model is Trajectory else "task": OuterRef("pk")},
                                  project=OuterRef("project"), taxonomy=taxonomy)
    return {"has_auto": Exists(labels.filter(origin=LabelOrigin.MODEL, status=LabelStatus.SUBMITTED)),
            "has_error": Exists(labels.filter(origin=LabelOrigin.MODEL, status=LabelStatus.ERROR)),
            "reviewed": Exists(labels.filter(origin=LabelOrigin.HUMAN, status=LabelStatus.SUBMITTED))}


def with_review_state(items: QuerySet, taxonomy: Taxonomy) -> QuerySet:
    """Annotate each task (or trajectory) with booleans: auto-labeled, auto-label failed, reviewed (a submitted
    human label)."""
    return items.annotate(**_review_flags(items.model, taxonomy))


def review_state_of(rows: list, taxonomy: Taxonomy) -> list:
    """Set the flags `with_review_state` annotates on a page of rows, in one query for the page: a list's page query
    then has no EXISTS columns, which the planner may hash over every label of the project."""
    model = type(rows[0]) if rows else SweTask
    field = "trajectory_id" if model is Trajectory else "task_id"
    found: dict[int, set] = {}
    for item_id, origin, status in Label.objects.filter(**{f"{field}__in": [row.pk for row in rows]},
                                                        taxonomy=taxonomy).values_list(field, "origin", "status"):
        found.setdefault(item_id, set()).add((origin, status))
    for row in rows:
        pairs = found.get(row.pk, set())
        row.has_auto = (LabelOrigin.MODEL, LabelStatus.SUBMITTED) in pairs
        row.has_error = (LabelOrigin.MODEL, LabelStatus.ERROR) in pairs
        row.reviewed = (LabelOrigin.HUMAN, LabelStatus.SUBMITTED) in pairs
    return rows


def filter_by_state(items: QuerySet, taxonomy: Taxonomy, state: str, *, annotate: bool = True) -> QuerySet:
    """Tasks (or trajectories) narrowed to `state` (REVIEW_STATES; "" any), annotated with their review state
    unless `annotate` is False (a page then sets it with review_state_of)."""
    flags = _review_flags(items.model, taxonomy)
    if annotate:
        items = items.annotate(**flags)
    if state == "unlabeled":
        items = items.filter(~flags["has_auto"], ~flags["has_error"], ~flags["reviewed"])
    elif state == "auto":
        items = items.filter(flags["has_auto"], ~flags["reviewed"])
    elif state == "error":
        items = items.filter(flags["has_error"])
    elif state == "reviewed":
        items = items.filter(flags["reviewed"])
    return items


# The review states a list finds from the labels that make them (their origin and status), in item order.
STATE_LABELS = {"auto": (LabelOrigin.MODEL, LabelStatus.SUBMITTED), "error": (LabelOrigin.MODEL, LabelStatus.ERROR),
                "reviewed": (LabelOrigin.HUMAN, LabelStatus.SUBMITTED)}


def state_page_ids(project: Project, model, taxonomy: Taxonomy, state: str, after: int | None, n: int) -> list[int]:
    """The ids of the first `n` tasks (or trajectories) of the project in `state` (STATE_LABELS) after id `after`,
    read from the project's labels that make the state, in item order (the label_project_* indexes): a page costs
    about its own rows whether the state is common or rare. A walk of the items that probes each one's labels costs
    the whole project when the state is rare (the failed labels of a million tasks), and the planner cannot tell
    which of the two a state is."""
    field = "trajectory_id" if model is Trajectory else "task_id"
    origin, status = STATE_LABELS[state]
    key = (project.pk, taxonomy.pk, origin, status, after or 0)
    labels = Label.objects.filter(
        # The row comparison only the label_project_* index takes (as keyset_page's): another project's labels
        # are never walked, wherever they lie in the table; the plain bound starts the scan at the page.
        RowComparison(("project_id", "taxonomy_id", "origin", "status", field), ">", key),
        project=project, taxonomy=taxonomy, origin=origin, status=status, **{f"{field}__gt": after or 0})
    if state == "auto":  # not yet reviewed
        labels = labels.exclude(Exists(Label.objects.filter(
            project=project, taxonomy=taxonomy, origin=LabelOrigin.HUMAN, status=LabelStatus.SUBMITTED,
            **{field: OuterRef(field)})))
    return list(labels.order_by(field).values_list(field, flat=True).distinct()[:n])


@dataclass(frozen=True)
class FieldWalk:
    """The tasks whose submitted labels hold a field's value, found by walking the project's submitted task labels in
    task order (label_project_submitted): `ids` in order, each once; `complete` when the walk reached the project's
    last label (else it stopped at its budget, and later tasks may match too)."""

    ids: list[int]
    complete: bool


def field_walk(project: Project, taxonomy: Taxonomy, field: str, value: str, *, after: int | None,
               budget: int) -> FieldWalk:
    """Walk at most `budget` of the project's submitted task labels after task `after`, and keep the tasks whose
    label holds `value` in `field` (as filter_tasks asks). A common value fills a page within a few hundred labels
    at any project size; a rare one does not, and its tasks are better found by the GIN index, which a walk cannot
    use: the caller then asks the planner (filter_tasks)."""
    key = (project.pk, taxonomy.pk, LabelStatus.SUBMITTED, after or 0)
    spec = taxonomy.definition
    walked = (Label.objects.filter(RowComparison(("project_id", "taxonomy_id", "status", "task_id"), ">", key),
                                   project=project, taxonomy=taxonomy, status=LabelStatus.SUBMITTED,
                                   task_id__gt=after or 0)
              .order_by("task_id")
              .annotate(hit=ExpressionWrapper(_value_is(field, value, multi=field in spec.multi_fields()),
                                              output_field=BooleanField()))
              .values_list("task_id", "hit")[:budget])
    rows = list(walked)
    ids = list(dict.fromkeys(task_id for task_id, hit in rows if hit))
    return FieldWalk(ids, complete=len(rows) < budget)


def filter_tasks(tasks: QuerySet[SweTask], taxonomy: Taxonomy, *, state: str = "", field: str = "", value: str = "",
                 search: str = "", annotate: bool = True) -> QuerySet[SweTask]:
    """Narrow by review state, by a label field's value (model label, or any submitted human label), or text."""
    tasks = filter_by_state(tasks, taxonomy, state, annotate=annotate)
    if field and value:
        spec = taxonomy.definition
        if field not in spec.fields():
            raise Refused(gettext("Unknown field %(field)s.") % {"field": repr(field)}, field="field")
        matching = Label.objects.filter(task=OuterRef("pk"), project=OuterRef("project"), taxonomy=taxonomy,
                                        status=LabelStatus.SUBMITTED)
        # A multi-valued field holds a list of tags: the value is one of them (not a substring of one).
        matching = matching.filter(_value_is(field, value, multi=field in spec.multi_fields()))
        tasks = tasks.filter(Exists(matching))
    if search:
        tasks = tasks.filter(Q(instance_id__icontains=search) | Q(repo__icontains=search))
    return tasks


def _value_is(field: str, value: str, *, multi: bool) -> Q | JSONArrayContains:
    """A label's `field` holds `value` (a multi-valued field: as one of its tags, not a substring of one). On
    PostgreSQL asked as containment of the whole `values` column, which its GIN index serves (migration 0012)."""
    if connection.vendor != "postgresql":
        return JSONArrayContains("values", field, value) if multi else Q(**{f"values__{field}": value})
    # A single field holds a string (services validate it), so containment is equality there. Not both: the
    # planner multiplies their selectivities, takes a common value for a rare one and reads every match first.
    return Q(values__contains={field: [value] if multi else value})


def queue_state(project: Project) -> dict:
    """How many tasks and trajectories there are and their review claims by state, from the kept figures
    (labeler/figures.py): the same few rows at any size of the project."""
    claims = figures.claim_counts(project.pk)
    return {"tasks": figures.item_count(project.pk),
            "claims": {state: claims["tasks"].get(state, 0) for state in ReviewClaimState.values},
            "trajectories": figures.item_count(project.pk, trajectories=True),
            "trajectory_claims": {state: claims["trajectories"].get(state, 0) for state in ReviewClaimState.values}}


def my_claims(user, project: Project) -> QuerySet[ReviewClaim]:
    return (ReviewClaim.objects.filter(task__project=project, reviewer=user)
            .select_related("task").order_by("-updated_at", "-id"))


def my_trajectory_claims(user, project: Project) -> QuerySet[TrajectoryReviewClaim]:
    return (TrajectoryReviewClaim.objects.filter(project=project, reviewer=user)
            .select_related("trajectory").order_by("-updated_at", "-id"))


COMPARE_KIND = "labeler.compare_versions"


@dataclass
class VersionComparison:
    """The kept comparison of two taxonomy versions (labeler/job_kinds.py): the latest that succeeded (its result,
    as of when it finished) and the one still queued or running, if any."""
    kept: Job | None
    pending: Job | None


def version_comparison(project: Project, taxonomy: Taxonomy, other: Taxonomy) -> VersionComparison:
    """Two queries on the project's jobs of the kind (its (project, kind, -id) index), whatever the labels."""
    jobs = Job.objects.filter(project=project, kind=COMPARE_KIND, params__taxonomy=taxonomy.pk,
                              params__compare=other.pk).order_by("-id")
    return VersionComparison(kept=jobs.filter(state=JobState.SUCCEEDED).first(),
                             pending=jobs.exclude(state__in=TERMINAL_STATES).first())


def project_labels(project: Project) -> QuerySet[Label]:
    """Every task label of a project: what the agreement reports and the task exports read (callers check the
    role). Trajectory labels are `trajectory_labels`."""
    return Label.objects.filter(project=project, task__isnull=False)


def trajectory_labels(project: Project) -> QuerySet[Label]:
    """Every trajectory label of a project (callers check the role)."""
    return Label.objects.filter(project=project, trajectory__isnull=False)



def final_task_labels(task_ids: list[int], taxonomy: Taxonomy) -> dict[int, Label]:
    """task id -> its final label now: the newest submitted reviewer label, else the model's submitted one
    (what a trajectory of the task keeps as its level-1 labels; callers check the role)."""
    final: dict[int, Label] = {}
    for label in (Label.objects.filter(task_id__in=task_ids, taxonomy=taxonomy, status=LabelStatus.SUBMITTED)
                  .order_by("updated_at", "id")):
        current = final.get(label.task_id)
        if current is None or label.origin == LabelOrigin.HUMAN or current.origin == LabelOrigin.MODEL:
            final[label.task_id] = label
    return final
