"""SWE Labeler imports: SWE-bench-style task JSONL and agent trajectory JSONL.

One JSON object per line. Tasks: `instance_id` and `problem_statement` (required), `repo`,
`base_commit`, `patch`, `test_patch`, and `FAIL_TO_PASS` / `PASS_TO_PASS` as a list of test
names or, as SWE-bench on the Hugging Face hub stores them, a string holding that JSON list.
Any other key is kept verbatim in `extra`. A line of the published SWE Labeler's output (its `labels`
object: code_language, task_type_l1, domain_l1, ..., task_type_rationale, raw_response) also brings the
task's model label: checked against the project's pinned taxonomy (`labels.<field>` names a value outside
it) and stored as the model's label, for reviewers to review (a record whose labeling failed upstream, with
no L1, brings none).

Trajectories: a trace in any format of `dataplatform.conversations.readers`: the SWE Labeler's own
`{trajectory_id, instance_id, model, scaffold, messages or json_content}`, OpenAI chat with tool calls,
an OpenHands output line, a SWE-agent trajectory (a line of JSONL, or a whole `.traj` file, which is
named after its instance), a mini-swe-agent trajectory, a tau-bench run, a whole Claude Code session or Codex
CLI rollout. The file is told from its content (`readers.trace_records`), so a JSON document (an array of records,
as tau-bench writes them) is read as well as JSONL, for tasks too. A trajectory is linked to the project's task it
names (`instance_id`, or the .traj file's name); one that names none (an OpenHands resolver run, a chat log, a
session) is kept unlinked. One without an id of its own is named `<instance_id>-<hash>`. The events a reader keeps
in `extra` rather than in the conversation are counted per kind in the report. Its messages are stored normalised
(`Message.as_dict()`, each with the source's own fields beside it), its tools in `tools`, the record's
other fields in `extra`. A SWE Labeler trajectory line with complete, valid `labels` (the published
trajectory pipeline's output) also brings the trajectory's model label; level-1 labels alone stay in
`extra`, where the trajectory labeling job finds them to keep.

Built on `dataplatform.imports` (reader, report, hashes), so the usual rules hold: per-line
errors {file, line, field, message}, dry run, all or nothing unless skip_bad_lines. A record is
matched on its id: the same content again counts as a duplicate, other content under a known id
is an error. A file whose bytes were imported before into the project adds nothing at all.
"""

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from django.db import IntegrityError, models, transaction
from django.utils.translation import gettext

from dataplatform.accounts.models import Project
from dataplatform.conversations.readers import Read, read_trace, trace_records
from dataplatform.exports import stored
from dataplatform.imports import (
    HashingLines,
    ImportReport,
    JsonProblem,
    LineError,
    canonical_sha256,
    load_json,
)

from . import figures, services
from .models import L1Source, Source, SourceKind, SweTask, Taxonomy, Trajectory

BATCH_SIZE = 1000
TASK_TEXT = ("instance_id", "problem_statement", "repo", "base_commit", "patch", "test_patch")
TEST_LISTS = {"FAIL_TO_PASS": "fail_to_pass", "PASS_TO_PASS": "pass_to_pass"}
REQUIRED = {"instance_id", "problem_statement"}
# The published labeler's rationale keys -> the field they explain (it also writes `<field>_rationale`).
UPSTREAM_RATIONALES = {"task_type_rationale": "task_type_l1", "domain_rationale": "domain_l1",
                       "l2_task_type_rationale": "task_type_l2", "l2_domain_rationale": "domain_l2"}
UPSTREAM_MODEL_ID = "swe_labeler (imported)"  # its output does not say which model labeled
# Trajectory field -> the TraceRecord field it is read from.
TRAJECTORY_TEXT = {"trajectory_id": "trace_id", "instance_id": "task_id", "model": "model", "scaffold": "harness"}

Problems = list[tuple[str, str]]  # (field, message) found on one line


@dataclass
class _Record:
    line: int
    key: str  # instance_id or trajectory_id
    sha256: str  # canonical_sha256 of the whole line's object
    fields: dict  # model field -> value


@dataclass(frozen=True)
class _Spec:
    kind: str
    model: type[models.Model]
    key: str
    fields: Callable[..., dict]  # (line's object, problems, *, sha256, name, outside) -> model fields
    prepare: Callable[[Project, list[_Record]], None] = lambda project, records: None  # just before writing
    written: Callable[[list], None] = lambda rows: None  # the rows just written, in the same transaction


def _text(data: dict, key: str, model: type[models.Model], problems: Problems) -> str:
    value = data.get(key)
    if value is None and key not in REQUIRED:
        return ""
    if not isinstance(value, str) or (key in REQUIRED and not value.strip()):
        problems.append((key, gettext("must be a non-empty string") if key in REQUIRED else gettext("must be a string")))
        return ""
    limit = model._meta.get_field(key).max_length
    if limit and len(value) > limit:
        problems.append((key, gettext("must be at most %(limit)s characters long") % {"limit": limit}))
    return value


def _test_names(data: dict, key: str, problems: Problems) -> list[str]:
    value = data.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        try:  # load_json: the string is as untrusted as the line (deep nesting, NaN, NUL...)
            value = load_json(value)
        except json.JSONDecodeError as exc:
            problems.append((key, gettext("a string here must hold a JSON list of test names (%(problem)s at column "
                                          "%(column)s)") % {"problem": exc.msg, "column": exc.colno}))
            return []
        except JsonProblem as exc:
            problems.append((key, gettext("a string here must hold a JSON list of test names (%(problem)s)")
                             % {"problem": exc.message}))
            return []
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        problems.append((key, gettext("must be a list of test names (strings), or a string holding such a JSON list")))
        return []
    return value


def _task_fields(data: dict, problems: Problems, *, taxonomy: Taxonomy, **_) -> dict:
    """A task's fields: from the line alone (its `labels`, if any, checked against `taxonomy`)."""
    fields = {key: _text(data, key, SweTask, problems) for key in TASK_TEXT}
    fields |= {column: _test_names(data, key, problems) for key, column in TEST_LISTS.items()}
    fields["extra"] = {k: v for k, v in data.items() if k not in TASK_TEXT and k not in TEST_LISTS}
    upstream_label(data, taxonomy, problems)
    return fields


def upstream_label(data: dict, taxonomy: Taxonomy, problems: Problems) -> dict | None:
    """The label a line of the published labeler's output carries ({values, rationales, raw}), or None."""
    labels = data.get("labels")
    if labels is None:
        return None
    if not isinstance(labels, dict):
        problems.append(("labels", gettext("must be an object (the published SWE Labeler's label fields)")))
        return None
    if not any(labels.get(f"{axis}_l1") for axis in taxonomy.definition.axes):
        return None  # labeling failed upstream: the task comes without a label
    spec = taxonomy.definition
    values = {name: labels[name] for name in spec.fields() if name in labels}
    problems.extend((f"labels.{name}", message) for name, message in spec.validate_values(values).items())
    rationales = {name: labels[key] for key, name in UPSTREAM_RATIONALES.items()
                  if isinstance(labels.get(key), str) and labels[key]}
    rationales |= {name: labels[f"{name}_rationale"] for name in spec.fields()
                   if isinstance(labels.get(f"{name}_rationale"), str) and labels[f"{name}_rationale"]}
    raw = labels.get("raw_response")
    return {"values": values, "rationales": rationales, "raw": raw if isinstance(raw, str) else ""}


def _label_tasks(taxonomy: Taxonomy, tasks: list) -> None:
    """The model label of every task whose line carried one (checked when the line was read)."""
    for task in tasks:
        label = upstream_label(task.extra, taxonomy, [])
        if label is not None:
            outcome = services.Outcome()
            outcome.values, outcome.rationales = label["values"], label["rationales"]
            outcome.raw = [{"stage": "imported", "text": label["raw"], "source": "labels"}]
            services.save_model_label(item=task, taxonomy=taxonomy, outcome=outcome, model_id=UPSTREAM_MODEL_ID)


def _trajectory_fields(data: dict, problems: Problems, *, sha256: str, name: str, outside: Counter) -> dict:
    record, found = read_trace(data, task_id=name)
    problems.extend(found)
    if record is None:
        return {}
    outside.update(record.outside)
    fields = {column: getattr(record, name) for column, name in TRAJECTORY_TEXT.items()}
    fields["trajectory_id"] = record.id_or(sha256)
    for column, value in fields.items():
        where = record.origins.get(TRAJECTORY_TEXT[column]) or column
        limit = Trajectory._meta.get_field(column).max_length
        if len(value) > limit:
            problems.append((where, gettext("must be at most %(limit)s characters long") % {"limit": limit}))
    return fields | {"messages": record.stored_messages(), "tools": list(record.conversation.tools),
                     "source_format": record.format, "extra": record.meta}


def _parse_record(spec: _Spec, report: ImportReport, read: Read) -> _Record | None:
    if read.record is None:
        report.errors.append(read.error(report.file))
        return None
    problems: Problems = []
    sha256, outside = canonical_sha256(read.record), Counter()
    fields = spec.fields(read.record, problems, sha256=sha256, name=read.name, outside=outside)
    report.errors += [LineError(report.file, *read.at(name), message) for name, message in problems]
    if problems:
        return None
    report.outside.update(outside)  # a trace's events kept in its meta, shown before anything is written
    return _Record(read.line, fields[spec.key], sha256, fields)


def _parse(spec: _Spec, lines: Iterable[bytes | str], report: ImportReport) -> list[_Record]:
    """Good records, first occurrence of each id; repeats are counted or reported."""
    first: dict[str, _Record] = {}
    for read in trace_records(lines, report.file):
        report.lines = max(report.lines, read.end)
        record = _parse_record(spec, report, read)
        if record is None:
            continue
        earlier = first.setdefault(record.key, record)
        if earlier is record:
            continue
        if earlier.sha256 == record.sha256:
            report.duplicates += 1
        else:
            report.errors.append(LineError(report.file, read.line, spec.key, gettext(
                "%(field)s %(key)s already appears on line %(line)s with different content")
                % {"field": spec.key, "key": record.key, "line": earlier.line}))
    return list(first.values())


def _lookup(queryset: models.QuerySet, key: str, keys: list[str], value: str) -> dict:
    """{key: value} for the rows whose `key` is in `keys`, queried in batches."""
    found = {}
    for start in range(0, len(keys), BATCH_SIZE):
        found |= dict(queryset.filter(**{f"{key}__in": keys[start:start + BATCH_SIZE]}).values_list(key, value))
    return found


def _link_tasks(project: Project, records: list[_Record]) -> None:
    task_ids = _lookup(SweTask.objects.filter(project=project), "instance_id",
                       [r.fields["instance_id"] for r in records], "id")
    for record in records:
        record.fields["task_id"] = task_ids.get(record.fields["instance_id"])


def _tasks_spec(project: Project) -> _Spec:
    taxonomy = services.settings_for(project).taxonomy
    return _Spec(SourceKind.TASKS, SweTask, "instance_id", partial(_task_fields, taxonomy=taxonomy),
                 written=partial(_label_tasks, taxonomy))


def _label_trajectories(taxonomy: Taxonomy, trajectories: list) -> None:
    """The model label of every trajectory whose line carried a complete, valid one (the published trajectory
    pipeline's output); level-1 labels alone are kept in `extra` for the labeling job to preserve."""
    for trajectory in trajectories:
        problems: Problems = []
        label = upstream_label(trajectory.extra, taxonomy, problems)
        if label is None or problems:
            continue
        outcome = services.Outcome()
        outcome.values, outcome.rationales = label["values"], label["rationales"]
        outcome.raw = [{"stage": "imported", "text": label["raw"], "source": "labels"}]
        source = trajectory.extra.get("l1_source")
        outcome.l1_source = source if source in L1Source.values else ""
        services.save_model_label(item=trajectory, taxonomy=taxonomy, outcome=outcome, model_id=UPSTREAM_MODEL_ID)


def _trajectories_spec(project: Project) -> _Spec:
    return _Spec(SourceKind.TRAJECTORIES, Trajectory, "trajectory_id", _trajectory_fields, _link_tasks,
                 written=partial(_label_trajectories, services.settings_for(project).taxonomy))


def _new_records(spec: _Spec, project: Project, records: list[_Record], report: ImportReport) -> list[_Record]:
    """Drop records the project already holds (same content: duplicate; other content: error)."""
    existing = _lookup(spec.model.objects.filter(project=project), spec.key, [r.key for r in records],
                       "source_sha256")
    new = []
    for record in records:
        if record.key not in existing:
            new.append(record)
        elif existing[record.key] == record.sha256:
            report.duplicates += 1
        else:
            report.errors.append(LineError(report.file, record.line, spec.key, gettext(
                "%(field)s %(key)s already exists in this project with different content")
                % {"field": spec.key, "key": record.key}))
    return new


def _write(spec: _Spec, project: Project, records: list[_Record], report: ImportReport, sha256: str, user) -> None:
    spec.prepare(project, records)
    try:
        with transaction.atomic():
            source = Source.objects.create(project=project, kind=spec.kind, filename=report.file[:255],
                                           sha256=sha256, rows=len(records), created_by=user)
            rows = spec.model.objects.bulk_create(
                [spec.model(project=project, source=source, source_sha256=r.sha256, **r.fields) for r in records],
                batch_size=BATCH_SIZE)
            figures.items_added(project.pk, spec.model, len(rows))
            spec.written(rows)
            if spec.model is Trajectory:  # a trajectory never changes: its export row is derived once, after commit
                stored.build_soon(project.pk)
    except IntegrityError:
        report.errors.append(LineError(report.file, 0, "(file)", gettext(
            "another import added this file or some of its records at the same time; nothing was written, import it "
            "again")))
        return
    report.created = len(records)


def _import(spec: _Spec, *, project: Project, lines: Iterable[bytes | str], file: str, dry_run: bool,
            skip_bad_lines: bool, user) -> ImportReport:
    report = ImportReport(file=file, dry_run=dry_run)
    hashed = HashingLines(lines)
    records = _parse(spec, hashed, report)
    if Source.objects.filter(project=project, sha256=hashed.hexdigest()).exists():
        report.duplicates += len(records)  # these very bytes were imported before: every good record
        new = []
    else:
        new = _new_records(spec, project, records, report)
    report.errors.sort(key=lambda e: e.line)
    report.skipped = len(report.errors.lines) if skip_bad_lines else 0
    if new and not dry_run and (skip_bad_lines or not report.errors):
        user = user if getattr(user, "is_authenticated", False) else None
        _write(spec, project, new, report, hashed.hexdigest(), user)
    return report


def import_tasks(*, project: Project, lines: Iterable[bytes | str], file: str = "tasks.jsonl", dry_run: bool = False,
                 skip_bad_lines: bool = False, user=None) -> ImportReport:
    """Import SWE-bench-style task JSONL into `project` (see the module docstring)."""
    return _import(_tasks_spec(project), project=project, lines=lines, file=file, dry_run=dry_run,
                   skip_bad_lines=skip_bad_lines, user=user)


def import_trajectories(*, project: Project, lines: Iterable[bytes | str], file: str = "trajectories.jsonl",
                        dry_run: bool = False, skip_bad_lines: bool = False, user=None) -> ImportReport:
    """Import trajectory JSONL into `project`, linking each to the project's task with its instance_id."""
    return _import(_trajectories_spec(project), project=project, lines=lines, file=file, dry_run=dry_run,
                   skip_bad_lines=skip_bad_lines, user=user)
