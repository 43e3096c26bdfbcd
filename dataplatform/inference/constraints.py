"""Per-row constraints (the Backend protocol's `generate_each`): their shape, and `generate_each` for a backend
whose requests take one constraint for the whole batch."""

from .base import BackendError, Generation

CONSTRAINT_KEYS = frozenset({"json_schema", "choice"})


def check_constraints(constraints: list[dict | None]) -> None:
    """Each per-row constraint is None or `generate`'s keywords, json_schema or choice, never both."""
    for constraint in constraints:
        if constraint and not CONSTRAINT_KEYS.issuperset(constraint):
            raise BackendError(f"A constraint has json_schema or choice, nothing else; got {sorted(constraint)}.")
        if constraint and all(constraint.get(key) is not None for key in CONSTRAINT_KEYS):
            raise BackendError("json_schema and choice are exclusive: give one constraint, not both.")


def generate_by_constraint(backend, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                           seed: int | None, constraints: list[dict | None]) -> list[Generation]:
    """`generate_each` for a backend whose `generate` takes one constraint for the whole batch: the rows sharing a
    constraint go together, one `generate` each, in the order each constraint first appears; the answers come
    back in row order."""
    if len(constraints) != len(prompts):
        raise BackendError(f"{len(constraints)} constraints for {len(prompts)} prompts.")
    check_constraints(constraints)
    groups: dict[str, list[int]] = {}
    for row, constraint in enumerate(constraints):
        groups.setdefault(repr(sorted((constraint or {}).items())), []).append(row)
    answers: list[Generation | None] = [None] * len(prompts)
    for rows in groups.values():
        got = backend.generate([prompts[row] for row in rows], max_tokens=max_tokens, temperature=temperature,
                               seed=seed, **(constraints[rows[0]] or {}))
        for row, answer in zip(rows, got, strict=True):
            answers[row] = answer
    return answers
