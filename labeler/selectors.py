"""Reads of the SWE Labeler, scoped to the requesting user.

Curators and admins see every task and label of their projects. A reviewer (annotator role)
sees only the tasks they have claimed, and on those only the model's label and their own.
Taxonomies are platform-wide reference data (like a schema): any member of a project may read them.
"""

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from dataplatform.accounts.models import ApiToken, Project
from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, role_in, visible_projects
from dataplatform.errors import Refused

from .models import Label, LabelOrigin, LabelStatus, ReviewClaim, ReviewClaimState, SweTask, Taxonomy

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
        raise Http404("No such task.")
    return task


def labels_of(user, task: SweTask) -> QuerySet[Label]:
    """A task's labels the user may see (the task itself must already be visible to them)."""
    labels = Label.objects.filter(task=task).select_related("taxonomy", "author").order_by("taxonomy_id", "origin", "id")
    if role_in(user, task.project) in CAN_CURATE:
        return labels
    return labels.filter(Q(origin=LabelOrigin.MODEL) | Q(author=user))


def label_for_writing(user, label_id: int, *, token: ApiToken | None = None) -> Label:
    """A reviewer's own label, in a project they can still annotate in."""
    label = (Label.objects.filter(pk=label_id, origin=LabelOrigin.HUMAN, author=user,
                                  task__project__in=visible_projects(user, roles=CAN_ANNOTATE, token=token))
             .select_related("taxonomy", "task", "task__project").first())
    if label is None:
        raise Http404("No such label.")
    return label


def label_for(user, label_id: int, *, token: ApiToken | None = None) -> Label:
    label = Label.objects.filter(pk=label_id).select_related("taxonomy", "task", "task__project", "author").first()
    if label is None or not labels_of(user, label.task).filter(pk=label.pk).exists() or not tasks_visible_to(
            user, label.task.project, token=token).filter(pk=label.task_id).exists():
        raise Http404("No such label.")
    return label


def with_review_state(tasks: QuerySet[SweTask], taxonomy: Taxonomy) -> QuerySet[SweTask]:
    """Annotate each task with booleans: auto-labeled, auto-label failed, reviewed (a submitted human label)."""
    labels = Label.objects.filter(task=OuterRef("pk"), taxonomy=taxonomy)
    return tasks.annotate(
        has_auto=Exists(labels.filter(origin=LabelOrigin.MODEL, status=LabelStatus.SUBMITTED)),
        has_error=Exists(labels.filter(origin=LabelOrigin.MODEL, status=LabelStatus.ERROR)),
        reviewed=Exists(labels.filter(origin=LabelOrigin.HUMAN, status=LabelStatus.SUBMITTED)),
    )


def filter_tasks(tasks: QuerySet[SweTask], taxonomy: Taxonomy, *, state: str = "", field: str = "", value: str = "",
                 search: str = "") -> QuerySet[SweTask]:
    """Narrow by review state, by a label field's value (model label, or any submitted human label), or text."""
    tasks = with_review_state(tasks, taxonomy)
    if state == "unlabeled":
        tasks = tasks.filter(has_auto=False, has_error=False, reviewed=False)
    elif state == "auto":
        tasks = tasks.filter(has_auto=True, reviewed=False)
    elif state == "error":
        tasks = tasks.filter(has_error=True)
    elif state == "reviewed":
        tasks = tasks.filter(reviewed=True)
    if field and value:
        spec = taxonomy.definition
        if field not in spec.fields():
            raise Refused(f"Unknown field {field!r}.", field="field")
        lookup = {f"values__{field}__contains": [value]} if field in spec.multi_fields() else {f"values__{field}": value}
        matching = Label.objects.filter(task=OuterRef("pk"), taxonomy=taxonomy, status=LabelStatus.SUBMITTED, **lookup)
        tasks = tasks.filter(Exists(matching))
    if search:
        tasks = tasks.filter(Q(instance_id__icontains=search) | Q(repo__icontains=search))
    return tasks


def queue_state(project: Project) -> dict:
    claims = ReviewClaim.objects.filter(task__project=project)
    return {"tasks": SweTask.objects.filter(project=project).count(),
            "claims": {state: claims.filter(state=state).count() for state in ReviewClaimState.values}}


def my_claims(user, project: Project) -> QuerySet[ReviewClaim]:
    return (ReviewClaim.objects.filter(task__project=project, reviewer=user)
            .select_related("task").order_by("-updated_at", "-id"))


def project_labels(project: Project) -> QuerySet[Label]:
    """Every label of a project: what the agreement reports and exports read (callers check the role)."""
    return Label.objects.filter(task__project=project)
