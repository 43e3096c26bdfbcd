"""SWE Labeler data: taxonomy versions, SWE tasks and trajectories, labels and their events.

A label is the current state of one author's answer for one task, or one trajectory (the published
labeler's trajectory mode), under one taxonomy version; every change to it is also a `LabelEvent` written in the same transaction,
so the history is append-only and says who changed what, and whether a model or a human
did. The model's label (author null) and each reviewer's label are separate rows, which is
what LLM-vs-human and human-vs-human agreement compare.
"""

from functools import cached_property

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from dataplatform.accounts.models import Project
from dataplatform.claims import ClaimBase, ClaimState, one_active_claim_per_queue
from dataplatform.imports import ImportedFile
from dataplatform.status import render_html

from .taxonomy import TaxonomySpec


class Taxonomy(models.Model):
    """One immutable version of a taxonomy file; labels keep the version they were made under."""

    name = models.SlugField(max_length=100)
    version = models.CharField(max_length=50)
    title = models.CharField(max_length=200, blank=True)
    sha256 = models.CharField(max_length=64)  # of the YAML file it was loaded from
    spec = models.JSONField()  # the validated, normalised content (TaxonomySpec.data)
    source_filename = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="taxonomy_unique_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def definition(self) -> TaxonomySpec:
        return TaxonomySpec(self.spec)


class TrajectoryL1Mode(models.TextChoices):
    """Whether a trajectory's stage one is kept from the record's (or its task's) complete level-1 labels, as the
    published labeler does by default, or asked of the model again."""

    PRESERVE = "preserve", _("preserve: keep complete level-1 labels")
    RELABEL = "relabel", _("relabel: always ask")


class LabelerSettings(models.Model):
    """A project's labeling set-up: the pinned taxonomy version, review overlap and the auto-labeler's budget."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="labeler_settings")
    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.PROTECT, related_name="+")
    model_name = models.CharField(max_length=200, blank=True)  # the auto-labeler's model; empty = platform default
    overlap = models.PositiveSmallIntegerField(default=1)  # human reviewers per task
    lease_minutes = models.PositiveIntegerField(default=30)
    max_tokens = models.PositiveIntegerField(default=384)  # stage budget; the one retry doubles it
    temperature = models.FloatField(default=0.0)
    batch_size = models.PositiveIntegerField(default=16)  # requests kept in flight together
    # How much of a task the model sees (the published labeler's sizes, in characters).
    max_problem_chars = models.PositiveIntegerField(default=3000)
    max_patch_chars = models.PositiveIntegerField(default=8000)
    max_test_patch_chars = models.PositiveIntegerField(default=3000)
    # Trajectory mode: how much of a trajectory's compact summary the model sees, and where stage one comes from.
    max_trajectory_chars = models.PositiveIntegerField(default=12000)
    trajectory_l1_mode = models.CharField(max_length=8, default=TrajectoryL1Mode.PRESERVE,
                                          choices=TrajectoryL1Mode.choices)
    updated_at = models.DateTimeField(auto_now=True)

    # The published labeler's choices (src/labeler.py and its config); the settings page names where a
    # project differs. Its 4,096 answer tokens suit a large model that writes long rationales; the
    # embedded model's constrained answers fit the smaller default.
    # Its compact trajectory summary is up to 200,000 characters (a 1M-context model); the embedded model's
    # context holds about a task's worth.
    PAPER_DEFAULTS = {"max_tokens": 4096, "temperature": 0.1, "max_problem_chars": 3000, "max_patch_chars": 8000,
                      "max_test_patch_chars": 3000, "max_trajectory_chars": 200_000,
                      "trajectory_l1_mode": TrajectoryL1Mode.PRESERVE}

    def differences_from_paper(self) -> dict[str, tuple]:
        """field -> (this project's value, the paper's) where they differ."""
        return {name: (getattr(self, name), paper) for name, paper in self.PAPER_DEFAULTS.items()
                if getattr(self, name) != paper}


class SourceKind(models.TextChoices):
    TASKS = "tasks", _("SWE tasks")
    TRAJECTORIES = "trajectories", _("Trajectories")


class Source(ImportedFile):
    """An imported file. The same bytes imported again into the project add nothing."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="labeler_sources")
    kind = models.CharField(max_length=16, choices=SourceKind.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "sha256"], name="labeler_source_unique_sha")]


class SweTask(models.Model):
    """A SWE-bench-style task instance; unknown fields of the record are kept in `extra`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="swe_tasks")
    source = models.ForeignKey(Source, null=True, on_delete=models.SET_NULL, related_name="tasks")
    instance_id = models.CharField(max_length=300)
    repo = models.CharField(max_length=300, blank=True)
    base_commit = models.CharField(max_length=64, blank=True)
    problem_statement = models.TextField()
    patch = models.TextField(blank=True)
    test_patch = models.TextField(blank=True)
    fail_to_pass = models.JSONField(default=list, blank=True)
    pass_to_pass = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # sha256 of the canonical JSON of the record: what an auto-label was computed from.
    source_sha256 = models.CharField(max_length=64)
    # How many claims on it are done; the queue offers the most-done item with a free slot first.
    claims_done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["project", "instance_id"], name="swe_task_unique_instance")]
        indexes = [models.Index(fields=["project", "-claims_done", "id"], name="swe_task_queue_order"),
                   # The API's cursor pages, newest first (dataplatform/pagination.py): one page of rows a request.
                   models.Index(fields=["project", "-created_at", "-id"], name="swe_task_project_recent"),
                   # The overview's task list: keyset pages by id within the project.
                   models.Index(fields=["project", "id"], name="swe_task_project_id")]
        # PostgreSQL also has trigram indexes on UPPER(instance_id) and UPPER(repo) for the lists' search
        # (migration 0012: SQLite has no trigram index, and searches with LIKE).

    def __str__(self) -> str:
        return self.instance_id


class Trajectory(models.Model):
    """An agent's attempt at a task, read by `dataplatform.conversations.readers` from one of their formats:
    its messages in the stored conversation shape (`Message.as_dict()`, each with the source's own fields
    beside it), its function schemas in `tools`, the record's other fields in `extra`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="swe_trajectories")
    source = models.ForeignKey(Source, null=True, on_delete=models.SET_NULL, related_name="trajectories")
    task = models.ForeignKey(SweTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories")
    trajectory_id = models.CharField(max_length=300)
    instance_id = models.CharField(max_length=300)
    model = models.CharField(max_length=200, blank=True)
    scaffold = models.CharField(max_length=200, blank=True)
    messages = models.JSONField()
    tools = models.JSONField(default=list, blank=True)  # [{type: function, function: {name, parameters...}}]
    source_format = models.CharField(max_length=16, default="swe_labeler")  # the reader's: openai, swe_agent...
    extra = models.JSONField(default=dict, blank=True)
    source_sha256 = models.CharField(max_length=64)
    claims_done = models.PositiveIntegerField(default=0)  # the review queue's order, as SweTask's
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["project", "trajectory_id"],
                                               name="swe_trajectory_unique_id")]
        indexes = [models.Index(fields=["project", "-claims_done", "id"], name="swe_trajectory_queue_order"),
                   # The API's cursor pages, newest first (dataplatform/pagination.py): one page of rows a request.
                   models.Index(fields=["project", "-created_at", "-id"], name="swe_trajectory_recent"),
                   models.Index(fields=["project", "id"], name="swe_trajectory_project_id")]
        # PostgreSQL: trigram indexes on UPPER(trajectory_id) and UPPER(instance_id) too (migration 0012).

    def __str__(self) -> str:
        return self.trajectory_id


class LabelOrigin(models.TextChoices):
    MODEL = "model", _("Model")
    HUMAN = "human", _("Human")


class LabelStatus(models.TextChoices):
    DRAFT = "draft", _("Draft")  # a reviewer is working on it
    SUBMITTED = "submitted", _("Submitted")  # the model's finished answer, or a reviewer's accepted one
    ERROR = "error", _("Error")  # the model's answer stayed invalid after its retry


class L1Source(models.TextChoices):
    """Where a trajectory label's stage-one values came from (the published labeler's `l1_source`)."""
    GENERATED = "generated", _("Asked of the model")  # no complete level-1 labels to keep
    RELABELED = "relabeled", _("Asked again")  # trajectory_l1_mode = relabel
    PRESERVED = "preserved", _("The record's own labels")  # the imported line's `labels`
    TASK = "task", _("Its task's label")  # the final label of the task it attempts


class Label(models.Model):
    """Of a task or of a trajectory: exactly one of the two is set."""

    # The item's project, kept on the label so that a project's labels are found by indexes that begin with it (the
    # lists' state and field filters, the figures), not through the items of every project sharing the taxonomy.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey(SweTask, null=True, blank=True, on_delete=models.CASCADE, related_name="labels")
    trajectory = models.ForeignKey(Trajectory, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="labels")
    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.PROTECT, related_name="labels")
    origin = models.CharField(max_length=8, choices=LabelOrigin.choices)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="swe_labels")  # null for the model's label
    status = models.CharField(max_length=16, choices=LabelStatus.choices, default=LabelStatus.DRAFT)
    values = models.JSONField(default=dict, blank=True)  # field → slug (single) or [slugs] (L2)
    rationales = models.JSONField(default=dict, blank=True)  # field → the model's one-line reason
    # field → "model" | "human": who set each field's current value.
    provenance = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)  # bumped by every write; stale writes get 409
    model_id = models.CharField(max_length=200, blank=True)
    task_sha256 = models.CharField(max_length=64, blank=True)  # the task's (trajectory's) record it was made from
    l1_source = models.CharField(max_length=16, choices=L1Source.choices, blank=True)  # trajectory labels
    raw_responses = models.JSONField(default=list, blank=True)  # every model answer, stage by stage
    error = models.TextField(blank=True)  # English: the API, the exports and the history keep it
    # The same error as a message id and its values (dataplatform/status.py), for pages in their language.
    error_i18n = models.JSONField(null=True, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "taxonomy"], condition=Q(origin="model"),
                                    name="one_model_label_per_task_taxonomy"),
            models.UniqueConstraint(fields=["task", "taxonomy", "author"], condition=Q(origin="human"),
                                    name="one_human_label_per_reviewer"),
            models.UniqueConstraint(fields=["trajectory", "taxonomy"], condition=Q(origin="model"),
                                    name="one_model_label_per_trajectory_taxonomy"),
            models.UniqueConstraint(fields=["trajectory", "taxonomy", "author"], condition=Q(origin="human"),
                                    name="one_human_trajectory_label_per_reviewer"),
            models.CheckConstraint(condition=Q(task__isnull=False, trajectory__isnull=True)
                                   | Q(task__isnull=True, trajectory__isnull=False), name="label_of_task_or_trajectory"),
        ]
        indexes = [models.Index(fields=["taxonomy", "origin", "status"], name="label_tax_origin_status"),
                   # A page's review states: one probe per item (selectors.review_state_of).
                   models.Index(fields=["task", "taxonomy", "origin", "status"], name="label_task_review_state"),
                   models.Index(fields=["trajectory", "taxonomy", "origin", "status"],
                                name="label_trajectory_review_state"),
                   # The lists' state filters: a project's items of one state, in the lists' order (by item id;
                   # selectors.state_page_ids).
                   models.Index(fields=["project", "taxonomy", "origin", "status", "task"], name="label_project_tasks",
                                condition=Q(task__isnull=False)),
                   models.Index(fields=["project", "taxonomy", "origin", "status", "trajectory"],
                                name="label_project_trajectories", condition=Q(trajectory__isnull=False)),
                   # The task list's field filter: the project's submitted task labels, either origin, in task order
                   # (selectors.field_walk).
                   models.Index(fields=["project", "taxonomy", "status", "task"], name="label_project_submitted",
                                condition=Q(task__isnull=False))]
        # PostgreSQL also has a GIN index on `values` (jsonb_path_ops) for the task list's field=value filter when
        # the value is too rare for selectors.field_walk (migration 0012; filter_tasks asks with containment, which
        # it serves).

    @property
    def item(self) -> "SweTask | Trajectory":
        """What the label labels."""
        return self.task if self.task_id is not None else self.trajectory

    @property
    def error_html(self) -> str:
        """Why the model's answer was unusable, in the active language; the model's values in it marked
        translate="no"."""
        return render_html(self.error_i18n, self.error)


class LabelEventKind(models.TextChoices):
    AUTO = "auto", _("Auto-labeled")
    AUTO_ERROR = "auto_error", _("Auto-labeling failed")
    PREFILL = "prefill", _("Pre-filled from the model")
    EDIT = "edit", _("Edited")
    SUBMIT = "submit", _("Submitted")


class LabelEvent(models.Model):
    """One change to a label: {field: [old, new]}, by whom, and whether a model or a human made it."""

    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="events")
    # The label's project, kept on the event so that a project's newest event (the SWE exports' data version) is one
    # step down an index, not a join of every label event with its label (0.5-4 s beside 800k tasks' labels).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    kind = models.CharField(max_length=16, choices=LabelEventKind.choices)
    origin = models.CharField(max_length=8, choices=LabelOrigin.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    changes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["project", "id"], name="label_event_project_id")]


class FinalLabel(models.Model):
    """What a task's (trajectory's) final label under a taxonomy was from one of its label events (`since_event`) up
    to the next (`until_event`, null while it is the latest): written by labeler/final_labels.py in the transaction
    of the event, read by the exports (an export bounded by event E reads the row with since_event <= E <
    until_event). `label` null: no final label then (review_status "unlabeled"). Its JSON texts are the export's
    columns as they are written (json.dumps, keys sorted)."""

    # (task and trajectory: indexed by the two indexes below, which begin with them)
    task = models.ForeignKey(SweTask, null=True, blank=True, on_delete=models.CASCADE, related_name="final_labels",
                             db_index=False)
    trajectory = models.ForeignKey(Trajectory, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="final_labels", db_index=False)
    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.CASCADE, related_name="+")
    since_event = models.BigIntegerField()
    until_event = models.BigIntegerField(null=True, blank=True)
    label = models.ForeignKey(Label, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    review_status = models.CharField(max_length=16)  # reviewed | auto | error | unlabeled
    category = models.CharField(max_length=100)
    label_origin = models.CharField(max_length=8, null=True, blank=True)
    model_id = models.CharField(max_length=200, null=True, blank=True)
    l1_source = models.CharField(max_length=16, null=True, blank=True)
    columns = models.JSONField(default=dict)  # the single and multi fields as the rows give them
    upstream_labels = models.JSONField(null=True, blank=True)  # the published labeler's `labels` record
    values_json = models.TextField(default="{}")
    rationales_json = models.TextField(default="{}")
    provenance_json = models.TextField(default="{}")

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(task__isnull=False, trajectory__isnull=True)
                                              | Q(task__isnull=True, trajectory__isnull=False),
                                              name="final_label_of_task_or_trajectory")]
        indexes = [models.Index(fields=["task", "taxonomy", "since_event"], name="final_label_task"),
                   models.Index(fields=["trajectory", "taxonomy", "since_event"], name="final_label_trajectory")]


ReviewClaimState = ClaimState  # the same states as every claim queue


class ReviewClaim(ClaimBase):
    """A reviewer's hold on a task in the review queue (same rules as the onPanda queue)."""

    task = models.ForeignKey(SweTask, on_delete=models.CASCADE, related_name="review_claims")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="swe_claims")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "reviewer"], name="one_review_claim_per_task"),
                       one_active_claim_per_queue(holder_field="reviewer", name="one_active_review_claim_per_reviewer")]
        indexes = [models.Index(fields=["task", "state", "lease_expires_at"], name="review_claim_task_state")]


class TrajectoryReviewClaim(ClaimBase):
    """A reviewer's hold on a trajectory in the trajectory review queue (the task queue's rules)."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="review_claims")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                 related_name="swe_trajectory_claims")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trajectory", "reviewer"],
                                               name="one_review_claim_per_trajectory"),
                       one_active_claim_per_queue(holder_field="reviewer",
                                                  name="one_active_trajectory_claim_per_reviewer")]
        indexes = [models.Index(fields=["trajectory", "state", "lease_expires_at"],
                                name="traj_claim_state")]
