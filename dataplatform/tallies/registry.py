"""The tallies the workflows define: a name, the tables a change to the figures writes, and the recount."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from django.db import models


class Figure(NamedTuple):
    count: int
    total: float = 0.0


@dataclass(frozen=True)
class TallyDefinition:
    name: str
    # The tables whose changes move the figures. Counting a project's tally for the first time locks them against
    # writes (PostgreSQL SHARE mode: it waits for open writers, then holds new ones for the count), so no change is
    # both missed by the count and skipped by `add`.
    tables: tuple[type[models.Model], ...]
    # The figures from scratch: {key: Figure}. Keys with a zero count may be left out.
    recount: Callable[[int], dict[str, Figure]]


_DEFINED: dict[str, TallyDefinition] = {}


def define(name: str, *, tables: tuple[type[models.Model], ...], recount: Callable[[int], dict[str, Figure]]) -> str:
    """Define a tally (once, at import of the workflow's module); returns its name for the callers of `add`."""
    if name in _DEFINED and _DEFINED[name].recount is not recount:
        raise ValueError(f"tally {name!r} is defined twice")
    _DEFINED[name] = TallyDefinition(name, tuple(tables), recount)
    return name


def definition(name: str) -> TallyDefinition:
    try:
        return _DEFINED[name]
    except KeyError:
        raise KeyError(f"no tally named {name!r}: define it with tallies.registry.define") from None


def defined() -> list[TallyDefinition]:
    return [_DEFINED[name] for name in sorted(_DEFINED)]
