"""Job kinds. An app declares its kinds in `<app>/job_kinds.py` with `register(JobKind(...))`."""

from collections.abc import Callable
from dataclasses import dataclass

from django.utils.translation import gettext_noop
from rest_framework import serializers

from dataplatform.registry import KindRegistry


class NoParams(serializers.Serializer):
    """The params of a kind that takes none: its job's project (or the row that points at the job) says it all."""


class JobCancelled(Exception):
    """Raised inside a running job when a user asked to cancel it."""


@dataclass(frozen=True)
class JobKind:
    name: str
    label: str
    # Validates and normalises the job's params (used by the API and the HTML form alike).
    params_serializer: type[serializers.Serializer]
    # run(job, progress) -> result (JSON-serialisable). Raise a dataplatform.errors.Transient to be retried.
    run: Callable
    description: str = ""


_KINDS: KindRegistry[JobKind] = KindRegistry(gettext_noop("job kind"))
register = _KINDS.register
get_kind = _KINDS.get
all_kinds = _KINDS.all
