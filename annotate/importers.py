"""Prompt import: JSONL of chat `messages`, optionally with `id` and `meta`.

reader -> parser -> validator -> writer. Every problem is reported as
{file, line, field, message}. A file imports whole or not at all unless the
caller asks to skip bad lines; a dry run reports without writing. Re-importing a
record (same id and messages) adds nothing.
"""

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import transaction

from dataplatform.accounts.models import Project

from .models import Item

ROLES = {"system", "user", "assistant", "tool"}
MAX_LINE_BYTES = 1_000_000


@dataclass
class LineError:
    file: str
    line: int
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


@dataclass
class ImportReport:
    file: str
    dry_run: bool
    lines: int = 0
    created: int = 0
    duplicates: int = 0
    skipped: int = 0
    errors: list[LineError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "lines": self.lines, "created": self.created,
                "duplicates": self.duplicates, "skipped": self.skipped, "errors": [e.as_dict() for e in self.errors]}


@dataclass
class PromptRecord:
    line: int
    messages: list[dict]
    external_id: str
    meta: dict

    @property
    def source_sha256(self) -> str:
        canonical = json.dumps({"id": self.external_id, "messages": self.messages}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_lines(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str | None, str | None]]:
    """Yield (line number, text, decoding problem) for each non-blank line."""
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            if len(raw) > MAX_LINE_BYTES:
                yield number, None, f"line is longer than {MAX_LINE_BYTES:,} bytes"
                continue
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 ({exc.reason} at byte {exc.start})"
                continue
        if raw.strip():
            yield number, raw, None


def parse_record(file: str, number: int, text: str) -> tuple[PromptRecord | None, list[LineError]]:
    def error(field_name: str, message: str) -> tuple[None, list[LineError]]:
        return None, [LineError(file, number, field_name, message)]

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return error("(line)", f"invalid JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(data, dict):
        return error("(line)", "each line must be a JSON object")
    errors = []
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        errors.append(LineError(file, number, "messages", "must be a non-empty list of {role, content}"))
    else:
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if not isinstance(message, dict):
                errors.append(LineError(file, number, where, "must be an object"))
                continue
            if message.get("role") not in ROLES:
                errors.append(LineError(file, number, f"{where}.role", f"must be one of {', '.join(sorted(ROLES))}"))
            if not isinstance(message.get("content"), str):
                errors.append(LineError(file, number, f"{where}.content", "must be a string"))
        if not errors and messages[-1]["role"] == "assistant":
            errors.append(LineError(file, number, f"messages[{len(messages) - 1}].role",
                                    "the last message is the model's turn to answer; it must not be 'assistant'"))
        if not errors and not any(m["role"] == "user" for m in messages):
            errors.append(LineError(file, number, "messages", "needs at least one 'user' message"))
    external_id = data.get("id", "")
    if not isinstance(external_id, str | int) or isinstance(external_id, bool):
        errors.append(LineError(file, number, "id", "must be a string or an integer"))
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        errors.append(LineError(file, number, "meta", "must be an object"))
    if errors:
        return None, errors
    return PromptRecord(line=number, messages=messages, external_id=str(external_id), meta=meta), []


def import_prompts(*, project: Project, lines: Iterable[bytes | str], file: str = "upload.jsonl",
                   dry_run: bool = False, skip_bad_lines: bool = False) -> ImportReport:
    report = ImportReport(file=file, dry_run=dry_run)
    records: list[PromptRecord] = []
    seen: set[str] = set()
    for number, text, problem in read_lines(lines):
        report.lines = number
        if problem:
            report.errors.append(LineError(file, number, "(line)", problem))
            continue
        record, errors = parse_record(file, number, text)
        report.errors += errors
        if record is None:
            continue
        if record.source_sha256 in seen:
            report.duplicates += 1
            continue
        seen.add(record.source_sha256)
        records.append(record)

    existing = set(Item.objects.filter(project=project, source_sha256__in=seen).values_list("source_sha256", flat=True))
    new = [r for r in records if r.source_sha256 not in existing]
    report.duplicates += len(records) - len(new)
    bad_lines = {e.line for e in report.errors}
    report.skipped = len(bad_lines) if skip_bad_lines else 0
    if dry_run or (report.errors and not skip_bad_lines):
        return report
    with transaction.atomic():
        Item.objects.bulk_create(
            [Item(project=project, external_id=r.external_id, messages=r.messages, meta=r.meta,
                  source_sha256=r.source_sha256) for r in new],
            batch_size=1000,
        )
    report.created = len(new)
    return report
