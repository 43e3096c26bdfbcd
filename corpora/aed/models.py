"""AED data: imported failure traces (kept untouched), the curator's cases beside them, correction
proposals, and two-arm controlled replays with their per-run results.

A trace is the source record; nothing a curator does changes it. A `Case` is one curator's
reading of one trace: the first decisive error step, its category (from a versioned error
taxonomy), a diagnosis, evidence references and the check of the diagnosis against them. A case
has proposals (corrected actions for the error step); rejected ones are kept. Every change to a
case or a proposal is also a `CaseEvent`. A `Replay` runs N seeded pairs of arms from the same
checkpoint for one proposal; each arm's outcome is a `ReplayRun` row, unique per (replay, pair,
arm), so a retried task overwrites its own row and can never count twice.
"""

from functools import cached_property

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy

from dataplatform.accounts.models import Project
from dataplatform.imports import ImportedFile

from . import stats


class ErrorTaxonomy(models.Model):
    """One immutable version of the agent-error category list (`corpora/aed/taxonomies/*.yaml`)."""

    name = models.SlugField(max_length=100)
    version = models.CharField(max_length=50)
    sha256 = models.CharField(max_length=64)
    categories = models.JSONField()  # [{slug, name, definition, example}], in the file's order
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="error_taxonomy_unique_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @cached_property
    def slugs(self) -> list[str]:
        return [c["slug"] for c in self.categories]


class TraceSource(ImportedFile):
    """An imported file; the same bytes imported again into the project add nothing."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trace_sources")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "sha256"], name="trace_source_unique_sha")]


class Trace(models.Model):
    """An agent's failed (or passed) attempt, as imported. `steps` is the normalised list
    [{index, role, content, action, observation}]. A trajectory (a `messages` line, or a trace read by
    `dataplatform.conversations.readers`) becomes one step per message, its message fields on the step
    (`reasoning`, `tool_calls`, `tool_call_id`, `name`; `action` is a read trace's tool calls as text) and its
    function schemas in `tools`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="traces")
    source = models.ForeignKey(TraceSource, null=True, on_delete=models.SET_NULL, related_name="traces")
    trace_id = models.CharField(max_length=300)
    task_id = models.CharField(max_length=300, blank=True)
    environment = models.CharField(max_length=200, blank=True)
    harness = models.CharField(max_length=200, blank=True)
    policy_model = models.CharField(max_length=200, blank=True)
    passed = models.BooleanField(null=True)
    score = models.FloatField(null=True, blank=True)
    steps = models.JSONField()
    meta = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=list, blank=True)  # [{type: function, function: {name, parameters...}}]
    # "steps", "messages", or a reader's format: "openai", "swe_agent", "openhands", "swe_labeler"
    source_format = models.CharField(max_length=16, default="steps")
    source_sha256 = models.CharField(max_length=64)  # of the record as imported
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["project", "trace_id"], name="trace_unique_id")]
        indexes = [
            # The API's cursor pages, newest first (dataplatform/pagination.py): one page of rows a request.
            models.Index(fields=["project", "-created_at", "-id"], name="trace_project_recent"),
            # The unfiltered page, by id: without it the primary key was walked past every other project's traces
            # (a 10k project's first page beside a 1M one: 336 ms).
            models.Index(fields=["project", "id"], name="trace_project_id"),
            # Each filter of the traces list: its keyset pages by id (the page) and its cursor pages (the API).
            *(models.Index(fields=["project", field, "id"], name=f"trace_project_{short}_id")
              for field, short in (("environment", "env"), ("harness", "harness"), ("policy_model", "model"))),
            *(models.Index(fields=["project", field, "-created_at", "-id"], name=f"trace_project_{short}_recent")
              for field, short in (("environment", "env"), ("harness", "harness"), ("policy_model", "model"))),
        ]

    def __str__(self) -> str:
        return self.trace_id


class EvidenceCheck(models.TextChoices):
    UNCHECKED = "unchecked", gettext_lazy("Not checked")
    SUPPORTED = "supported", gettext_lazy("Supported")
    UNSUPPORTED = "unsupported", gettext_lazy("Unsupported")
    CONTRADICTED = "contradicted", gettext_lazy("Contradicted")


class CaseStatus(models.TextChoices):
    DRAFT = "draft", gettext_lazy("Draft")
    SUBMITTED = "submitted", gettext_lazy("Submitted")


class Case(models.Model):
    """One curator's diagnosis of a trace: the first decisive error step and why it is wrong."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="cases")
    curator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    taxonomy = models.ForeignKey(ErrorTaxonomy, on_delete=models.PROTECT, related_name="+")
    error_step = models.PositiveIntegerField(null=True, blank=True)  # index into trace.steps
    category = models.CharField(max_length=100, blank=True)
    diagnosis = models.TextField(blank=True)
    # [{"step": 3}, {"step": 4, "quote": "No such file"}]: what the diagnosis rests on.
    evidence = models.JSONField(default=list, blank=True)
    evidence_check = models.CharField(max_length=16, choices=EvidenceCheck.choices, default=EvidenceCheck.UNCHECKED)
    status = models.CharField(max_length=16, choices=CaseStatus.choices, default=CaseStatus.DRAFT)
    # The draft came from a model (the LLM drafting job) and no human has edited it since.
    model_authored = models.BooleanField(default=False)
    # Who diagnosed (the error step, category and diagnosis as they stand): "model" (its id and the drafting
    # prompt's version beside it) or "curator"; empty before anyone did.
    diagnosed_by = models.CharField(max_length=8, blank=True)
    diagnosis_model_id = models.CharField(max_length=200, blank=True)
    diagnosis_prompt_version = models.CharField(max_length=50, blank=True)
    # The model's evidence check (the aed.check_evidence job), beside the curator's `evidence_check`, which
    # confirms or overrides it.
    model_evidence_check = models.CharField(max_length=16, choices=EvidenceCheck.choices, blank=True)
    model_evidence_rationale = models.TextField(blank=True)
    model_evidence_model_id = models.CharField(max_length=200, blank=True)
    version = models.PositiveIntegerField(default=0)  # bumped by every write; stale writes get 409
    # The case's grade as it stands, kept by every service that can move it, in its transaction (`grades.regrade`:
    # the rules of `stats.grade` on the replay `selectors.evidence_of` picks), so pages, summaries and exports read
    # it instead of grading every case again. Null grade: neither replayed nor evidence-checked.
    grade = models.CharField(max_length=1, null=True, blank=True)
    grade_basis = models.CharField(max_length=8, null=True, blank=True)  # stats.REPLAY, stats.CHECK or null
    grade_proposal = models.ForeignKey("Proposal", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    grade_replay = models.ForeignKey("Replay", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # That replay's net gain and 2x2 table (zeros when no replay grades the case): the dashboard's means and pass
    # rates are sums of these.
    grade_net_gain = models.FloatField(null=True, blank=True)
    grade_n11 = models.PositiveIntegerField(default=0)
    grade_n10 = models.PositiveIntegerField(default=0)
    grade_n01 = models.PositiveIntegerField(default=0)
    grade_n00 = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["trace", "curator"], name="one_case_per_trace_curator")]
        # The traces list's grade filter: a trace's cases of one grade.
        indexes = [models.Index(fields=["trace", "grade"], name="case_trace_grade")]


class ProposalStatus(models.TextChoices):
    PROPOSED = "proposed", gettext_lazy("Proposed")
    ACCEPTED = "accepted", gettext_lazy("Accepted")
    REJECTED = "rejected", gettext_lazy("Rejected")


class Proposal(models.Model):
    """A corrected action for the case's error step. Rejected proposals stay, with their status."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="proposals")
    corrected_action = models.TextField()
    rationale = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.PROPOSED)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    model_authored = models.BooleanField(default=False)
    model_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]


class CaseEvent(models.Model):
    """Append-only history of a case: marks, diagnoses, evidence checks, proposals, drafts, replays."""

    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)  # mark, diagnose, check, propose, proposal_status, draft, submit, replay
    origin = models.CharField(max_length=8, default="human")  # human | model
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class RetryDesign(models.TextChoices):
    RESAMPLE = "resample", gettext_lazy("Resample: the policy samples the error step again")
    ORIGINAL = "original", gettext_lazy(
        "Original-action retry: the original step is executed again, then the policy continues")


class ReplayMode(models.TextChoices):
    PAIRED = "paired", gettext_lazy("Paired: the correction (arm C) against the retry (arm R)")
    RECOVERY = "recovery", gettext_lazy(
        "Recovery in context: the error and its observation kept, then the policy continues")


class Replay(models.Model):
    """N paired runs from the checkpoint before the error step: arm C applies the proposal's corrected
    action then lets the policy continue; arm R, the retry, resamples the step or executes the original one
    again (`retry`), then the policy continues. Pair i uses the same seed in both arms. A recovery replay
    (`mode`) runs N times arm E instead: the erroneous step executed with its real observation, then the
    policy continues with the failure in its context (the diagnosis as a hint when `options["hint"]`)."""

    proposal = models.ForeignKey(Proposal, on_delete=models.CASCADE, related_name="replays")
    runner = models.CharField(max_length=32, default="builtin")  # builtin | webhook
    retry = models.CharField(max_length=16, choices=RetryDesign.choices, default=RetryDesign.RESAMPLE)
    mode = models.CharField(max_length=16, choices=ReplayMode.choices, default=ReplayMode.PAIRED)
    pairs = models.PositiveIntegerField()
    seed = models.BigIntegerField(default=0)  # pair i runs with seed + i in both arms
    options = models.JSONField(default=dict, blank=True)  # temperature, max_steps, webhook url, ...
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The 2x2 table and the statistics, recomputed from the runs whenever one is recorded.
    n11 = models.PositiveIntegerField(default=0)
    n10 = models.PositiveIntegerField(default=0)
    n01 = models.PositiveIntegerField(default=0)
    n00 = models.PositiveIntegerField(default=0)
    stats = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class ReplayRun(models.Model):
    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="runs")
    pair = models.PositiveIntegerField()
    arm = models.CharField(max_length=1)  # "C" (corrected), "R" (the retry) or "E" (error kept: recovery)
    seed = models.BigIntegerField()
    passed = models.BooleanField()
    score = models.FloatField(null=True, blank=True)
    steps = models.JSONField(default=list, blank=True)  # the steps the runner took after the checkpoint
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pair", "arm"]
        constraints = [models.UniqueConstraint(fields=["replay", "pair", "arm"], name="one_run_per_pair_arm")]


class GradingEvidence(models.TextChoices):
    FIRST = "first", gettext_lazy("The first proposal of each case (as the paper reports)")
    BEST = "best", gettext_lazy("The best of the proposals (the highest net gain)")


class AedSettings(models.Model):
    """A project's grading rules: which proposal's replay grades a case and the thresholds of grade A."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="aed_settings")
    evidence = models.CharField(max_length=8, choices=GradingEvidence.choices, default=GradingEvidence.FIRST)
    min_pairs = models.PositiveIntegerField(default=stats.MIN_PAIRS)
    alpha = models.FloatField(default=stats.ALPHA)  # the significance level of the exact McNemar test
    updated_at = models.DateTimeField(auto_now=True)

    def grading(self) -> stats.Grading:
        return stats.Grading(evidence=self.evidence, min_pairs=self.min_pairs, alpha=self.alpha)
