"""The JSONL importers under test, each described once: how to call it, a good record, where its id is,
which fields are required (with a wrongly typed value for each and the field the error must name), and
which tables it writes. The corpus and the properties are generated from these descriptions."""

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import models

from annotate.importers import import_prompts as annotate_import
from annotate.models import Item
from corpora.aed.importers import import_traces
from corpora.aed.models import Trace, TraceSource
from corpora.atd.importers import import_prompts as atd_import
from corpora.atd.models import AtdPrompt, PromptSource
from labeler.importers import import_tasks, import_trajectories
from labeler.models import Source, SweTask, Trajectory


@dataclass(frozen=True)
class JsonlImporter:
    name: str
    run: Callable  # run(project=, lines=, file=, ...) -> ImportReport
    id_key: str
    good: Callable[[str], dict]  # a valid record with the given id
    # (case name, record -> broken record, the field the error must name)
    wrong_types: list[tuple[str, Callable[[dict], dict], str]]
    tables: tuple[type[models.Model], ...]
    id_is_optional: bool = False
    extra: dict = field(default_factory=dict)

    def row_counts(self) -> tuple[int, ...]:
        return tuple(table.objects.count() for table in self.tables)


def _set(path: str, value) -> Callable[[dict], dict]:
    """A breakage: set `path` ("messages.0.role") of a record to `value`."""

    def apply(record: dict) -> dict:
        *parents, last = path.split(".")
        target = record
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = value
        return record

    return apply


ANNOTATE = JsonlImporter(
    name="annotate.prompts", run=annotate_import, id_key="id", id_is_optional=True,
    good=lambda key: {"id": key, "messages": [{"role": "user", "content": f"question {key}?"}]},
    wrong_types=[
        ("messages is a number", _set("messages", 5), "messages"),
        ("messages is empty", _set("messages", []), "messages"),
        ("a message is a string", _set("messages.0", "hi"), "messages[0]"),
        ("role is a number", _set("messages.0.role", 5), "messages[0].role"),
        ("content is a list of numbers", _set("messages.0.content", [1]), "messages[0].content[0]"),
        ("id is a list", _set("id", ["p"]), "id"),
        ("id is a boolean", _set("id", True), "id"),
        ("id is too long", _set("id", "x" * 201), "id"),
        ("meta is a string", _set("meta", "m"), "meta"),
    ],
    tables=(Item,),
)

TASKS = JsonlImporter(
    name="labeler.tasks", run=import_tasks, id_key="instance_id",
    good=lambda key: {"instance_id": key, "problem_statement": f"fix {key}", "FAIL_TO_PASS": ["test_a"]},
    wrong_types=[
        ("instance_id is a number", _set("instance_id", 5), "instance_id"),
        ("instance_id is blank", _set("instance_id", "  "), "instance_id"),
        ("problem_statement is a list", _set("problem_statement", ["x"]), "problem_statement"),
        ("problem_statement is null", _set("problem_statement", None), "problem_statement"),
        ("repo is an object", _set("repo", {"name": "r"}), "repo"),
        ("FAIL_TO_PASS is a number", _set("FAIL_TO_PASS", 3), "FAIL_TO_PASS"),
        ("FAIL_TO_PASS holds numbers", _set("FAIL_TO_PASS", [1, 2]), "FAIL_TO_PASS"),
        ("FAIL_TO_PASS is a string of deep JSON", _set("FAIL_TO_PASS", "[" * 100_000), "FAIL_TO_PASS"),
        ("PASS_TO_PASS is a string of bad JSON", _set("PASS_TO_PASS", "[oops"), "PASS_TO_PASS"),
        ("base_commit is too long", _set("base_commit", "f" * 65), "base_commit"),
    ],
    tables=(SweTask, Source),
)

TRAJECTORIES = JsonlImporter(
    name="labeler.trajectories", run=import_trajectories, id_key="trajectory_id",
    good=lambda key: {"trajectory_id": key, "instance_id": "task-1", "model": "m",
                      "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "done"}]},
    wrong_types=[
        ("trajectory_id is a number", _set("trajectory_id", 7), "trajectory_id"),
        ("instance_id is a list", _set("instance_id", []), "instance_id"),
        ("messages is a string", _set("messages", "hello"), "messages"),
        ("a message is a number", _set("messages.0", 1), "messages[0]"),
        ("role is empty", _set("messages.0.role", ""), "messages[0].role"),
        ("content is a number", _set("messages.0.content", 1.5), "messages[0].content"),
    ],
    tables=(Trajectory, Source),
)

TRACES = JsonlImporter(
    name="aed.traces", run=import_traces, id_key="trace_id",
    good=lambda key: {"trace_id": key, "outcome": {"passed": True, "score": 1},
                      "steps": [{"index": 0, "role": "agent", "content": "ls", "action": "ls"}]},
    wrong_types=[
        ("trace_id is a number", _set("trace_id", 1), "trace_id"),
        ("outcome is a string", _set("outcome", "passed"), "outcome"),
        ("outcome.passed is a string", _set("outcome.passed", "yes"), "outcome.passed"),
        ("outcome.score is a string", _set("outcome.score", "high"), "outcome.score"),
        ("steps is an object", _set("steps", {"0": {}}), "steps"),
        ("a step is a string", _set("steps.0", "ls"), "steps[0]"),
        ("step index is a string", _set("steps.0.index", "0"), "steps[0].index"),
        ("step content is a number", _set("steps.0.content", 0), "steps[0].content"),
        ("step action is a list", _set("steps.0.action", ["ls"]), "steps[0].action"),
        ("meta is a list", _set("meta", []), "meta"),
    ],
    tables=(Trace, TraceSource),
)

ATD = JsonlImporter(
    name="atd.prompts", run=atd_import, id_key="id",
    good=lambda key: {"id": key, "prompt": f"Say {key}.", "candidates": [f"{key}!", f"{key}?"]},
    wrong_types=[
        ("id is an object", _set("id", {"n": 1}), "id"),
        ("id is too long", _set("id", "i" * 301), "id"),
        ("prompt is a number", _set("prompt", 1), "prompt"),
        ("candidates is a string", _set("candidates", "ab"), "candidates"),
        ("a candidate is a number", _set("candidates.0", 1), "candidates[0]"),
        ("meta is a number", _set("meta", 2), "meta"),
    ],
    tables=(AtdPrompt, PromptSource),
)

JSONL_IMPORTERS = [ANNOTATE, TASKS, TRAJECTORIES, TRACES, ATD]
