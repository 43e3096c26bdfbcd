"""AED trace imports: JSONL, one agent trace per line, in one of two shapes of its own or a trace format of
`dataplatform.conversations.readers`.

- AED steps: `{trace_id, task_id, environment, harness, policy_model, outcome: {passed, score?},
  steps: [{index, role, content, action?, observation?}], meta}`. `trace_id`, `outcome.passed` and a
  non-empty `steps` are required; step `index` must count 0, 1, 2, ... in order.
- A trajectory, as the SWE labeler imports it: `{trajectory_id, instance_id, model, scaffold,
  messages: [{role, content}]}` with optional `environment` and `outcome`. Each message becomes a
  step whose content is the message's text (null: ""; a list of content parts: its text parts
  joined by newlines, the list itself kept as `content_parts`), with no action or observation.

Normalisation is the only change: a step (or message) keeps any keys of its own beyond the
normalised ones; top-level keys the shape does not know go into `meta` under their own names
beside what `meta` already holds (a name in both is an error), and an `outcome` carrying more
than passed/score is kept whole as `meta["outcome"]`.

Any other record is a trace in one of the readers' formats (OpenAI chat with tool calls, a SWE-agent
trajectory, an OpenHands output line, a SWE Labeler trajectory with `json_content`, a mini-swe-agent trajectory,
a tau-bench run). The file is told from its content (`readers.trace_records`): JSON Lines, one JSON document
(a SWE-agent `.traj`, a tau-bench array of runs), or a Claude Code session or Codex CLI rollout, one trace each. Its conversation becomes one step per message, each in the stored message
shape (`reasoning`, `tool_calls`, `tool_call_id`, `name`, and the source's own fields of the message) with
its tool calls as the step's `action`, as text; its tools go in `tools`, the record's other fields in
`meta`, and the format's name in `source_format`. A record without an id of its own is named
`<task>-<hash>` (`TraceRecord.id_or`); a task is optional. The events a reader keeps in meta rather than in the
conversation are counted per kind in the report (`ImportReport.outside`).

Built on `dataplatform.imports` (DESIGN.md section 6): errors are {file, line, field, message}; a dry
run writes nothing; a file imports whole or not at all unless skip_bad_lines. A trace is matched
on its trace_id: the same record again (same canonical hash) counts as a duplicate, other content
under a known trace_id is an error, and bytes already imported into the project add nothing.
"""

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils.translation import gettext, ngettext

from dataplatform.accounts.models import Project
from dataplatform.conversations.readers import TraceRecord, detect, read_trace, trace_records
from dataplatform.conversations.validation import ANY_PARTS_OR_NULL, check_messages
from dataplatform.imports import (
    HashingLines,
    ImportReport,
    LineError,
    canonical_sha256,
)

from . import grades
from .models import Trace, TraceSource

BATCH_SIZE = 500
STEP_KEYS = ("index", "role", "content", "action", "observation")
MAX_STEP_PROBLEMS = 10  # per line; a broken list of thousands of steps should not bury the report


@dataclass(frozen=True)
class _Shape:
    source_format: str
    list_key: str  # "steps" or "messages"
    id_key: str  # the line's key that becomes trace_id
    texts: dict[str, str]  # line key -> Trace text field
    outcome_required: bool


AED_STEPS = _Shape("steps", "steps", "trace_id", {
    "trace_id": "trace_id", "task_id": "task_id", "environment": "environment", "harness": "harness",
    "policy_model": "policy_model"}, outcome_required=True)
TRAJECTORY = _Shape("messages", "messages", "trajectory_id", {
    "trajectory_id": "trace_id", "instance_id": "task_id", "environment": "environment", "scaffold": "harness",
    "model": "policy_model"}, outcome_required=False)


@dataclass
class _Record:
    line: int
    id_key: str
    sha256: str
    fields: dict  # Trace field -> value

    @property
    def trace_id(self) -> str:
        return self.fields["trace_id"]


class _Problems(list):
    """(field, message) pairs found on one line."""

    def add(self, field: str, message: str) -> None:
        self.append((field, message))


# --- one line -> Trace fields --------------------------------------------------------------------

def _text_fields(data: dict, shape: _Shape, problems: _Problems) -> dict:
    fields = {}
    for key, column in shape.texts.items():
        value = data.get(key)
        if key == shape.id_key and (not isinstance(value, str) or not value.strip()):
            problems.add(key, gettext("is required: a non-empty string"))
            value = ""
        elif value is None:
            value = ""
        elif not isinstance(value, str):
            problems.add(key, gettext("must be a string"))
            value = ""
        limit = Trace._meta.get_field(column).max_length
        if len(value) > limit:
            problems.add(key, gettext("must be at most %(max)s characters long") % {"max": limit})
        fields[column] = value
    return fields


def _outcome(data: dict, shape: _Shape, problems: _Problems) -> tuple[bool | None, float | None]:
    outcome = data.get("outcome")
    if outcome is None:
        if shape.outcome_required:
            problems.add("outcome", gettext("is required: an object with passed (true or false) and an optional score"))
        return None, None
    if not isinstance(outcome, dict):
        problems.add("outcome", gettext("must be an object with passed (true or false) and an optional score"))
        return None, None
    passed, score = outcome.get("passed"), outcome.get("score")
    if not isinstance(passed, bool):
        problems.add("outcome.passed", gettext("must be true or false, got %(value)s") % {"value": repr(passed)}
                     if "passed" in outcome else gettext("is required: true or false"))
        passed = None
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        problems.add("outcome.score", gettext("must be a number, got %(value)s") % {"value": repr(score)})
        score = None
    return passed, None if score is None else float(score)


def _step_problems(found: list[tuple[str, str]], problems: _Problems) -> None:
    problems.extend(found[:MAX_STEP_PROBLEMS])
    if len(found) > MAX_STEP_PROBLEMS:
        problems.add(found[MAX_STEP_PROBLEMS][0].split("[")[0],
                     ngettext("%(count)s more problem in this list is not shown",
                              "%(count)s more problems in this list are not shown", len(found) - MAX_STEP_PROBLEMS)
                     % {"count": len(found) - MAX_STEP_PROBLEMS})


def _aed_steps(value, problems: _Problems) -> list[dict]:
    if not isinstance(value, list) or not value:
        problems.add("steps", gettext("must be a non-empty list of {index, role, content} objects"))
        return []
    found, steps, numbering_checked = _Problems(), [], False
    for position, step in enumerate(value):
        where = f"steps[{position}]"
        if not isinstance(step, dict):
            found.add(where, gettext("must be an object with index, role and content"))
            continue
        index = step.get("index")
        if not numbering_checked and (isinstance(index, bool) or not isinstance(index, int)):
            found.add(f"{where}.index", gettext("must be the integer %(position)s (steps count 0, 1, 2, ... in order)")
                      % {"position": position})
            numbering_checked = True
        elif not numbering_checked and index != position:
            found.add(f"{where}.index", gettext("is %(index)s, expected %(position)s (steps count 0, 1, 2, ... in order)")
                      % {"index": index, "position": position})
            numbering_checked = True
        role = step.get("role")
        if not isinstance(role, str) or not role.strip():
            found.add(f"{where}.role", gettext("must be a non-empty string"))
        if not isinstance(step.get("content"), str):
            found.add(f"{where}.content", gettext("must be a string"))
        for key in ("action", "observation"):
            if step.get(key) is not None and not isinstance(step[key], str):
                found.add(f"{where}.{key}", gettext("must be a string or null"))
        steps.append({"index": position, "role": role, "content": step.get("content"), "action": step.get("action"),
                      "observation": step.get("observation")}
                     | {k: v for k, v in step.items() if k not in STEP_KEYS})
    _step_problems(found, problems)
    return steps


def _step_keys_in(message: dict, where: str) -> Iterator[tuple[str, str]]:
    """A message becomes a step, whose index, action, observation and content_parts come from elsewhere."""
    for key in ("index", "action", "observation", "content_parts"):
        if key in message:
            yield f"{where}.{key}", gettext("%(key)s is a key of the normalised step; a message cannot carry it") % {
                "key": repr(key)}


def _message_steps(value, problems: _Problems) -> list[dict]:
    checked = check_messages(value, content=ANY_PARTS_OR_NULL, message_rules=_step_keys_in)
    _step_problems(checked.problems, problems)
    if checked.problems:
        return []  # the line is refused
    steps = []
    for position, (message, text) in enumerate(zip(value, checked.texts, strict=True)):
        step = {"index": position, "role": message["role"], "content": text, "action": None, "observation": None}
        if isinstance(message.get("content"), list):
            step["content_parts"] = message["content"]
        steps.append(step | {k: v for k, v in message.items() if k not in ("role", "content")})
    return steps


def _meta(data: dict, shape: _Shape, problems: _Problems) -> dict:
    meta = data.get("meta")
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        problems.add("meta", gettext("must be an object"))
        meta = {}
    meta = dict(meta)
    known = {*shape.texts, shape.list_key, "outcome", "meta"}
    extra = {k: v for k, v in data.items() if k not in known}
    outcome = data.get("outcome")
    if isinstance(outcome, dict) and set(outcome) - {"passed", "score"}:
        extra["outcome"] = outcome
    for key, value in extra.items():
        if key in meta:
            problems.add(key, gettext("is also a key of meta (unknown top-level keys are kept in meta); rename one of "
                                      "them"))
        meta[key] = value
    return meta


def _fields(data: dict, sha256: str, name: str, problems: _Problems, outside: Counter) -> tuple[str, dict]:
    """(the key that names the trace in errors, the Trace fields) of one line; a read trace's events kept in its
    meta are counted in `outside`."""
    if "steps" in data and "messages" in data:
        problems.add("steps", gettext("a line holds either steps (an AED trace) or messages (a trajectory), not both"))
        return "", {}
    if "steps" not in data and not ("messages" in data and "trajectory_id" in data):
        if detect(data) is None:
            problems.add("steps", gettext("a line holds either steps (an AED trace) or messages (a trajectory); it has "
                                          "neither"))
            return "", {}
        return _read_fields(data, sha256, name, problems, outside)
    shape = AED_STEPS if "steps" in data else TRAJECTORY
    fields = _text_fields(data, shape, problems)
    fields["passed"], fields["score"] = _outcome(data, shape, problems)
    steps = _aed_steps if shape is AED_STEPS else _message_steps
    fields["steps"] = steps(data[shape.list_key], problems)
    fields["meta"] = _meta(data, shape, problems)
    fields["source_format"] = shape.source_format
    return shape.id_key, fields


# Trace field -> the TraceRecord field it is read from.
READ_TEXTS = {"trace_id": "trace_id", "task_id": "task_id", "environment": "environment", "harness": "harness",
              "policy_model": "model"}


def _read_fields(data: dict, sha256: str, name: str, problems: _Problems, outside: Counter) -> tuple[str, dict]:
    """A trace in one of the readers' formats (`dataplatform.conversations.readers`); `name`: the task its file is
    named after."""
    record, found = read_trace(data, task_id=name)
    _step_problems(found, problems)
    if record is None:
        return "", {}
    outside.update(record.outside)
    fields = {column: getattr(record, name) for column, name in READ_TEXTS.items()}
    fields["trace_id"] = record.id_or(sha256)
    for column, value in fields.items():
        limit = Trace._meta.get_field(column).max_length
        if len(value) > limit:
            problems.add(record.origins.get(READ_TEXTS[column]) or column,
                         gettext("must be at most %(max)s characters long") % {"max": limit})
    fields |= {"passed": record.passed, "score": record.score, "steps": _conversation_steps(record),
               "tools": list(record.conversation.tools), "meta": record.meta, "source_format": record.format}
    return record.origins.get("trace_id") or "(line)", fields


def _conversation_steps(record: TraceRecord) -> list[dict]:
    """One step per message, in the stored message shape; the step's action is the message's tool calls."""
    return [stored | {"index": index, "role": message.role, "content": message.content,
                      "action": "\n".join(f"{call.name}({call.arguments})" for call in message.tool_calls) or None,
                      "observation": None}
            for index, (message, stored) in enumerate(zip(record.conversation.messages, record.stored_messages(),
                                                          strict=True))]


# --- the file --------------------------------------------------------------------------------------

class _TraceImport:
    def __init__(self, project: Project, file: str, dry_run: bool):
        self.project = project
        self.report = ImportReport(file=file, dry_run=dry_run)
        self.records: dict[str, _Record] = {}  # trace_id -> first good record with it

    def error(self, line: int, field: str, message: str) -> None:
        self.report.errors.append(LineError(self.report.file, line, field, message))

    def read(self, lines: Iterable[bytes | str]) -> None:
        for read in trace_records(lines, self.report.file):
            self.report.lines = max(self.report.lines, read.end)
            if read.record is None:
                self.report.errors.append(read.error(self.report.file))
                continue
            problems, sha256, outside = _Problems(), canonical_sha256(read.record), Counter()
            id_key, fields = _fields(read.record, sha256, read.name, problems, outside)
            for field, message in problems:
                self.error(*read.at(field), message)
            if not problems:
                self.keep(_Record(read.line, id_key, sha256, fields))
                self.report.outside.update(outside)

    def keep(self, record: _Record) -> None:
        first = self.records.setdefault(record.trace_id, record)
        if first is record:
            return
        if first.sha256 == record.sha256:
            self.report.duplicates += 1
        else:
            self.error(record.line, record.id_key, gettext("trace %(id)s already appears on line %(line)s with different "
                                                           "content") % {"id": repr(record.trace_id), "line": first.line})

    def new_records(self) -> list[_Record]:
        """The good records the project does not hold yet (same content held: duplicate; other: error)."""
        ids = list(self.records)
        stored: dict[str, str] = {}
        for start in range(0, len(ids), BATCH_SIZE):
            stored.update(Trace.objects.filter(project=self.project, trace_id__in=ids[start:start + BATCH_SIZE])
                          .values_list("trace_id", "source_sha256"))
        new = []
        for trace_id, record in self.records.items():
            if trace_id not in stored:
                new.append(record)
            elif stored[trace_id] == record.sha256:
                self.report.duplicates += 1
            else:
                self.error(record.line, record.id_key, gettext("trace %(id)s already exists in this project with "
                                                               "different content") % {"id": repr(trace_id)})
        return new

    def write(self, records: list[_Record], sha256: str, user) -> None:
        try:
            with transaction.atomic():
                source = TraceSource.objects.create(project=self.project, filename=self.report.file[:255],
                                                    sha256=sha256, rows=len(records), created_by=user)
                Trace.objects.bulk_create(
                    (Trace(project=self.project, source=source, source_sha256=r.sha256, **r.fields) for r in records),
                    batch_size=BATCH_SIZE)
                grades.count_traces(self.project.pk, (r.fields for r in records))  # the traces list's figures
        except IntegrityError:
            self.error(0, "(file)", gettext("another import stored this file or some of its traces at the same time; "
                                            "nothing was written, import it again"))
            return
        self.report.created = len(records)


def import_traces(*, project: Project, lines: Iterable[bytes | str], file: str = "traces.jsonl",
                  dry_run: bool = False, skip_bad_lines: bool = False, user=None) -> ImportReport:
    """Import AED traces into `project`: JSONL in a shape of its own or a trace format, or a .traj file (see the
    module docstring)."""
    run = _TraceImport(project, file, dry_run)
    hashed = HashingLines(lines)
    run.read(hashed)
    if TraceSource.objects.filter(project=project, sha256=hashed.hexdigest()).exists():
        run.report.duplicates += len(run.records)  # the very same bytes were imported before
        new = []
    else:
        new = run.new_records()
    report = run.report
    report.errors.sort(key=lambda e: e.line)
    if skip_bad_lines:
        report.skipped = len(report.errors.lines)
    if new and not dry_run and (skip_bad_lines or not report.errors):
        run.write(new, hashed.hexdigest(), user if getattr(user, "is_authenticated", False) else None)
    return report
