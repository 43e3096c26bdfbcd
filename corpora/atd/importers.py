"""ATD prompt-pool imports: JSONL, one prompt per line.

A line is `{id, prompt | messages, candidates?, meta?}`:

- `id` (required): a non-empty string or an integer, stored as a string (`external_id`);
- exactly one of `prompt`, a non-empty string that becomes `[{"role": "user", "content": prompt}]`, or
  `messages`, a non-empty list of `{role, content}` objects with string content (other keys of a
  message are kept);
- `candidates` (optional): exactly two non-empty, distinct strings, stored as candidate A and B with
  origin "imported". Without them the prompt's origin is "missing" and a sampling job fills them later;
- `meta` (optional): an object. Any other top-level key is kept in `meta` under its own name (a name
  that `meta` already holds is an error).

Built on `dataplatform.imports` (DESIGN.md section 6): errors are {file, line, field, message}; a dry
run writes nothing; a file imports whole or not at all unless skip_bad_lines. A prompt is matched on
its id: the same line content again (canonical sha256) is a duplicate, other content under a known id
is an error on `id`, and bytes already imported into the project add nothing.
"""

from collections import Counter
from collections.abc import Iterable, Iterator

from django.db import IntegrityError, transaction
from django.utils.translation import gettext, ngettext

from dataplatform.accounts.models import Project
from dataplatform.conversations.validation import check_messages
from dataplatform.imports import (
    HashingLines,
    ImportReport,
    LineError,
    canonical_sha256,
    parse_json_object,
    read_error,
    read_lines,
)
from dataplatform.tallies import services as tally_services

from . import figures
from .models import AtdPrompt, PromptSource

BATCH_SIZE = 1000
KNOWN_KEYS = frozenset({"id", "prompt", "messages", "candidates", "meta"})
ID_MAX = AtdPrompt._meta.get_field("external_id").max_length


class _LineCheck:
    """Validates one parsed line, collecting (field, message) problems, and builds the AtdPrompt fields."""

    def __init__(self, data: dict):
        self.data = data
        self.problems: list[tuple[str, str]] = []

    def problem(self, field: str, message: str) -> None:
        self.problems.append((field, message))

    def external_id(self) -> str:
        value = self.data.get("id")
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            self.problem("id", gettext("is required: a non-empty string or an integer"))
            return ""
        if len(value) > ID_MAX:
            self.problem("id", gettext("must be at most %(max)s characters long") % {"max": ID_MAX})
        return value

    def messages(self) -> list:
        has_prompt, has_messages = "prompt" in self.data, "messages" in self.data
        if has_prompt and has_messages:
            self.problem("prompt", gettext("give either prompt or messages, not both"))
            return []
        if has_prompt:
            prompt = self.data["prompt"]
            if not isinstance(prompt, str) or not prompt.strip():
                self.problem("prompt", gettext("must be a non-empty string"))
                return []
            return [{"role": "user", "content": prompt}]
        if not has_messages:
            self.problem("prompt", gettext("is required: a prompt string or a messages list"))
            return []
        messages = self.data["messages"]
        self.problems.extend(check_messages(messages).problems)
        return messages

    def candidates(self) -> tuple[str, str, str]:
        """(candidate_a, candidate_b, candidates_origin)."""
        value = self.data.get("candidates")
        if value is None:
            return "", "", "missing"
        if not isinstance(value, list) or len(value) != 2:
            if isinstance(value, list):
                got = ngettext("must be a list of exactly two answers [a, b], got %(count)s item",
                               "must be a list of exactly two answers [a, b], got %(count)s items", len(value))
                self.problem("candidates", got % {"count": len(value)})
            else:
                self.problem("candidates", gettext("must be a list of exactly two answers [a, b], got %(type)s")
                             % {"type": type(value).__name__})
            return "", "", "missing"
        valid = True
        for position, text in enumerate(value):
            if not isinstance(text, str) or not text.strip():
                self.problem(f"candidates[{position}]", gettext("must be a non-empty string"))
                valid = False
        if valid and value[0] == value[1]:
            self.problem("candidates[1]", gettext("is identical to candidates[0]; the two answers must differ"))
        return value[0], value[1], "imported"

    def meta(self) -> dict:
        meta = self.data.get("meta")
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            self.problem("meta", gettext("must be an object"))
            meta = {}
        merged = dict(meta)
        for key in [k for k in self.data if k not in KNOWN_KEYS]:
            if key in merged:
                self.problem(key, gettext("is also a key of meta (other top-level keys are kept in meta); rename one"))
            merged[key] = self.data[key]
        return merged

    def fields(self) -> dict:
        external_id, messages = self.external_id(), self.messages()  # problems in the order of the keys
        candidate_a, candidate_b, origin = self.candidates()
        return {"external_id": external_id, "messages": messages, "candidate_a": candidate_a,
                "candidate_b": candidate_b, "candidates_origin": origin, "meta": self.meta()}


def _good_lines(report: ImportReport, lines: Iterable[bytes | str]) -> Iterator[tuple[int, str, dict]]:
    """(line number, line sha256, AtdPrompt fields) for each valid line; problems go to the report."""
    for number, text, trouble in read_lines(lines):
        report.lines = number
        if trouble:
            report.errors.append(read_error(report.file, number, trouble))
            continue
        data, error = parse_json_object(report.file, number, text)
        if error is not None:
            report.errors.append(error)
            continue
        check = _LineCheck(data)
        fields = check.fields()
        if check.problems:
            report.errors.extend(LineError(report.file, number, f, m) for f, m in check.problems)
        else:
            yield number, canonical_sha256(data), fields


def _unique_in_file(report: ImportReport, lines: Iterable[bytes | str]) -> dict[str, tuple[int, str, dict]]:
    """external_id -> its first good line; a later line with the same id is a duplicate or an error."""
    first: dict[str, tuple[int, str, dict]] = {}
    for number, sha256, fields in _good_lines(report, lines):
        key = fields["external_id"]
        if key not in first:
            first[key] = (number, sha256, fields)
        elif first[key][1] == sha256:
            report.duplicates += 1
        else:
            report.errors.append(LineError(report.file, number, "id", gettext(
                "id %(id)s is already on line %(line)s with different content") % {"id": repr(key), "line": first[key][0]}))
    return first


def _stored_hashes(project: Project, ids: list[str]) -> dict[str, str]:
    """external_id -> source_sha256 of the project's prompts among `ids`, looked up in batches."""
    stored: dict[str, str] = {}
    prompts = AtdPrompt.objects.filter(project=project)
    for start in range(0, len(ids), BATCH_SIZE):
        chunk = ids[start:start + BATCH_SIZE]
        stored.update(prompts.filter(external_id__in=chunk).values_list("external_id", "source_sha256"))
    return stored


def _not_yet_stored(project: Project, report: ImportReport,
                    found: dict[str, tuple[int, str, dict]]) -> list[tuple[int, str, dict]]:
    stored = _stored_hashes(project, list(found))
    fresh = []
    for key, (number, sha256, fields) in found.items():
        held = stored.get(key)
        if held is None:
            fresh.append((number, sha256, fields))
        elif held == sha256:
            report.duplicates += 1
        else:
            report.errors.append(LineError(report.file, number, "id", gettext(
                "id %(id)s already exists in this project with different content") % {"id": repr(key)}))
    return fresh


def _store(project: Project, report: ImportReport, rows: list[tuple[int, str, dict]], file_sha256: str,
           user) -> None:
    try:
        with transaction.atomic():
            source = PromptSource.objects.create(project=project, filename=report.file[:255], sha256=file_sha256,
                                                 rows=len(rows), created_by=user)
            created = AtdPrompt.objects.bulk_create([AtdPrompt(project=project, source=source, source_sha256=sha256,
                                                               **fields) for _, sha256, fields in rows],
                                                     batch_size=BATCH_SIZE)
            tally_services.add(project.pk, figures.POOL, Counter(prompt.candidates_origin for prompt in created))
    except IntegrityError:
        report.errors.append(LineError(report.file, 0, "(file)", gettext(
            "a concurrent import stored this file or some of its prompts; nothing was written, import it again")))
    else:
        report.created = len(rows)


def import_prompts(*, project: Project, lines: Iterable[bytes | str], file: str = "prompts.jsonl",
                   dry_run: bool = False, skip_bad_lines: bool = False, user=None) -> ImportReport:
    """Import a prompt-pool JSONL (see the module docstring) into `project`; returns the report."""
    report = ImportReport(file=file, dry_run=dry_run)
    hashing = HashingLines(lines)
    found = _unique_in_file(report, hashing)
    file_sha256 = hashing.hexdigest()
    if PromptSource.objects.filter(project=project, sha256=file_sha256).exists():
        report.duplicates += len(found)  # the same bytes were imported before: every good line is held
        fresh = []
    else:
        fresh = _not_yet_stored(project, report, found)
    report.errors.sort(key=lambda error: error.line)
    if skip_bad_lines:
        report.skipped = len(report.errors.lines)
    may_write = skip_bad_lines or not report.errors
    if fresh and may_write and not dry_run:
        _store(project, report, fresh, file_sha256, user if getattr(user, "is_authenticated", False) else None)
    return report
