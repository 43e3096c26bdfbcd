"""The demo job: sample N continuations of a prompt from the model backend.

It proves the whole path: browser -> job row -> Celery worker -> backend -> progress -> result.
"""

from django.utils.translation import gettext_lazy, gettext_noop
from rest_framework import serializers

from dataplatform.jobs.registry import JobKind, register
from dataplatform.status import Status

from . import backend_for


class SampleContinuationsParams(serializers.Serializer):
    prompt = serializers.CharField(max_length=4000)
    n = serializers.IntegerField(min_value=1, max_value=8, default=3)
    max_tokens = serializers.IntegerField(min_value=1, max_value=256, default=48)
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0, default=0.8)
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=5)


def sample_continuations(job, progress) -> dict:
    params = job.params
    backend = backend_for(job.project, model="")  # the platform's default model
    prompt_ids = backend.chat_prompt_ids([{"role": "user", "content": params["prompt"]}])
    progress.set_total(params["n"] * params["max_tokens"])
    samples = []
    for index in range(params["n"]):
        seed = index  # sample i always uses seed i, so a rerun reproduces the job
        steps = []
        for step in backend.stream(
            prompt_ids, max_tokens=params["max_tokens"], temperature=params["temperature"], seed=seed,
            top_k=params["top_k"],
        ):
            steps.append(step)
            progress.report(index * params["max_tokens"] + len(steps), message=Status(gettext_noop("Sample %(sample)s of %(n)s"), sample=index + 1, n=params["n"]))
        ids = [step.token_id for step in steps]
        # The end-of-sequence token is kept in token_ids but not shown in the text.
        text_ids = ids[:-1] if steps[-1].finish_reason == "stop" else ids
        samples.append({
            "seed": seed,
            "text": backend.detokenize(text_ids),
            "token_ids": ids,
            "finish_reason": steps[-1].finish_reason,
            "first_token_alternatives": [
                {"token_id": token_id, "text": backend.detokenize([token_id]), "logprob": logprob}
                for token_id, logprob in steps[0].top
            ],
        })
        progress.report((index + 1) * params["max_tokens"], force=True)
    return {"model_id": backend.model_id, "backend": backend.name, "prompt_tokens": len(prompt_ids), "samples": samples}


DEMO_SAMPLE = register(JobKind(
    name="demo.sample_continuations",
    label=gettext_lazy("Sample continuations (demo)"),
    description=gettext_lazy("Samples N continuations of a prompt from the model backend, with top-k alternatives."),
    params_serializer=SampleContinuationsParams,
    run=sample_continuations,
))
