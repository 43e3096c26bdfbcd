"""Import, reading: an uploaded `.panda.json` into a JSON document, and the document into one tree.

Import goes reader -> parser -> validator -> writer, as for prompts (DESIGN §6): `read_panda_upload`
reads the upload, `parse_panda_json` reads the document (every tree, live and deleted dialogs, and
all the rest it holds) into a `ParsedTree` by the rules of `validator`, and `importer` writes it. Every problem is reported as {file, field, message}, and
nothing of a file with a problem is imported.
"""

import copy
import hashlib
import json
import re
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext

from dataplatform.conversations.model import Conversation, Message
from dataplatform.errors import Refused
from dataplatform.imports import (
    SAVE_AS_UTF8,
    UTF8_BOM,
    UTF16_BOMS,
    FileTooLarge,
    JsonProblem,
    check_upload_size,
    field_label,
    json_path,
    load_json,
)

from . import cache_tree, validator
from .report import FieldError, PandaImportReport
from .validator import DialogRefused

# onPanda moves long contents into `hash_map` and leaves "<|hash|>" and their sha256 (base64) in their place.
HASH_REFERENCE = re.compile(r"^<\|hash\|>([A-Za-z0-9+/=]+)$")
MAX_FILE_BYTES = 50 * 1024 * 1024  # one prompt's tree; anything bigger is not an onPanda session
# What a file spells is bounded too (settings, by default as much again as this): its hash_map references
# put back at most PANDA_JSON_MAX_EXPANDED_BYTES, its cache_tree at most PANDA_CACHE_TREE_MAX_CHARS characters.
SUPPORTED_VERSIONS = (None, "1.0", "2.0")  # what PandaTree reads (a file before 1.0 has no version)
MAX_TIME_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z, the last moment a datetime can hold


class UnreadableFile(Refused, ValueError):
    """The upload is not a readable .panda.json at all (a 400 on the field `file`)."""

    field = "file"


def read_panda_upload(upload) -> dict:
    """Parse an uploaded `.panda.json`, refusing oversized, empty, non-UTF-8 or non-JSON files with a message
    naming the file and, where it can, the line and column (or the JSON path) at fault. The messages are in the
    request's language; the file's name, and Python's words about a byte or a JSON error, are left as they are."""
    values = {"file": upload.name, "fix": SAVE_AS_UTF8}
    try:
        check_upload_size(upload)
    except FileTooLarge as exc:
        raise UnreadableFile(gettext("%(problem)s.") % {"problem": exc}) from None
    if upload.size > MAX_FILE_BYTES:
        raise UnreadableFile(gettext("%(file)s: %(size)s bytes is more than the %(limit)s allowed.")
                             % {**values, "size": f"{upload.size:,}", "limit": f"{MAX_FILE_BYTES:,}"})
    raw = upload.read()
    if not raw.strip():
        raise UnreadableFile(gettext("%(file)s: the file is empty; a .panda.json file is one JSON object.") % values)
    if raw.startswith(UTF16_BOMS):
        raise UnreadableFile(gettext("%(file)s, line 1: not UTF-8: the file is UTF-16 (it starts with a UTF-16 "
                                     "byte-order mark); %(fix)s.") % values)
    if raw.startswith(UTF8_BOM):
        raise UnreadableFile(gettext("%(file)s, line 1: the file starts with a UTF-8 byte-order mark (BOM); %(fix)s.")
                             % values)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UnreadableFile(gettext("%(file)s, line %(line)s: not UTF-8 (%(reason)s at byte %(byte)s); %(fix)s.")
                             % {**values, "line": line, "reason": exc.reason, "byte": exc.start}) from exc
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise UnreadableFile(gettext("%(file)s, line %(line)s column %(column)s: not a JSON file (%(problem)s).")
                             % {**values, "line": exc.lineno, "column": exc.colno, "problem": exc.msg}) from exc
    except JsonProblem as exc:
        where = field_label(json_path(exc.path) or "(file)")
        raise UnreadableFile(gettext("%(file)s, %(field)s: %(problem)s.")
                             % {**values, "field": where, "problem": exc.message}) from exc


@dataclass
class ParsedDialog:
    key: int  # the file's key; it stays the node's key
    prompt: Conversation  # the conversation the answer follows, with the dialog's tools
    answer: Message  # the assistant message: reasoning, content, tool calls, finish_reason
    is_good: bool  # as PandaTree reads it: an unset verdict makes the latest dialog good
    parent: int | None  # the earlier dialog its first operation names (None: none, or not an earlier one)
    root: bool  # starts a tree of its own (PandaTree's rule: no parent, is_new_generated, is_prompt_modified)
    deleted: bool  # read from deleted_dialogs
    operations: list[dict]
    kept: dict  # the dialog as the file holds it minus its messages and tools: annotate, operations, custom keys
    raw: dict  # the dialog as the file holds it (hash_map expanded)


@dataclass
class ParsedTree:
    """A whole file: every answered dialog (live and deleted) in key order, and what else it holds."""

    dialogs: list[ParsedDialog]
    update_time: int
    external_id: str
    panda_uuid: str
    meta: dict  # kept on the Session: top-level fields, dialogs still waiting for an answer

    @property
    def prompt(self) -> Conversation:
        """The first dialog's prompt: the item's."""
        return self.dialogs[0].prompt


def panda_sha256(data) -> str:
    """sha256 of the canonical JSON of a whole file: the same document hashes the same however it was formatted."""
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ExpandsTooFar(Exception):
    """hash_map references that would put back more than PANDA_JSON_MAX_EXPANDED_BYTES; `path` names the one
    that passes it."""

    def __init__(self, path: str, limit: int):
        super().__init__(path)
        self.path, self.limit = path, limit


def _recover_hash_map(sections: dict[str, dict], hash_map: dict, missing: list[str]) -> dict[str, dict]:
    """Put back the long contents onPanda moved into `hash_map`, in each section of dialogs (`missing` gets the
    paths of references to hashes it does not hold), as onpanda's `recover_hash_map` does: a value put back is
    not searched for references again.

    A reference costs nothing in the file, and each one put back is stored, tokenized and kept in full, so one
    1 MB value named 100 times would be 100 MB. What the references add, the size of each value named as
    UTF-8 JSON once per reference, is counted before anything is expanded (the values are shared here, never
    copied); past PANDA_JSON_MAX_EXPANDED_BYTES in all, ExpandsTooFar names the reference that passed it."""
    limit = settings.PANDA_JSON_MAX_EXPANDED_BYTES
    sizes: dict[str, int] = {}
    total = 0

    def recover(value, path: str):
        nonlocal total
        if isinstance(value, str):
            match = HASH_REFERENCE.match(value)
            if not match:
                return value
            digest = match.group(1)
            if digest not in hash_map:
                missing.append(path)
                return value
            if digest not in sizes:  # measured once per hash, however often it is named
                sizes[digest] = len(json.dumps(hash_map[digest], ensure_ascii=False,
                                               separators=(",", ":")).encode("utf-8", "surrogatepass"))
            total += sizes[digest]
            if total > limit:
                raise ExpandsTooFar(path, limit)
            return hash_map[digest]
        if isinstance(value, dict):
            return {key: recover(item, f"{path}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [recover(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return value

    return {section: {key: recover(dialog, f"{section}.{key}") for key, dialog in dialogs.items()}
            for section, dialogs in sections.items()}


def time_ms(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < MAX_TIME_MS:
        return None  # not a time (a later one would overflow datetime and end the import in a 500)
    # Early onPanda files wrote seconds; anything before ~1973 in milliseconds is taken as seconds.
    return int(value * 1000) if value < 1e11 else int(value)


# Top-level fields the parser reads itself; every other one is kept as it is (Session.meta["file"]).
READ_FIELDS = ("dialogs", "deleted_dialogs", "hash_map", "version", "update_time", "uuid", "dataplatform")


def parse_panda_json(data, *, file: str, report: PandaImportReport) -> ParsedTree | None:
    """Check a document and read it into its trees; None (with report.errors) if it cannot be imported."""

    def error(field_name: str, message: str) -> None:
        report.errors.append(FieldError(file, field_name, message))

    if not isinstance(data, dict):
        error("(file)", gettext("a .panda.json file is a JSON object"))
        return None
    if data.get("version") not in SUPPORTED_VERSIONS:
        error("version", gettext("must be missing, '1.0' or '2.0' (what onpanda's PandaTree reads), not %(version)s")
              % {"version": repr(data.get("version"))})
    update_time = time_ms(data.get("update_time"))
    if update_time is None:
        error("update_time", gettext("missing or not a number: the file was never saved by the annotator"))
    hash_map = data.get("hash_map", {})
    if not isinstance(hash_map, dict):
        error("hash_map", gettext("must be an object"))
        hash_map = {}
    raw_dialogs = data.get("dialogs")
    if not isinstance(raw_dialogs, dict) or not raw_dialogs:
        error("dialogs", gettext("must be a non-empty object of dialogs keyed 1, 2, ..."))
        return None
    raw_deleted = data.get("deleted_dialogs") or {}
    if not isinstance(raw_deleted, dict):
        error("deleted_dialogs", gettext("must be an object of dialogs keyed like dialogs"))
        raw_deleted = {}
    if "cache_tree" in data:
        try:  # only to know it is within the bounds; it is kept as the file holds it
            cache_tree.decode(data["cache_tree"])
        except cache_tree.CacheRefused as exc:
            error("cache_tree", str(exc))
    missing: list[str] = []
    try:
        recovered = _recover_hash_map({"dialogs": raw_dialogs, "deleted_dialogs": raw_deleted}, hash_map, missing)
    except ExpandsTooFar as exc:
        error(exc.path, gettext("the hash_map references up to this one put back more than %(limit)s bytes in "
                                "all (PANDA_JSON_MAX_EXPANDED_BYTES); each copy is stored in full")
              % {"limit": f"{exc.limit:,}"})
        return None
    raw_dialogs, raw_deleted = recovered["dialogs"], recovered["deleted_dialogs"]
    for path in missing:
        error(path, gettext("refers to a hash that is not in hash_map"))

    keys: dict[int, tuple[str, str]] = {}  # key -> (section, raw key)
    for section, dialogs in (("dialogs", raw_dialogs), ("deleted_dialogs", raw_deleted)):
        for raw_key in dialogs:
            key = _key(raw_key)
            if key is None:
                error(f"{section}.{raw_key}", gettext("dialog keys are positive integers"))
            elif key in keys:
                error(f"{section}.{raw_key}", gettext("dialog %(key)s is in both dialogs and deleted_dialogs") % {"key": key})
            else:
                keys[key] = (section, raw_key)
    sections = {"dialogs": raw_dialogs, "deleted_dialogs": raw_deleted}
    live = [key for key, (section, _) in keys.items() if section == "dialogs"]
    dialogs, pending = _read_dialogs(sections, keys, max(live, default=0), file=file, report=report)
    if report.errors:
        return None
    if not dialogs:
        error("dialogs", gettext("no dialog ends with an assistant response; there is nothing to import"))
        return None
    meta = data.get("dataplatform") if isinstance(data.get("dataplatform"), dict) else {}
    # A file exported here keeps its item's external id (even an empty one); others are known by their uuid.
    external_id = str(meta["external_id"] if "external_id" in meta else data.get("uuid") or "")[:200]
    kept = {"file": {key: value for key, value in data.items() if key not in READ_FIELDS},
            "version": data.get("version"), "uuid": data.get("uuid"), "update_time": data.get("update_time"),
            "pending_dialogs": pending}
    return ParsedTree(dialogs=dialogs, update_time=update_time, external_id=external_id,
                      panda_uuid=str(data.get("uuid") or ""), meta=kept)


def _key(raw_key) -> int | None:
    try:
        key = int(raw_key)
    except (TypeError, ValueError):
        return None
    return key if key >= 1 and str(key) == str(raw_key).strip() else None


def _read_dialogs(sections: dict, keys: dict[int, tuple[str, str]], last_live: int, *, file: str,
                  report: PandaImportReport) -> tuple[list[ParsedDialog], dict]:
    """The answered dialogs in key order, and the raw dialogs still waiting for an answer (kept as they are;
    PandaTree skips them too). A refused dialog's problems go to the report."""
    dialogs: list[ParsedDialog] = []
    pending: dict = {}
    for key in sorted(keys):
        section, raw_key = keys[key]
        where = f"{section}.{raw_key}"
        dialog = sections[section][raw_key]
        try:
            conversation = validator.read_dialog(dialog, where)
            answer = conversation.messages[-1]
            if answer.role != "assistant":
                pending.setdefault(section, {})[raw_key] = dialog
                report.skipped_dialogs.append(raw_key)
                continue
            prompt = validator.prompt_of(conversation, where)
            verdict = validator.verdict(dialog, where)
            operations = validator.operations_of(dialog, where)
            parent = validator.parent_of(operations, where)
        except DialogRefused as refused:
            report.errors.extend(FieldError(file, field_name, message) for field_name, message in refused.problems)
            continue
        deleted = section == "deleted_dialogs"
        # As PandaTree reads it: unset, the latest of `dialogs` is the good one; a deleted dialog is never good.
        is_good = not deleted and (key == last_live if verdict is None else verdict)
        root = validator.is_root(operations)
        # A parent that is not an earlier answered dialog (itself, a later one, one still unanswered) is none.
        if parent is not None and parent not in {d.key for d in dialogs}:
            parent = None
        kept = {name: value for name, value in dialog.items() if name not in ("messages", "tools")}
        named = next((d for d in dialogs if d.key == parent), None)
        if not root and named is not None and named.prompt != prompt:
            # The app marks a dialog whose prompt differs from its parent's `is_prompt_modified`; a prompt edited
            # in place leaves it unset, and PandaTree (one prompt per tree) fails on the file. Such a dialog is
            # an edited prompt: a tree of its own, and the flag is written on export.
            root = True
            operations = copy.deepcopy(operations)
            operations[0]["is_prompt_modified"] = True
            kept["operations"] = operations
            report.warnings.append(gettext(
                "%(field)s: its prompt differs from dialog %(parent)s's, which it names as its parent, but "
                "is_prompt_modified is not set; imported as an edited prompt (a tree of its own) and exported "
                "with is_prompt_modified: true") % {"field": where, "parent": parent})
        dialogs.append(ParsedDialog(key=key, prompt=prompt, answer=answer, is_good=is_good, parent=parent,
                                    root=root or parent is None, deleted=deleted, operations=operations,
                                    kept=kept, raw=dialog))
    return dialogs, pending
