"""ATD data: a prompt pool with two candidate answers each, ancestor scoring runs, frozen near-tie
selections, and the teacher's one-bit answers.

A `Score` is unique per (run, prompt) and a `TeacherAnswer` per (teacher run, prompt): jobs write
them in bulk with conflicts ignored, so a job resumed after a crash does each prompt exactly once.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy

from dataplatform.accounts.models import Project
from dataplatform.imports import ImportedFile


class PromptSource(ImportedFile):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="atd_sources")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "sha256"], name="atd_source_unique_sha")]


class AtdPrompt(models.Model):
    """A prompt (chat messages) with candidates A and B (imported, or sampled from the ancestor)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="atd_prompts")
    source = models.ForeignKey(PromptSource, null=True, on_delete=models.SET_NULL, related_name="prompts")
    external_id = models.CharField(max_length=300)
    messages = models.JSONField()
    candidate_a = models.TextField(blank=True)
    candidate_b = models.TextField(blank=True)
    candidates_origin = models.CharField(max_length=16, default="imported")  # imported | sampled | missing
    meta = models.JSONField(default=dict, blank=True)
    source_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["project", "external_id"], name="atd_prompt_unique_id")]
        # The API's cursor pages, newest first (dataplatform/pagination.py): one page of rows a request.
        indexes = [models.Index(fields=["project", "-created_at", "-id"], name="atd_prompt_project_recent")]


class ScoringMethod(models.TextChoices):
    JUDGE = "judge", gettext_lazy("Judge (P(A) vs P(B) at the verdict)")
    LIKELIHOOD = "likelihood", gettext_lazy("Likelihood (P(A) vs P(B) of the whole candidates: summed token logprobs)")
    LIKELIHOOD_MEAN = "likelihood_mean", gettext_lazy("Length-normalized likelihood (mean token logprob of A vs B)")


class ScoringRun(models.Model):
    """One pass of the ancestor over the pool, with everything that defines it recorded."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="atd_scoring_runs")
    method = models.CharField(max_length=16, choices=ScoringMethod.choices, default=ScoringMethod.JUDGE)
    debias = models.BooleanField(default=True)  # judge: score both orders and average q with 1 - q_swapped
    model_id = models.CharField(max_length=200, blank=True)
    template_version = models.CharField(max_length=50)
    batch_size = models.PositiveIntegerField(default=32)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Its scores' kept figures (corpora/atd/figures.py: cells of |q - 0.5| by position bias, and the histograms),
    # added to by the service that writes the scores; null until the first read counts them.
    figures = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]
        # The API's cursor pages, newest first (dataplatform/pagination.py).
        indexes = [models.Index(fields=["project", "-created_at", "-id"], name="atd_run_project_recent")]


class Score(models.Model):
    run = models.ForeignKey(ScoringRun, on_delete=models.CASCADE, related_name="scores")
    prompt = models.ForeignKey(AtdPrompt, on_delete=models.CASCADE, related_name="scores")
    q = models.FloatField()  # P(A preferred) after debiasing, in [0, 1]
    q_ab = models.FloatField()  # raw, A shown first
    q_ba = models.FloatField(null=True, blank=True)  # raw q of the swapped order (B shown first), judge + debias
    # |q_ab - (1 - q_ba)|: how far the two orders disagree about the original A (null with one order).
    position_bias = models.FloatField(null=True, blank=True)
    logprobs = models.JSONField(default=dict)  # the raw numbers each q came from
    # The same as the export writes it (json.dumps, keys sorted), made with the score (services.score_rows):
    # PostgreSQL's jsonb text orders keys and spells small floats otherwise, and atd.scored reads it in SQL.
    logprobs_json = models.TextField(default="{}")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "prompt"], name="one_score_per_run_prompt")]
        indexes = [models.Index(fields=["run", "q"], name="score_run_q"),
                   # The near-tie counts' cut bias cells (selectors.kept_count): one bucket's range of the bias.
                   models.Index(fields=["run", "position_bias"], name="score_run_bias")]


class Selection(models.Model):
    """A frozen, named and versioned set of near-tie prompts: |q - 0.5| <= epsilon under one run."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="atd_selections")
    run = models.ForeignKey(ScoringRun, on_delete=models.PROTECT, related_name="selections")
    name = models.SlugField(max_length=100)
    version = models.PositiveIntegerField()
    epsilon = models.FloatField()
    # Near ties whose orders disagree by more than this are position-biased: left out unless include_biased.
    bias_threshold = models.FloatField(default=0.2)
    include_biased = models.BooleanField(default=False)
    excluded_biased = models.PositiveIntegerField(default=0)  # near ties by q left out as position-biased
    size = models.PositiveIntegerField(default=0)
    # What made it: method, orders, judge template and version, epsilon, bias rule, ancestor model.
    recipe = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["project", "name", "version"], name="selection_unique_version")]
        indexes = [models.Index(fields=["project", "-created_at", "-id"], name="atd_selection_project_recent")]


class SelectionItem(models.Model):
    selection = models.ForeignKey(Selection, on_delete=models.CASCADE, related_name="items")
    prompt = models.ForeignKey(AtdPrompt, on_delete=models.PROTECT, related_name="+")
    q = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["selection", "prompt"], name="one_item_per_selection_prompt")]


class TeacherMode(models.TextChoices):
    ONE_WORD = "one_word", gettext_lazy("One word (one query per prompt, the answer constrained to A or B, greedy)")
    LOGPROBS = "logprobs", gettext_lazy("Verdict logprobs (P(A) vs P(B) as the next token; both orders when debiased)")
    LIKELIHOOD = "likelihood", gettext_lazy("Likelihood of each candidate (for a selection scored by likelihood)")


class TeacherRun(models.Model):
    selection = models.ForeignKey(Selection, on_delete=models.PROTECT, related_name="teacher_runs")
    mode = models.CharField(max_length=16, choices=TeacherMode.choices, default=TeacherMode.ONE_WORD)
    model_name = models.CharField(max_length=200, blank=True)  # the teacher; empty = the platform default
    base_url = models.CharField(max_length=500, blank=True)  # another vLLM endpoint, if the teacher lives there
    debias = models.BooleanField(default=True)
    budget = models.PositiveIntegerField(null=True, blank=True)  # stop after this many queries; resume later
    model_id = models.CharField(max_length=200, blank=True)
    # The selection's recipe with this run's mode and model, as atd.dpo writes it (json.dumps, keys sorted), made
    # when the job names its model (services.teacher_recipe_json): the export reads it as a column, where a
    # CASE over every run made each row's cost grow with the number of runs.
    recipe_json = models.TextField(default="{}")
    # Its answers by status, {"ok": n, "tie": n, "invalid": n}, added to by the service that records them; null
    # until the first read counts them (corpora/atd/figures.py).
    answer_counts = models.JSONField(null=True, blank=True, editable=False)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]


class TeacherAnswer(models.Model):
    run = models.ForeignKey(TeacherRun, on_delete=models.CASCADE, related_name="answers")
    prompt = models.ForeignKey(AtdPrompt, on_delete=models.CASCADE, related_name="+")
    bit = models.CharField(max_length=1, blank=True)  # "A" or "B"; empty for a tie or an invalid answer
    status = models.CharField(max_length=16)  # ok | tie | invalid
    logprob_a = models.FloatField(null=True, blank=True)
    logprob_b = models.FloatField(null=True, blank=True)
    swapped = models.JSONField(default=dict, blank=True)  # the B-first order's logprobs, when debiased
    raw = models.TextField(blank=True)
    # The prompt's first ok answer (the lowest id among its ok answers in every run): atd.dpo's pair for the prompt.
    # Set by services.ask_teacher in the transaction that records the answer, under a lock on the prompt, so that
    # a later answer always has a higher id and never changes it; the export reads it instead of an anti-join.
    first_of_prompt = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "prompt"], name="one_answer_per_teacher_prompt")]
