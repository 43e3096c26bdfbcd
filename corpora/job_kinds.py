from django.utils.translation import gettext_lazy, gettext_noop
from rest_framework import serializers

from dataplatform.apiutils import MAX_ID, MAX_SEED
from dataplatform.inference import validate_served_model_name
from dataplatform.jobs.registry import JobKind, NoParams, register
from dataplatform.status import Status

from .aed import evidence_check
from .aed import services as aed
from .aed.models import Case, Replay
from .atd import services as atd
from .atd.models import ScoringRun, TeacherRun


class ReplayParams(serializers.Serializer):
    replay = serializers.IntegerField(min_value=1, max_value=MAX_ID,
                                      help_text="the replay to run (created with its proposal)")


class DraftParams(serializers.Serializer):
    case = serializers.IntegerField(min_value=1, max_value=MAX_ID, help_text="the case to draft or to check")
    model_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                       validators=[validate_served_model_name])


def run_replay(job, progress) -> dict:
    replay = Replay.objects.select_related("proposal__case__trace").get(pk=job.params["replay"],
                                                                         proposal__case__trace__project=job.project)
    return aed.run_replay(replay=replay, progress=progress)


INVALID_ANSWERS = Status(gettext_noop("the model's answers were invalid; see the result"))
FOUND = {"supported": Status(gettext_noop("the model found it supported")),
         "unsupported": Status(gettext_noop("the model found it unsupported")),
         "contradicted": Status(gettext_noop("the model found it contradicted"))}  # evidence_check.EVIDENCE_VERDICTS


def run_draft(job, progress) -> dict:
    case = Case.objects.select_related("trace", "taxonomy").get(pk=job.params["case"], trace__project=job.project)
    progress.set_total(1)
    result = aed.draft_case(case=case, model_name=job.params.get("model_name", ""))
    progress.report(1, message=Status(gettext_noop("drafted")) if result["drafted"] else INVALID_ANSWERS)
    return result


def run_check_evidence(job, progress) -> dict:
    case = Case.objects.select_related("trace").get(pk=job.params["case"], trace__project=job.project)
    progress.set_total(1)
    result = evidence_check.check_evidence(case=case, model_name=job.params.get("model_name", ""))
    progress.report(1, message=FOUND[result["verdict"]] if result["checked"] else INVALID_ANSWERS)
    return result


register(JobKind(
    name="aed.replay",
    label=gettext_lazy("Two-arm controlled replay"),
    description=gettext_lazy("Runs N seeded pairs from the checkpoint before the error step: arm C applies the correction, "
                             "arm R retries the step; each run is saved as it finishes, so a retry resumes."),
    params_serializer=ReplayParams,
    run=run_replay,
))
register(JobKind(
    name="aed.draft",
    label=gettext_lazy("Draft a diagnosis with the model"),
    description=gettext_lazy("The model proposes the first decisive error step, its category, a diagnosis and a corrected "
                             "action; the draft is marked as model-authored for the curator to edit."),
    params_serializer=DraftParams,
    run=run_draft,
))
register(JobKind(
    name="aed.check_evidence",
    label=gettext_lazy("Check a diagnosis against its evidence with the model"),
    description=gettext_lazy("The model answers whether the case's diagnosis is supported, unsupported or contradicted by the "
                             "evidence quoted from the run, with a rationale; the curator confirms or overrides it."),
    params_serializer=DraftParams,
    run=run_check_evidence,
))



def run_regrade(job, progress) -> dict:
    return aed.regrade_project(project=job.project, progress=progress)


register(JobKind(
    name="aed.regrade",
    label=gettext_lazy("Grade the cases again"),
    description=gettext_lazy("Grades every case of the project again under its new grading rules, a page of cases at a "
                             "time, and keeps the dashboard's figures in step."),
    params_serializer=NoParams,
    run=run_regrade,
))


class RunParams(serializers.Serializer):
    run = serializers.IntegerField(min_value=1, max_value=MAX_ID,
                                   help_text="the scoring or teacher run this job works for")


def run_scoring(job, progress) -> dict:
    return atd.score_prompts(run=ScoringRun.objects.get(pk=job.params["run"], project=job.project), progress=progress)


def run_teacher(job, progress) -> dict:
    run = TeacherRun.objects.select_related("selection").get(pk=job.params["run"], selection__project=job.project)
    return atd.ask_teacher(run=run, progress=progress)


register(JobKind(
    name="atd.score",
    label=gettext_lazy("Score prompts with the ancestor"),
    description=gettext_lazy("q = P(A preferred) for every prompt of the pool, in batches; resumable, each prompt once."),
    params_serializer=RunParams,
    run=run_scoring,
))
register(JobKind(
    name="atd.teacher",
    label=gettext_lazy("Ask the teacher (one bit per prompt)"),
    description=gettext_lazy("A or B for every prompt of a frozen selection, within the run's budget; ties and invalid answers "
                             "are recorded."),
    params_serializer=RunParams,
    run=run_teacher,
))


class SampleParams(serializers.Serializer):
    temperature = serializers.FloatField(default=1.0, min_value=0.01, max_value=2.0)
    max_tokens = serializers.IntegerField(default=128, min_value=1, max_value=4096)
    seed = serializers.IntegerField(default=0, min_value=0, max_value=MAX_SEED)
    tries = serializers.IntegerField(default=3, min_value=1, max_value=10)


def run_sampling(job, progress) -> dict:
    return atd.sample_candidates(project=job.project, progress=progress, **job.params)


register(JobKind(
    name="atd.sample",
    label=gettext_lazy("Sample candidates from the ancestor"),
    description=gettext_lazy("Two distinct answers for every prompt imported without candidates (temperature and seed "
                             "recorded; up to `tries` attempts for distinctness)."),
    params_serializer=SampleParams,
    run=run_sampling,
))
