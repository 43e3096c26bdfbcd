"""Job kinds used only by the tests: they exercise the job machinery without a model."""

from rest_framework import serializers

from dataplatform.inference import BackendUnavailable
from dataplatform.jobs.registry import JobKind, register


class CountParams(serializers.Serializer):
    to = serializers.IntegerField(min_value=1, max_value=1000)
    fail_with = serializers.ChoiceField(choices=["", "error", "backend"], default="")


def count(job, progress):
    progress.set_total(job.params["to"])
    for i in range(1, job.params["to"] + 1):
        if job.params["fail_with"] == "error" and i == 3:
            raise ValueError("the count broke at 3")
        if job.params["fail_with"] == "backend":
            raise BackendUnavailable("connection refused by 127.0.0.1:9")
        progress.report(i, force=True)
    return {"counted": job.params["to"]}


COUNT = register(JobKind(name="test.count", label="Count", params_serializer=CountParams, run=count))
