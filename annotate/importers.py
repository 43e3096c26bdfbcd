"""Prompt import: JSONL of chat `messages`, optionally with `tools`, `id` and `meta`.

reader -> parser -> validator -> writer. Every problem is reported as
{file, line, field, message}. A file imports whole or not at all unless the
caller asks to skip bad lines; a dry run reports without writing. Re-importing a
record (same id, messages and tools) adds nothing.

The messages are read by the conversation model's reader (the spellings real files use): earlier turns
may carry reasoning, tool calls and tool results, as context for the model's answer. They are stored as
that model stores them (`Conversation.as_dict()`).
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.utils.translation import gettext as _

from dataplatform.accounts.models import Project
from dataplatform.conversations.reading import read_conversation
from dataplatform.imports import (
    ImportReport,
    LineError,
    canonical_sha256,
    parse_json_object,
    read_error,
    read_lines,
)

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


def parse_record(file: str, number: int, text: str) -> tuple[PromptRecord | None, list[LineError]]:
    data, problem = parse_json_object(file, number, text)
    if problem:
        return None, [problem]
    read = read_conversation(data.get("messages"), data.get("tools"))
    errors = [LineError(file, number, field, message) for field, message in read.problems]
    prompt = read.conversation
    roles = [message.role for message in prompt.messages] if prompt else []
    if prompt and roles[-1] == "assistant":
        errors.append(LineError(file, number, f"messages[{len(roles) - 1}].role",
                                _("the last message is the model's turn to answer; it must not be 'assistant'")))
    if prompt and "user" not in roles:
        errors.append(LineError(file, number, "messages", _("needs at least one 'user' message")))
    external_id = data.get("id", "")
    if not isinstance(external_id, str | int) or isinstance(external_id, bool):
        errors.append(LineError(file, number, "id", _("must be a string or an integer")))
    elif len(str(external_id)) > ID_MAX:  # the database would refuse the whole file
        errors.append(LineError(file, number, "id", _("must be at most %(max)s characters long") % {"max": ID_MAX}))
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        errors.append(LineError(file, number, "meta", _("must be an object")))
    if errors:
        return None, errors
    stored = prompt.as_dict()
    return PromptRecord(line=number, messages=stored["messages"], tools=stored.get("tools", []),
                        external_id=str(external_id), meta=meta), []


def import_prompts(*, project: Project, lines: Iterable[bytes | str], file: str = "upload.jsonl",
                   dry_run: bool = False, skip_bad_lines: bool = False) -> ImportReport:
    report = ImportReport(file=file, dry_run=dry_run)
    records: list[PromptRecord] = []
    seen: set[str] = set()
    first_line_of: dict[str, int] = {}  # external id -> the line that first gave it
    for number, text, problem in read_lines(lines):
        report.lines = number
        if problem:
            report.errors.append(read_error(file, number, problem))
            continue
        record, errors = parse_record(file, number, text)
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
    report.created = len(new)
    return report
