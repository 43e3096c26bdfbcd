"""Export: a session as a `.panda.json` v2 document, written the way the onPanda app writes it.

A session is already a `.panda.json` file. Each node is a dialog keyed by its `key`: the conversation it
answers (the item's prompt, or that plus earlier rounds and tool results, with their `reasoning` and tool
calls, as onPanda writes them) plus one assistant message (the node's reasoning, content and tool calls,
parsed from its ids), the conversation's `tools` if it has any, `annotate.is_good`, and `operations`.
A deleted node goes to `deleted_dialogs`. For a node imported from a file, the dialog's own `annotate`,
`operations` and custom keys are written back as the file had them, with the file's title, description,
comment, sado_info, cache_tree and unanswered dialogs (`Session.meta["panda_json"]`); the nodes made here
add their tokens and logprobs to `cache_tree` (cache_tree.py), so the app shows them. A node made here
gets operations written from the session's events in the app's shape (`is_prompt_modified`,
`is_response_modified`, `response_modified_type`, `common_prefix_length`; `generate_new`,
`continue_with_chosen` with the chosen token and the rejected position's `top_logprobs`, a forced stop as
the app's chosen `<|stop|>` item, `continue_with_input`, `edit_selection`, `continue_generating`, and the
turns and new trees). `operations[0].parent` links a correction to the dialog it corrects, which is how
`onpanda.parser.PandaTree` rebuilds the tree; a turn's first operation names the dialog it follows and is
marked `is_prompt_modified`, so PandaTree (one prompt per tree) starts a tree there. Long repeated
contents go through `hash_map`.
"""

import copy
import logging
import uuid
from collections import defaultdict
from datetime import datetime

from dataplatform.inference import Backend, backend_for

from .. import services
from ..models import Event, EventKind, Node, Origin, Session, SessionStatus
from ..nodes import response_message
from ..supervision import response_ids
from .cache_tree import CacheRefused, cache_tree
from .hash_map import use_hash_map

PANDA_VERSION = "2.0"
# Fixed forever: a session's uuid is uuid5(this, ...) so that re-exports of a session carry the same uuid.
SESSION_UUID_NAMESPACE = uuid.UUID("0c6f3e1a-5b7d-4f0e-9a2c-8d4b1e6f7a35")

logger = logging.getLogger(__name__)


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


def _diff(kind: str, node: Node, parent: Node | None, backend: Backend) -> dict:
    """What the app's dialogDifferent records on an operation: how the dialog differs from the one it came from."""
    if node.fork_index is None or parent is None:  # a tree's root: a new response (to another prompt, for a turn)
        changed = kind in (EventKind.EDIT_PROMPT, EventKind.RUN_TOOL_CALLS, EventKind.START_NEW_ROUND)
        return {"is_prompt_modified": changed, "is_response_modified": True,
                "response_modified_type": "add_response", "common_prefix_length": -1}
    kept = node.fork_index
    kinds = {EventKind.CONTINUE_GENERATING: "continued", EventKind.FORCE_STOP: "truncated"}
    return {"is_prompt_modified": False, "is_response_modified": True,
            "response_modified_type": kinds.get(kind, "bifurcation"),
            "common_prefix_length": len(backend.detokenize(parent.token_ids[:kept]))}


def _operation(event: Event, node: Node, parent: Node | None, first: bool, backend: Backend) -> dict | None:
    """One onPanda operation for an event on `node`, or None for events that are not dialog operations."""
    payload = event.payload or {}
    # The first operation names the dialog it came from; later ones are written back to the
    # dialog itself, and onPanda then names the dialog's own key.
    # A response that starts a turn (tool results or a user turn answered) answers another prompt: onPanda
    # keeps one prompt per tree, so it is the root of a tree of its own, which names the dialog it follows.
    starts_a_turn = node.fork_index is None
    parent_key = parent.key if first and parent is not None else node.key
    operation: dict = {"operator": event.kind, "parent": str(parent_key), "time": _ms(event.created_at),
                       "on_policy": True}
    if node.model_id:
        operation["chat_config"] = {"model": node.model_id}
    position = payload.get("position", node.fork_index)
    operation.update(_diff(event.kind, node, parent, backend))
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
    elif event.kind == EventKind.FORCE_STOP and parent is not None:
        # The app's "<|stop|>" item among the candidates: a chosen item with a finish_reason and no token.
        operation["operator"] = EventKind.CONTINUE_WITH_CHOSEN
        operation["continue_with_chosen"] = {"finish_reason": "stop"}
        operation["rejected_token"] = _rejected_token(parent, position, payload.get("top_logprobs"), backend)
    elif event.kind == EventKind.CONTINUE_WITH_INPUT and parent is not None:
        operation["continue_with_input"] = {"input_patch": payload.get("text", ""),
                                            "token_ids": payload.get("token_ids", [])}
        operation["rejected_token"] = _rejected_token(parent, position, [], backend)
    elif event.kind == EventKind.CONTINUE_GENERATING:
        operation["from_token"] = payload.get("from_token")
    elif event.kind == EventKind.EDIT_SELECTION and parent is not None:
        start, end = payload.get("start", position), payload.get("end", position)
        operation.update({"edit_selection_text": payload.get("text", ""),
                          "rejected_tokens_text": backend.detokenize(parent.token_ids[start:end]),
                          "rejected_token": _rejected_token(parent, start, [], backend), "is_logprob_item": False})
        operation["on_policy"] = False
    elif event.kind in (EventKind.RUN_TOOL_CALLS, EventKind.START_NEW_ROUND, EventKind.EDIT_PROMPT):
        # What the operator did, as the event recorded it (its dialog's messages hold the result).
        operation[event.kind] = {key: value for key, value in payload.items() if key != "from_node"}
        if parent is not None and starts_a_turn:
            operation["previous_dialog"] = str(parent.key)  # also `parent`: is_prompt_modified makes it a root
        if event.kind == EventKind.EDIT_PROMPT:
            operation["is_new_generated"] = True
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


def dialog_messages(node: Node, backend: Backend) -> dict:
    """The dialog's `messages` (its context and its answer) and `tools`, as this platform writes them."""
    # The node's parsed message (reasoning and tool calls too); its text for a node parsed before that.
    answer = response_message(node).as_dict() if node.message else {
        "role": "assistant", "content": backend.detokenize(response_ids(node))}
    if node.message.get("tool_calls"):
        answer["tool_calls"] = copy.deepcopy(node.message["tool_calls"])  # the stored call ids
    answer.pop("finish_reason", None)
    if node.finish_reason:
        answer["finish_reason"] = node.finish_reason
    return {"messages": copy.deepcopy(node.context or node.session.item.messages) + [answer],
            **({"tools": copy.deepcopy(node.tools)} if node.tools else {})}


def _dialog(node: Node, parent: Node | None, events: list[Event], accepted_id, kept: dict | None,
            backend: Backend) -> dict:
    dialog = dialog_messages(node, backend)
    if kept is not None:  # imported: the dialog's annotate, operations and custom keys as the file had them
        # (and its messages and tools where the file wrote them in another shape: a tool call's `index`...)
        return {**dialog, **copy.deepcopy(kept)}
    operations = []
    for event in events:
        operation = _operation(event, node, parent, not operations, backend)
        if operation is not None:
            operations.append(operation)
    dialog["annotate"] = {"is_good": node.pk == accepted_id}
    dialog["operations"] = operations or [_fallback_operation(node, parent)]
    return dialog


def session_to_panda_json(session: Session, *, backend: Backend | None = None) -> dict:
    """The session as a `.panda.json` v2 document (a dict; `json.dumps` it to write a file).

    Uses `session.nodes` and `session.events` as they are, so a caller exporting many
    sessions can prefetch them (the exporter does).
    """
    if backend is None:  # the exporter passes its one backend for every session
        project = session.item.project
        backend = backend_for(project, model=services.config_for(project).model_name)
    item = session.item
    panda = (session.meta or {}).get("panda_json") or {}
    kept_dialogs = panda.get("dialogs") or {}
    nodes = sorted(session.nodes.all(), key=lambda node: node.key)
    by_id = {node.pk: node for node in nodes}
    events_of: dict[int, list[Event]] = defaultdict(list)
    for event in sorted(session.events.all(), key=lambda event: event.pk):
        if event.node_id in by_id:
            events_of[event.node_id].append(event)
    accepted_id = session.current_node_id if session.status == SessionStatus.ACCEPTED else None

    sections: dict[str, dict] = {"dialogs": {}, "deleted_dialogs": {}}
    for node in nodes:
        node.session = session
        sections["deleted_dialogs" if node.deleted else "dialogs"][str(node.key)] = _dialog(
            node, by_id.get(node.parent_id), events_of[node.pk], accepted_id, kept_dialogs.get(str(node.key)),
            backend)
    for section, dialogs in (panda.get("pending_dialogs") or {}).items():  # kept unanswered dialogs
        sections[section].update(copy.deepcopy(dialogs))
    imported_only = bool(nodes) and all(str(node.key) in kept_dialogs for node in nodes)
    file = copy.deepcopy(panda.get("file") or {})  # title, description, comment, sado_info, cache_tree...
    if not imported_only:  # the file's cache (if any) as it came, plus the tokens of the nodes made here
        made_here = [node for node in nodes if str(node.key) not in kept_dialogs]
        fork_tops = {node.pk: next((event.payload.get("top_logprobs") for event in events_of[node.pk]
                                    if (event.payload or {}).get("top_logprobs")), None) for node in made_here}
        try:
            cached = cache_tree(made_here, backend, kept=file.get("cache_tree"), fork_tops=fork_tops)
        except CacheRefused as exc:
            # Stored before import refused such caches: written back as stored (without the tokens of the nodes
            # made here) rather than failing every export of the project. Decoding stopped at the bounds.
            logger.warning("Session %s: its cache_tree is exported as stored, without the nodes made here: %s",
                           session.pk, exc)
            cached = None
        if cached is not None:
            file["cache_tree"] = cached
    document = {
        "version": PANDA_VERSION,
        "uuid": panda.get("uuid") or session_uuid(session),
        # An imported session nobody changed keeps the file's save time.
        "update_time": panda["update_time"] if imported_only and panda.get("update_time") else _ms(session.updated_at),
        **file,
        "dialogs": dict(sorted(sections["dialogs"].items(), key=lambda pair: int(pair[0]))),
        "deleted_dialogs": dict(sorted(sections["deleted_dialogs"].items(), key=lambda pair: int(pair[0]))),
        "hash_map": {},
        # Ignored by onPanda; lets an import back into the platform keep the item's identity.
        "dataplatform": {"session_id": session.pk, "item_id": item.pk, "external_id": item.external_id,
                         "status": session.status, "annotator": session.annotator.get_username()},
    }
    return use_hash_map(document)
