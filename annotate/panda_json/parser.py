"""Import, reading: an uploaded `.panda.json` into a JSON document, and the document into one tree.

Import goes reader -> parser -> validator -> writer, as for prompts (DESIGN §6): `read_panda_upload`
reads the upload, `parse_panda_json` reads the document into a `ParsedTree` by the rules of
`validator`, and `importer` writes the tree. Every problem is reported as {file, field, message}, and
nothing of a file with a problem is imported.
"""

import hashlib
import json
import re
from dataclasses import dataclass

from dataplatform.conversations.model import Conversation
from dataplatform.errors import Refused
from dataplatform.imports import (
    SAVE_AS_UTF8,
    UTF8_BOM,
    UTF16_BOMS,
    FileTooLarge,
    JsonProblem,
    check_upload_size,
    json_path,
    load_json,
)

from . import validator
from .export import PANDA_VERSION
from .report import FieldError, PandaImportReport
from .validator import DialogRefused

# onPanda moves long contents into `hash_map` and leaves "<|hash|>" and their sha256 (base64) in their place.
HASH_REFERENCE = re.compile(r"^<\|hash\|>([A-Za-z0-9+/=]+)$")
MAX_FILE_BYTES = 50 * 1024 * 1024  # one prompt's tree; anything bigger is not an onPanda session
MAX_TIME_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z, the last moment a datetime can hold


class UnreadableFile(Refused, ValueError):
    """The upload is not a readable .panda.json at all (a 400 on the field `file`)."""

    field = "file"


def read_panda_upload(upload) -> dict:
    """Parse an uploaded `.panda.json`, refusing oversized, empty, non-UTF-8 or non-JSON files with a message
    naming the file and, where it can, the line and column (or the JSON path) at fault."""
    try:
        check_upload_size(upload)
    except FileTooLarge as exc:
        raise UnreadableFile(f"{exc}.") from None
    if upload.size > MAX_FILE_BYTES:
        raise UnreadableFile(f"{upload.name}: {upload.size:,} bytes is more than the {MAX_FILE_BYTES:,} allowed.")
    raw = upload.read()
    if not raw.strip():
        raise UnreadableFile(f"{upload.name}: the file is empty; a .panda.json file is one JSON object.")
    if raw.startswith(UTF16_BOMS):
        raise UnreadableFile(f"{upload.name}, line 1: not UTF-8: the file is UTF-16 (it starts with a UTF-16 "
                             f"byte-order mark); {SAVE_AS_UTF8}.")
    if raw.startswith(UTF8_BOM):
        raise UnreadableFile(f"{upload.name}, line 1: the file starts with a UTF-8 byte-order mark (BOM); "
                             f"{SAVE_AS_UTF8}.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UnreadableFile(f"{upload.name}, line {line}: not UTF-8 ({exc.reason} at byte {exc.start}); "
                             f"{SAVE_AS_UTF8}.") from exc
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise UnreadableFile(f"{upload.name}, line {exc.lineno} column {exc.colno}: not a JSON file ({exc.msg}).") \
            from exc
    except JsonProblem as exc:
        raise UnreadableFile(f"{upload.name}, {json_path(exc.path) or '(file)'}: {exc.message}.") from exc


@dataclass
class ParsedDialog:
    key: int
    response: str
    finish_reason: str
    is_good: bool
    parent: int | None  # file key of the parent dialog; None for the root
    operations: list[dict]


@dataclass
class ParsedTree:
    prompt: Conversation  # the prompt every dialog answers, with its tools
    dialogs: list[ParsedDialog]  # in key order, so every parent comes before its children
    update_time: int
    external_id: str
    panda_uuid: str


def panda_sha256(data) -> str:
    """sha256 of the canonical JSON of a whole file: the same document hashes the same however it was formatted."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _recover_hash_map(dialogs: dict, hash_map: dict, errors: list[str]) -> dict:
    """Put back the long contents onPanda moved into `hash_map` (errors name the missing hashes)."""

    def recover(value, path: str):
        if isinstance(value, str):
            match = HASH_REFERENCE.match(value)
            if not match:
                return value
            if match.group(1) not in hash_map:
                errors.append(path)
                return value
            return hash_map[match.group(1)]
        if isinstance(value, dict):
            return {key: recover(item, f"{path}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [recover(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return value

    return {key: recover(dialog, f"dialogs.{key}") for key, dialog in dialogs.items()}


def time_ms(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < MAX_TIME_MS:
        return None  # not a time (a later one would overflow datetime and end the import in a 500)
    # Early onPanda files wrote seconds; anything before ~1973 in milliseconds is taken as seconds.
    return int(value * 1000) if value < 1e11 else int(value)


def parse_panda_json(data, *, file: str, report: PandaImportReport) -> ParsedTree | None:
    """Check a document and read it into a single tree; None (with report.errors) if it cannot be imported."""

    def error(field_name: str, message: str) -> None:
        report.errors.append(FieldError(file, field_name, message))

    if not isinstance(data, dict):
        error("(file)", "a .panda.json file is a JSON object")
        return None
    if data.get("version") != PANDA_VERSION:
        error("version", f"must be {PANDA_VERSION!r} (a .panda.json v2 file), not {data.get('version')!r}")
    update_time = time_ms(data.get("update_time"))
    if update_time is None:
        error("update_time", "missing or not a number: the file was never saved by the annotator")
    hash_map = data.get("hash_map", {})
    if not isinstance(hash_map, dict):
        error("hash_map", "must be an object")
        hash_map = {}
    raw_dialogs = data.get("dialogs")
    if not isinstance(raw_dialogs, dict) or not raw_dialogs:
        error("dialogs", "must be a non-empty object of dialogs keyed 1, 2, ...")
        return None
    missing: list[str] = []
    raw_dialogs = _recover_hash_map(raw_dialogs, hash_map, missing)
    for path in missing:
        error(path, "refers to a hash that is not in hash_map")

    keys: dict[int, str] = {}
    for raw_key in raw_dialogs:
        try:
            key = int(raw_key)
        except (TypeError, ValueError):
            key = 0
        if key < 1:
            error(f"dialogs.{raw_key}", "dialog keys are positive integers")
        else:
            keys[key] = raw_key

    prompt, dialogs = _read_dialogs(raw_dialogs, keys, file=file, report=report)
    if report.errors:
        return None
    if not dialogs:
        error("dialogs", "no dialog ends with an assistant response; there is nothing to import")
        return None
    roots = [d.key for d in dialogs if d.parent is None]
    if len(roots) > 1:
        error(f"dialogs.{keys[roots[1]]}.operations[0]",
              f"starts a second tree (dialog {keys[roots[0]]} starts the first); a session is one tree, "
              "so only files with one tree can be imported")
    good = [d.key for d in dialogs if d.is_good]
    if len(good) > 1:
        error(f"dialogs.{keys[good[1]]}.annotate.is_good",
              f"a second good dialog (dialog {keys[good[0]]} is good too); a session accepts one answer")
    if report.errors:
        return None
    meta = data.get("dataplatform") if isinstance(data.get("dataplatform"), dict) else {}
    # A file exported here keeps its item's external id (even an empty one); others are known by their uuid.
    external_id = str(meta["external_id"] if "external_id" in meta else data.get("uuid") or "")[:200]
    return ParsedTree(prompt=prompt, dialogs=dialogs, update_time=update_time, external_id=external_id,
                      panda_uuid=str(data.get("uuid") or ""))


def _read_dialogs(raw_dialogs: dict, keys: dict[int, str], *, file: str,
                  report: PandaImportReport) -> tuple[Conversation | None, list[ParsedDialog]]:
    """The file's one prompt and the dialogs answering it, in key order; a refused dialog's problems go to
    the report, and a dialog still waiting for its answer to `report.skipped_dialogs`."""
    prompt: Conversation | None = None
    prompt_from = 0
    dialogs: list[ParsedDialog] = []
    last_key = max(keys, default=0)
    for key in sorted(keys):
        where = f"dialogs.{keys[key]}"
        dialog = raw_dialogs[keys[key]]
        try:
            conversation = validator.read_dialog(dialog, where, report.warnings)
            answer = conversation.messages[-1]
            if answer.role != "assistant":
                report.skipped_dialogs.append(keys[key])
                continue
            this_prompt = validator.prompt_of(conversation, where)
            if prompt is None:
                prompt, prompt_from = this_prompt, key
            elif this_prompt != prompt:
                raise DialogRefused((f"{where}.messages", f"the prompt (or its tools) differs from dialog "
                                     f"{keys[prompt_from]}'s; a session has one prompt, so edited prompts cannot "
                                     "be imported"))
            is_good = validator.is_good(dialog, where, last=key == last_key)
            operations = validator.operations_of(dialog, where)
            parent = validator.parent_of(operations, where)
        except DialogRefused as refused:
            report.errors.extend(FieldError(file, field_name, message) for field_name, message in refused.problems)
            continue
        # As in PandaTree: a parent that is not an earlier dialog (deleted, or itself) starts a new tree.
        if parent is not None and parent not in {d.key for d in dialogs}:
            parent = None
        dialogs.append(ParsedDialog(key=key, response=answer.content, finish_reason=answer.finish_reason or "",
                                    is_good=is_good, parent=parent, operations=operations))
    return prompt, dialogs
