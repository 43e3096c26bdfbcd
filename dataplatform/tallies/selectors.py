"""Reads of kept figures (callers check the user's role on the project first)."""

from .models import Tally, TallyStart
from .registry import Figure
from .services import count_now


def ensure_counted(project_id: int, name: str) -> None:
    """Count a project's tally if it never was: for a caller that reads some of its keys itself (a range of them)."""
    if not TallyStart.objects.filter(project_id=project_id, name=name).exists():
        count_now(project_id, name)


def figures(project_id: int, name: str) -> dict[str, Figure]:
    """A project's kept figures under `name`, {key: Figure}; keys at zero are absent. The first read counts them."""
    ensure_counted(project_id, name)
    return {key: Figure(count, total) for key, count, total in
            Tally.objects.filter(project_id=project_id, name=name).values_list("key", "count", "total")}


def counts(project_id: int, name: str) -> dict[str, int]:
    """Only the counts of `figures`, {key: count}."""
    return {key: figure.count for key, figure in figures(project_id, name).items()}
