"""`.panda.json` v2, the file format of the onPanda tool and package: export a session, import a file.

Export: a session is already a `.panda.json` tree. Each node is a dialog keyed by its
`key`: the item's prompt plus one assistant message (the node's text, derived from
its ids), `annotate.is_good` (true only for the accepted node of an accepted
session), and `operations` written from the session's events the way onPanda's
annotator writes them (`generate_new`, `continue_with_chosen` with the chosen token
and the rejected position's `top_logprobs`, `continue_with_input`,
`continue_generating`). `operations[0].parent` links a correction to the dialog it
corrects, which is how `onpanda.parser.PandaTree` rebuilds the tree.

Import: reader -> parser -> validator -> writer, as for prompts (DESIGN §6). Every
problem is reported as {file, field, message}; a file imports whole or not at all;
re-importing a file (same sha256 of its canonical JSON) adds nothing.

A `.panda.json` stores text, not token ids. Imported responses are therefore
re-tokenized with the current backend's tokenizer: the ids may differ from the ones
the original model produced (a model can emit a non-canonical tokenization), the
fork positions are recomputed from the new ids, and per-token logprobs, top-k and
seeds are unknown (None / empty) except what the operations record at a fork.
Imported trees are history: every token is locked and no node is reopened.
"""

import copy
import hashlib
import json
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from dataplatform.accounts.models import Project
from dataplatform.imports import (
    SAVE_AS_UTF8,
    UTF8_BOM,
    UTF16_BOMS,
    FileTooLarge,
    JsonProblem,
    check_storable,
    check_upload_size,
    json_path,
    load_json,
)
from dataplatform.inference import Backend

from . import services
from .importers import ROLES
from .models import (
    Claim,
    ClaimState,
    Event,
    EventKind,
    Item,
    Node,
    NodeStatus,
    Origin,
    Session,
    SessionStatus,
)
from .supervision import fork_token_idx, response_ids

PANDA_VERSION = "2.0"
# Fixed forever: a session's uuid is uuid5(this, ...) so that re-exports of a session carry the same uuid.
SESSION_UUID_NAMESPACE = uuid.UUID("0c6f3e1a-5b7d-4f0e-9a2c-8d4b1e6f7a35")
HASH_PREFIX = "<|hash|>"  # onPanda moves long contents into `hash_map` and leaves "<|hash|>sha256-base64"
HASH_REFERENCE = re.compile(r"^<\|hash\|>([A-Za-z0-9+/=]+)$")
# Flags on a first operation that make its dialog the root of a new tree (as PandaTree reads them).
ROOT_FLAGS = ("is_new_generated", "is_prompt_modified")
FINISH_MAX = Node._meta.get_field("finish_reason").max_length
MODEL_MAX = Node._meta.get_field("model_id").max_length


# --- export -------------------------------------------------------------------------------------

def session_uuid(session: Session) -> str:
    # The item's source hash keeps two deployments' session 7 apart.
    return str(uuid.uuid5(SESSION_UUID_NAMESPACE, f"annotate.session:{session.pk}:{session.item.source_sha256}"))


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _token_entry(token_id: int, piece: bytes, logprob: float | None) -> dict:
    """A token the way OpenAI's logprobs (and so onPanda) write it: text, raw bytes, logprob; plus its id."""
    return {"token": piece.decode("utf-8", errors="replace"), "token_id": token_id, "bytes": list(piece),
            "logprob": logprob}


def _rejected_token(parent: Node, position: int, top: list, backend: Backend) -> dict:
    """The token the correction replaced, with where it stood and the candidates the model offered there."""
    prefix_chars = len(backend.detokenize(parent.token_ids[:position])) if position else 0
    if position >= len(parent.token_ids):  # an imported child that goes on where its parent stopped
        return {"token": "", "token_id": None, "bytes": [], "logprob": None, "finish_reason": "stop",
                "token_index": position, "unicode_start_index": prefix_chars}
    rejected_id = parent.token_ids[position]
    top = [(int(token_id), logprob) for token_id, logprob in top or []]
    pieces = backend.token_pieces([rejected_id] + [token_id for token_id, _ in top])
    logprob = parent.logprobs[position] if position < len(parent.logprobs) else None
    entry = _token_entry(rejected_id, pieces[0], logprob)
    entry["token_index"] = position
    entry["unicode_start_index"] = prefix_chars  # onPanda records where the token starts, in characters
    if top:
        entry["top_logprobs"] = [_token_entry(token_id, piece, lp)
                                 for (token_id, lp), piece in zip(top, pieces[1:], strict=True)]
    return entry


def _operation(event: Event, node: Node, parent: Node | None, first: bool, backend: Backend) -> dict | None:
    """One onPanda operation for an event on `node`, or None for events that are not dialog operations."""
    payload = event.payload or {}
    # The first operation names the dialog it came from; later ones are written back to the
    # dialog itself, and onPanda then names the dialog's own key.
    parent_key = parent.key if first and parent is not None else node.key
    operation: dict = {"operator": event.kind, "parent": str(parent_key), "time": _ms(event.created_at),
                       "on_policy": True}
    if node.model_id:
        operation["chat_config"] = {"model": node.model_id}
    position = payload.get("position", node.fork_index)
    if event.kind == EventKind.GENERATE_NEW:
        operation["is_new_generated"] = True
        if payload.get("seed") is not None:
            operation.setdefault("chat_config", {})["seed"] = payload["seed"]
    elif event.kind == EventKind.CONTINUE_WITH_CHOSEN and parent is not None:
        token_id = payload.get("token_id", node.token_ids[position])
        operation["continue_with_chosen"] = {
            **_token_entry(token_id, backend.token_pieces([token_id])[0], payload.get("logprob")),
            "rank": payload.get("rank"),
        }
        operation["rejected_token"] = _rejected_token(parent, position, payload.get("top_logprobs"), backend)
    elif event.kind in (EventKind.CONTINUE_WITH_INPUT, EventKind.FORCE_STOP) and parent is not None:
        # A forced stop is what onPanda writes when "<|stop|>" is typed at the fork.
        operation["operator"] = EventKind.CONTINUE_WITH_INPUT
        typed = payload.get("text", "") if event.kind == EventKind.CONTINUE_WITH_INPUT else services.STOP_MARKER
        operation["continue_with_input"] = {"input_patch": typed, "token_ids": payload.get("token_ids", [])}
        operation["rejected_token"] = _rejected_token(parent, position, [], backend)
    elif event.kind == EventKind.CONTINUE_GENERATING:
        operation["from_token"] = payload.get("from_token")
    else:  # undo, accept, reject: moves between dialogs and verdicts, not operations on one
        return None
    return operation


def _fallback_operation(node: Node, parent: Node | None) -> dict:
    """An operation for a node with no events of its own (not made by the services); keeps the tree linked."""
    operation = {"parent": str(parent.key if parent else node.key), "time": _ms(node.created_at), "on_policy": True}
    if parent is None:
        return {"operator": EventKind.GENERATE_NEW, "is_new_generated": True, **operation}
    typed = node.fork_index is not None and node.fork_index < len(node.origins) and \
        node.origins[node.fork_index] == Origin.TYPED
    return {"operator": EventKind.CONTINUE_WITH_INPUT if typed else EventKind.CONTINUE_WITH_CHOSEN, **operation}


def session_to_panda_json(session: Session, *, backend: Backend | None = None) -> dict:
    """The session as a `.panda.json` v2 document (a dict; `json.dumps` it to write a file).

    Uses `session.nodes` and `session.events` as they are, so a caller exporting many
    sessions can prefetch them (the exporter does).
    """
    backend = backend or services.backend_for(session.item.project)
    item = session.item
    nodes = sorted(session.nodes.all(), key=lambda node: node.key)
    by_id = {node.pk: node for node in nodes}
    events_of: dict[int, list[Event]] = defaultdict(list)
    for event in sorted(session.events.all(), key=lambda event: event.pk):
        if event.node_id in by_id:
            events_of[event.node_id].append(event)
    accepted_id = session.current_node_id if session.status == SessionStatus.ACCEPTED else None

    dialogs = {}
    for node in nodes:
        parent = by_id.get(node.parent_id)
        operations = []
        for event in events_of[node.pk]:
            operation = _operation(event, node, parent, not operations, backend)
            if operation is not None:
                operations.append(operation)
        answer = {"role": "assistant", "content": backend.detokenize(response_ids(node))}
        if node.finish_reason:
            answer["finish_reason"] = node.finish_reason
        dialogs[str(node.key)] = {
            "messages": copy.deepcopy(item.messages) + [answer],
            "annotate": {"is_good": node.pk == accepted_id},
            "operations": operations or [_fallback_operation(node, parent)],
        }
    return {
        "version": PANDA_VERSION,
        "uuid": session_uuid(session),
        "update_time": _ms(session.updated_at),
        "dialogs": dialogs,
        "deleted_dialogs": {},  # undone branches stay in the tree; nothing is ever deleted
        "hash_map": {},
        # Ignored by onPanda; lets an import back into the platform keep the item's identity.
        "dataplatform": {"session_id": session.pk, "item_id": item.pk, "external_id": item.external_id,
                         "status": session.status, "annotator": session.annotator.get_username()},
    }


# --- import: reader and parser --------------------------------------------------------------------

@dataclass
class FieldError:
    file: str
    field: str
    message: str

    def as_dict(self) -> dict:
        return {"file": self.file, "field": self.field, "message": self.message}


@dataclass
class PandaImportReport:
    file: str
    dry_run: bool = False
    sha256: str = ""
    created: bool = False
    duplicate: bool = False
    item_id: int | None = None
    session_id: int | None = None
    dialogs: int = 0
    # Dialogs whose last message is not the assistant's (a prompt still waiting for an answer); PandaTree drops them too.
    skipped_dialogs: list[str] = field(default_factory=list)
    key_map: dict[str, int] = field(default_factory=dict)  # file's dialog key -> node key
    warnings: list[str] = field(default_factory=list)
    errors: list[FieldError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict:
        return {"file": self.file, "dry_run": self.dry_run, "sha256": self.sha256, "created": self.created,
                "duplicate": self.duplicate, "item_id": self.item_id, "session_id": self.session_id,
                "dialogs": self.dialogs, "skipped_dialogs": self.skipped_dialogs, "key_map": self.key_map,
                "warnings": self.warnings, "errors": [error.as_dict() for error in self.errors]}


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
    prompt: list[dict]
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


def _content_text(content) -> str | None:
    """A message's text: a string, or a list of text chunks (onPanda's multi-part content). None if neither."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(c, dict) and c.get("type") == "text"
                                         and isinstance(c.get("text"), str) for c in content):
        return "".join(chunk["text"] for chunk in content)
    return None


MAX_TIME_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z, the last moment a datetime can hold


def _time_ms(value) -> int | None:
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
    update_time = _time_ms(data.get("update_time"))
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
    max_key = max(keys, default=0)

    prompt: list[dict] | None = None
    prompt_from = 0
    dialogs: list[ParsedDialog] = []
    for key in sorted(keys):
        where = f"dialogs.{keys[key]}"
        dialog = raw_dialogs[keys[key]]
        if not isinstance(dialog, dict):
            error(where, "must be an object")
            continue
        messages = dialog.get("messages")
        if not isinstance(messages, list) or not messages:
            error(f"{where}.messages", "must be a non-empty list of {role, content}")
            continue
        normalized, bad = [], False
        finish_reason = messages[-1].get("finish_reason") if isinstance(messages[-1], dict) else None
        if finish_reason is not None and (not isinstance(finish_reason, str) or len(finish_reason) > FINISH_MAX):
            error(f"{where}.messages[{len(messages) - 1}].finish_reason",
                  f"must be a string of at most {FINISH_MAX} characters, such as 'stop' or 'length'")
            bad = True
        for index, message in enumerate(messages):
            text = _content_text(message.get("content")) if isinstance(message, dict) else None
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                error(f"{where}.messages[{index}].role", f"must be one of {', '.join(sorted(ROLES))}")
                bad = True
            elif text is None:
                error(f"{where}.messages[{index}].content", "must be text (a string or a list of text chunks)")
                bad = True
            else:
                normalized.append({"role": message["role"], "content": text})
                dropped = sorted(set(message) - {"role", "content", "finish_reason"})
                if dropped:  # reasoning, tool calls, names...: a node holds the content's tokens only
                    report.warnings.append(f"{where}.messages[{index}]: only role and content are imported "
                                           f"(dropped {', '.join(dropped)})")
        if bad:
            continue
        if normalized[-1]["role"] != "assistant":
            report.skipped_dialogs.append(keys[key])
            continue
        this_prompt = normalized[:-1]
        if not any(m["role"] == "user" for m in this_prompt) or this_prompt[-1]["role"] == "assistant":
            error(f"{where}.messages", "needs a prompt with a 'user' message, followed by one assistant response")
            continue
        if prompt is None:
            prompt, prompt_from = this_prompt, key
        elif this_prompt != prompt:
            error(f"{where}.messages", f"the prompt differs from dialog {keys[prompt_from]}'s; "
                                       "a session has one prompt, so edited prompts cannot be imported")
            continue

        annotate = dialog.get("annotate") or {}
        is_good = annotate.get("is_good") if isinstance(annotate, dict) else None
        if not isinstance(annotate, dict) or not isinstance(is_good, bool | None):
            error(f"{where}.annotate.is_good", "must be true, false or null")
            continue
        if is_good is None:  # onPanda's default: the last dialog is the good one
            is_good = key == max_key

        operations = dialog.get("operations") or []
        if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
            error(f"{where}.operations", "must be a list of objects")
            continue
        parent = None
        first = operations[0] if operations else {}
        if len(_model_of(first)) > MODEL_MAX:
            error(f"{where}.operations[0].chat_config.model", f"must be at most {MODEL_MAX} characters long")
            continue
        if first.get("parent") and not any(first.get(flag) for flag in ROOT_FLAGS):
            try:
                parent = int(first["parent"])
            except (TypeError, ValueError):
                error(f"{where}.operations[0].parent", "must be the key of another dialog")
                continue
        # As in PandaTree: a parent that is not an earlier dialog (deleted, or itself) starts a new tree.
        if parent is not None and parent not in {d.key for d in dialogs}:
            parent = None
        dialogs.append(ParsedDialog(key=key, response=normalized[-1]["content"],
                               finish_reason=str(messages[-1].get("finish_reason") or ""),
                               is_good=is_good, parent=parent, operations=operations))

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


# --- import: tokenize into nodes, then write --------------------------------------------------------

@dataclass
class _NodeSpec:
    key: int
    parent: "_NodeSpec | None"
    dialog: ParsedDialog
    token_ids: list[int]
    logprobs: list
    top: list
    origins: list[str]
    candidate_ranks: list
    fork_index: int | None
    model_id: str
    events: list[tuple[str, dict, int | None]]  # (kind, payload, time in ms)


def _model_of(operation: dict) -> str:
    config = operation.get("chat_config")
    return str(config.get("model") or "") if isinstance(config, dict) else ""


def _top_of(operation: dict) -> list[list]:
    """[[token_id, logprob], ...] at the fork, from the rejected token's top_logprobs when they carry ids."""
    rejected = operation.get("rejected_token")
    top = rejected.get("top_logprobs") if isinstance(rejected, dict) else None
    if not isinstance(top, list):
        return []
    return [[entry["token_id"], entry.get("logprob")] for entry in top
            if isinstance(entry, dict) and isinstance(entry.get("token_id"), int)]


def _node_spec(dialog: ParsedDialog, parent: "_NodeSpec | None", key: int, backend: Backend, *, file: str,
               report: PandaImportReport) -> _NodeSpec:
    ids = backend.tokenize(dialog.response) if dialog.response else []
    first = dialog.operations[0] if dialog.operations else {}
    model_id = _model_of(first) or (parent.model_id if parent else "")
    spec = _NodeSpec(key=key, parent=parent, dialog=dialog, token_ids=ids, logprobs=[None] * len(ids),
                     top=[[] for _ in ids], origins=[Origin.MODEL] * len(ids), candidate_ranks=[None] * len(ids),
                     fork_index=None, model_id=model_id, events=[])
    if parent is None:
        spec.events.append((EventKind.GENERATE_NEW, {"model_id": model_id, "seed": None, "imported_from": file},
                            _time_ms(first.get("time"))))
    else:
        fork = fork_token_idx(parent.token_ids, ids)
        spec.fork_index = fork
        # The prefix is the parent's, as in a correction made here.
        for name in ("logprobs", "top", "origins", "candidate_ranks"):
            setattr(spec, name, getattr(parent, name)[:fork] + getattr(spec, name)[fork:])
        spec.events.append(_correction(spec, parent, first, backend, report))
    for operation in dialog.operations[1:]:
        if operation.get("operator") == EventKind.CONTINUE_GENERATING:
            spec.events.append((EventKind.CONTINUE_GENERATING, {"from_token": operation.get("from_token")},
                                _time_ms(operation.get("time"))))
    return spec


def _correction(spec: _NodeSpec, parent: _NodeSpec, operation: dict, backend: Backend,
                report: PandaImportReport) -> tuple[str, dict, int | None]:
    """The correction event that made `spec` from `parent`, and the origins of its tokens from the fork on."""
    ids, fork = spec.token_ids, spec.fork_index
    tail = len(ids) - fork
    time = _time_ms(operation.get("time"))
    base = {"position": fork, "rejected_token_id": parent.token_ids[fork] if fork < len(parent.token_ids) else None}
    operator = operation.get("operator")
    patch = (operation.get("continue_with_input") or {}).get("input_patch") \
        if isinstance(operation.get("continue_with_input"), dict) else None
    if operator == EventKind.CONTINUE_WITH_INPUT and isinstance(patch, str):
        stop = patch.endswith(services.STOP_MARKER)
        typed = patch[: -len(services.STOP_MARKER)] if stop else patch
        if not typed and stop:
            return EventKind.FORCE_STOP, base, time
        # Re-tokenized text: the typed tokens are as many as the typed text alone makes (at most the tail).
        typed_count = min(len(backend.tokenize(typed)) if typed else 0, tail)
        spec.origins[fork:] = [Origin.TYPED] * typed_count + [Origin.MODEL] * (tail - typed_count)
        return EventKind.CONTINUE_WITH_INPUT, {**base, "text": patch, "token_ids": ids[fork:fork + typed_count],
                                               "stop": stop}, time
    if operator == EventKind.CONTINUE_WITH_CHOSEN and tail:
        chosen = operation.get("continue_with_chosen") if isinstance(operation.get("continue_with_chosen"), dict) \
            else {}
        top = _top_of(operation)
        candidates = [token_id for token_id, _ in top]
        rank = chosen.get("rank") if isinstance(chosen.get("rank"), int) else (
            candidates.index(ids[fork]) + 1 if ids[fork] in candidates else None)
        logprob = chosen.get("logprob") if isinstance(chosen.get("logprob"), int | float) else None
        spec.origins[fork:] = [Origin.CANDIDATE] + [Origin.MODEL] * (tail - 1)
        spec.logprobs[fork], spec.top[fork], spec.candidate_ranks[fork] = logprob, top, rank
        return EventKind.CONTINUE_WITH_CHOSEN, {**base, "token_id": ids[fork], "rank": rank, "logprob": logprob,
                                                "top_logprobs": top}, time
    if operator == EventKind.CONTINUE_WITH_CHOSEN:  # the chosen "token" was the stop
        return EventKind.FORCE_STOP, base, time
    # Any other operator (an off-policy edit, a tool call...): nothing says the model wrote what follows
    # the fork, so it is recorded as typed.
    report.warnings.append(f"dialog {spec.dialog.key}: operator {operator!r} is imported as a typed rewrite")
    spec.origins[fork:] = [Origin.TYPED] * tail
    return EventKind.CONTINUE_WITH_INPUT, {**base, "text": backend.detokenize(ids[fork:]), "token_ids": ids[fork:],
                                           "stop": False, "operator": operator}, time


def _when(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms is not None else None


MAX_FILE_BYTES = 50 * 1024 * 1024  # one prompt's tree; anything bigger is not an onPanda session


class UnreadableFile(ValueError):
    pass


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


def import_panda_json(*, project: Project, data, annotator, file: str = "upload.panda.json",
                      dry_run: bool = False, backend: Backend | None = None) -> PandaImportReport:
    """Import one `.panda.json` v2 file as an Item with a finished Session of `annotator`.

    A file with a good dialog becomes an accepted session whose answer is that dialog;
    without one, a rejected session. Either way the claim is done, as after `finish`.
    """
    report = PandaImportReport(file=file, dry_run=dry_run)
    try:  # read_panda_upload checked this already; a document built in code may not have been
        check_storable(data)
    except JsonProblem as exc:
        report.errors.append(FieldError(file, json_path(exc.path) or "(file)", exc.message))
        return report
    report.sha256 = panda_sha256(data)
    if Item.objects.filter(project=project, meta__panda_sha256=report.sha256).exists():
        report.duplicate = True
        return report
    tree = parse_panda_json(data, file=file, report=report)
    if tree is None:
        return report

    backend = backend or services.backend_for(project)
    specs: dict[int, _NodeSpec] = {}
    for key, dialog in enumerate(tree.dialogs, start=1):  # renumbered 1..n: node keys have no gaps
        specs[dialog.key] = _node_spec(dialog, specs.get(dialog.parent), key, backend, file=file, report=report)
        report.key_map[str(dialog.key)] = key
    report.dialogs = len(specs)
    prompt_ids = backend.chat_prompt_ids(tree.prompt)
    if dry_run:
        return report

    try:
        with transaction.atomic():
            _write(project, tree, list(specs.values()), prompt_ids, annotator, file, report)
    except IntegrityError:
        # The same file imported at the same moment by someone else: the unique source hash caught it.
        if not Item.objects.filter(project=project, source_sha256=report.sha256).exists():
            raise
        report.duplicate, report.item_id, report.session_id = True, None, None
        return report
    report.created = True
    return report


def _write(project: Project, tree: ParsedTree, specs: list[_NodeSpec], prompt_ids: list[int], annotator, file: str,
           report: PandaImportReport) -> None:
    root = specs[0]
    item = Item.objects.create(
        project=project, external_id=tree.external_id, messages=tree.prompt, prompt_ids=prompt_ids,
        # The file is the source record, so its hash is the item's source hash (unique per project).
        source_sha256=report.sha256, claims_done=1,  # the imported session below is a done claim
        meta={"panda_sha256": report.sha256, "panda_uuid": tree.panda_uuid, "imported_from": file},
        # The root dialog is the item's initial rollout, as it is for items answered here.
        rollout={"token_ids": root.token_ids, "logprobs": root.logprobs, "top": root.top,
                 "finish_reason": root.dialog.finish_reason or "stop", "model_id": root.model_id, "seed": None},
    )
    claim = Claim.objects.create(item=item, project=project, annotator=annotator, state=ClaimState.DONE,
                                 lease_expires_at=timezone.now())
    good = next((spec for spec in specs if spec.dialog.is_good), None)
    session = Session.objects.create(claim=claim, item=item, annotator=annotator,
                                     status=SessionStatus.ACCEPTED if good else SessionStatus.REJECTED)
    nodes: dict[int, Node] = {}
    timed: list[tuple[int, datetime]] = []
    for spec in specs:
        node = Node.objects.create(
            session=session, parent=nodes.get(spec.parent.key) if spec.parent else None, key=spec.key,
            fork_index=spec.fork_index, locked_until=len(spec.token_ids), token_ids=spec.token_ids,
            logprobs=spec.logprobs, top=spec.top, origins=spec.origins, candidate_ranks=spec.candidate_ranks,
            status=NodeStatus.COMPLETE, finish_reason=spec.dialog.finish_reason, model_id=spec.model_id,
        )
        nodes[spec.key] = node
        for kind, payload, ms in spec.events:
            # Model steps have no actor, as in the services; corrections are the annotator's.
            actor = None if kind in (EventKind.GENERATE_NEW, EventKind.CONTINUE_GENERATING) else annotator
            event = Event.objects.create(session=session, kind=kind, node=node, payload=payload, actor=actor)
            if ms is not None:
                timed.append((event.pk, _when(ms)))
    final = nodes[good.key] if good else nodes[specs[-1].key]
    finish = Event.objects.create(session=session, kind=EventKind.ACCEPT if good else EventKind.REJECT, node=final,
                                  actor=annotator, payload={"imported_from": file})
    timed.append((finish.pk, _when(tree.update_time)))
    # Keep the times the file recorded (auto_now_add stamps "now" on create).
    for pk, moment in timed:
        Event.objects.filter(pk=pk).update(created_at=moment)
    session.current_node = final
    session.version = len(specs)  # as if written by the services: one write per correction, plus the verdict
    session.save(update_fields=["current_node", "version"])
    report.item_id, report.session_id = item.pk, session.pk
