"""Job kinds. An app declares its kinds in `<app>/job_kinds.py` with `register(JobKind(...))`."""

from collections.abc import Callable
from dataclasses import dataclass

from rest_framework import serializers


class JobCancelled(Exception):
    """Raised inside a running job when a user asked to cancel it."""


@dataclass(frozen=True)
class JobKind:
    name: str
    label: str
    # Validates and normalises the job's params (used by the API and the HTML form alike).
    params_serializer: type[serializers.Serializer]
    # run(job, progress) -> result (JSON-serialisable). Raise BackendUnavailable to be retried.
    run: Callable
    description: str = ""


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise ValueError(f"Job kind {kind.name!r} is registered twice.")
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> JobKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise LookupError(f"Unknown job kind {name!r}; known kinds: {', '.join(sorted(_KINDS)) or 'none'}.") from None


def all_kinds() -> list[JobKind]:
    return sorted(_KINDS.values(), key=lambda kind: kind.name)
