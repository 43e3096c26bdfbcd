"""Job kinds used only by the tests: they exercise the job machinery without a model."""

import time

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection
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


class BlockParams(serializers.Serializer):
    seconds = serializers.FloatField(min_value=0)
    # Keep blocking when the soft time limit is raised, like C code that never returns to Python.
    ignore_soft_limit = serializers.BooleanField(default=False)
    # Block inside a database query (pg_sleep) instead of time.sleep.
    in_query = serializers.BooleanField(default=False)


def block(job, progress):
    """Hang for `seconds` with the heartbeat thread beating: code that is stuck, not a dead worker."""
    progress.set_total(1)
    progress.report(0, message="Blocking.", force=True)
    if job.params["in_query"]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [job.params["seconds"]])
    else:
        deadline = time.monotonic() + job.params["seconds"]
        while time.monotonic() < deadline:
            try:
                time.sleep(max(0.0, min(0.05, deadline - time.monotonic())))
            except SoftTimeLimitExceeded:
                if not job.params["ignore_soft_limit"]:
                    raise
    progress.report(1, force=True)
    return {"blocked_for": job.params["seconds"]}


BLOCK = register(JobKind(name="test.block", label="Block", params_serializer=BlockParams, run=block))
