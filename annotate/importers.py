"""Prompt import: JSONL of chat `messages`, optionally with `tools`, `id` and `meta`; or agent traces.

reader -> parser -> validator -> writer. Every problem is reported as
{file, line, field, message}. A file imports whole or not at all unless the
caller asks to skip bad lines; a dry run reports without writing. Re-importing a
record (same id, messages and tools) adds nothing.

The messages are read by the conversation model's reader (the spellings real files use): earlier turns
may carry reasoning, tool calls and tool results, as context for the model's answer. They are stored as
that model stores them (`Conversation.as_dict()`).

A record in another trace format of `dataplatform.conversations.readers` (a Claude Code session or Codex CLI
rollout file, a SWE-agent or mini-swe-agent trajectory, an OpenHands output line, a tau-bench run...; the file is
told from its content, so a JSON document is read as well as JSONL) is read by its reader: its conversation is the
prompt, up to its last turn when that is the model's (the model answers it again), reasoning and tool calls of the
earlier turns included. The item's meta keeps the trace's facts under `trace`: its format, ids, model, harness,
outcome, the answer the prompt leaves out (`answer`: its last assistant messages, in the stored message shape) and
the record's other fields.
Its `id` is the trace's id (else its task's) unless the record gives one.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext as _

from dataplatform.accounts.models import Project
from dataplatform.conversations.readers import Read, detect, read_trace, trace_records
from dataplatform.conversations.reading import read_conversation
from dataplatform.imports import ImportReport, LineError, canonical_sha256

from . import figures
from .models import Item

ID_MAX = Item._meta.get_field("external_id").max_length


@dataclass
class PromptRecord:
    line: int
    messages: list[dict]
    tools: list[dict]
    external_id: str
    meta: dict

    @property
    def source_sha256(self) -> str:
        # Without tools, the hash is the one records had before prompts could carry tools.
        return canonical_sha256({"id": self.external_id, "messages": self.messages,
                                 **({"tools": self.tools} if self.tools else {})})


# Records read as plain prompts: `messages` (and `tools`) as they are; any other trace goes through its reader.
PLAIN = (None, "openai")


def _trace(data: dict, name: str, errors: list[tuple[str, str]]):
    """(the prompt, the id it names, what meta keeps of it) of a record in a trace format."""
    record, problems = read_trace(data, task_id=name)
    errors += problems
    if record is None:
        return None, "", {}
    stored = record.conversation.as_dict()
    answer = []
    while stored["messages"] and stored["messages"][-1]["role"] == "assistant":  # the model's last turn: asked again
        answer.insert(0, stored["messages"].pop())
    facts = {"format": record.format, "trace_id": record.trace_id, "task_id": record.task_id, "model": record.model,
             "harness": record.harness, "passed": record.passed, "answer": answer, "meta": record.meta}
    prompt = read_conversation(stored["messages"], stored.get("tools")) if stored["messages"] else None
    if prompt is None or prompt.conversation is None:
        errors.append((record.origins.get("trace_id") or "(line)", _("the trace holds no prompt: only the model's "
                                                                        "answer")))
        return None, "", {}
    return prompt.conversation, record.trace_id or record.task_id, {"trace": facts}


def parse_record(file: str, read: Read) -> tuple[PromptRecord | None, list[LineError]]:
    data, number = read.record, read.line
    found: list[tuple[str, str]] = []
    if detect(data) in PLAIN:
        conversation = read_conversation(data.get("messages"), data.get("tools"))
        found += conversation.problems
        prompt, trace_id, trace_meta = conversation.conversation, "", {}
        meta = data.get("meta", {})
    else:
        prompt, trace_id, trace_meta = _trace(data, read.name, found)
        meta = {}
    errors = [LineError(file, *read.at(field), message) for field, message in found]
    roles = [message.role for message in prompt.messages] if prompt else []
    if prompt and roles[-1] == "assistant":
        errors.append(LineError(file, number, f"messages[{len(roles) - 1}].role",
                                _("the last message is the model's turn to answer; it must not be 'assistant'")))
    if prompt and "user" not in roles:
        errors.append(LineError(file, number, "messages", _("needs at least one 'user' message")))
    external_id = data.get("id", "") if detect(data) in PLAIN else trace_id
    if not isinstance(external_id, str | int) or isinstance(external_id, bool):
        errors.append(LineError(file, number, "id", _("must be a string or an integer")))
    elif len(str(external_id)) > ID_MAX:  # the database would refuse the whole file
        errors.append(LineError(file, number, "id", _("must be at most %(max)s characters long") % {"max": ID_MAX}))
    if not isinstance(meta, dict):
        errors.append(LineError(file, number, "meta", _("must be an object")))
    if errors:
        return None, errors
    stored = prompt.as_dict()
    return PromptRecord(line=number, messages=stored["messages"], tools=stored.get("tools", []),
                        external_id=str(external_id), meta=meta | trace_meta), []


def import_prompts(*, project: Project, lines: Iterable[bytes | str], file: str = "upload.jsonl",
                   dry_run: bool = False, skip_bad_lines: bool = False) -> ImportReport:
    report = ImportReport(file=file, dry_run=dry_run)
    records: list[PromptRecord] = []
    seen: set[str] = set()
    first_line_of: dict[str, int] = {}  # external id -> the line that first gave it
    for read in trace_records(lines, file):
        report.lines = max(report.lines, read.end)
        if read.record is None:
            report.errors.append(read.error(file))
            continue
        number = read.line
        record, errors = parse_record(file, read)
        report.errors += errors
        if record is None:
            continue
        if record.source_sha256 in seen:
            report.duplicates += 1
            continue
        earlier = first_line_of.setdefault(record.external_id, number) if record.external_id else number
        if earlier != number:  # the same id with other messages: which one is the prompt?
            report.errors.append(LineError(file, number, "id", _("id %(id)r already appears on line %(line)s with "
                                                                 "different messages")
                                           % {"id": record.external_id, "line": earlier}))
            continue
        seen.add(record.source_sha256)
        records.append(record)

    existing = set(Item.objects.filter(project=project, source_sha256__in=seen).values_list("source_sha256", flat=True))
    new = [r for r in records if r.source_sha256 not in existing]
    report.duplicates += len(records) - len(new)
    bad_lines = report.errors.lines
    report.skipped = len(bad_lines) if skip_bad_lines else 0
    if dry_run or (report.errors and not skip_bad_lines):
        return report
    with transaction.atomic():
        Item.objects.bulk_create(
            [Item(project=project, external_id=r.external_id, messages=r.messages, tools=r.tools, meta=r.meta,
                  source_sha256=r.source_sha256) for r in new],
            batch_size=1000,
        )
        figures.items_added(project_id=project.pk, items=len(new))
    report.created = len(new)
    return report
