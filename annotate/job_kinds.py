from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from dataplatform.jobs.registry import JobKind, register

from . import services


class RolloutParams(serializers.Serializer):
    regenerate = serializers.BooleanField(default=False, help_text=_("answer items that already have a rollout again"))


def run_rollouts(job, progress) -> dict:
    return services.generate_rollouts(project=job.project, progress=progress, regenerate=job.params["regenerate"])


register(JobKind(
    name="annotate.rollouts",
    label=_("Generate initial responses"),
    description=_("The model answers every prompt that has no response yet, keeping top-k logprobs per token."),
    params_serializer=RolloutParams,
    run=run_rollouts,
))
