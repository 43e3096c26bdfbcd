"""Import, writing: a parsed `.panda.json` file into the database, as an Item with one finished Session
holding every tree of the file.

A `.panda.json` stores text, not token ids. Each answer (reasoning, content, tool calls) is written in
the project's response template layout and tokenized with the current backend, as the model's own
response would be, with the end-of-turn token when it is complete; the template's parse then gives its
channels and message (a tool call keeps the file's call id). The ids may differ from the ones the
original model produced (a model can emit a non-canonical tokenization); a fork is the first token where
a dialog's ids differ from its parent's, in whichever channel. Per-token logprobs are unknown (None)
except what the operations record at a fork (the chosen token's logprob and the rejected position's
top-k). Dialogs keep their keys; deleted dialogs become deleted nodes; everything else the file holds
(title, description, comment, custom fields, sado_info, cache_tree, unanswered dialogs, each dialog's
own operations and annotate) is kept in `Session.meta["panda_json"]` and written back on export.
A file imports whole or not at all; re-importing a file (same sha256 of its canonical JSON) adds nothing.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from dataplatform.accounts.models import Project
from dataplatform.conversations.model import Message
from dataplatform.conversations.templates import Template
from dataplatform.conversations.templates.layout import is_complete, response_text
from dataplatform.errors import Refused
from dataplatform.exports import stored
from dataplatform.imports import JsonProblem, check_storable, json_path
from dataplatform.inference import Backend, backend_for

from .. import figures, services
from ..models import Claim, ClaimState, Event, EventKind, Item, Node, NodeStatus, Origin, Session, SessionStatus
from ..nodes import parse_into, template_of
from ..prompts import render_prompt
from ..supervision import fork_token_idx
from ..tokens import TokenSequence
from .export import dialog_messages
from .operations import TURNS, correction, root_operator
from .parser import ParsedDialog, ParsedTree, panda_sha256, parse_panda_json, time_ms
from .report import FieldError, PandaImportReport
from .validator import model_of


@dataclass
class _Built:
    node: Node  # unsaved
    dialog: ParsedDialog
    parent: "_Built | None"  # the node's parent: the dialog corrected, or the turn this one follows
    events: list[tuple[str, dict, int | None]]  # (kind, payload, time in ms)


def answer_ids(answer: Message, template: Template, backend: Backend) -> list[int]:
    """The answer's token ids as the model would have written it: the template's layout, then the end of turn."""
    complete = is_complete(answer)
    text = response_text(answer, template.markers, complete=complete)
    ids = backend.tokenize(text) if text else []
    if complete:
        if template.end_of_turn:
            ids += backend.tokenize(template.end_of_turn)
        elif len(backend.eos_token_ids) == 1:
            ids += list(backend.eos_token_ids)
    return ids


def _readable(node: Node, answer: Message) -> str | None:
    """Which part of the answer the template's parse does not give back, if any; keeps the file's call ids."""
    message = node.message
    calls = message.get("tool_calls", [])
    if message.get("reasoning", "") != answer.reasoning:
        return "reasoning"
    if message.get("content", "") != answer.content:
        return "content"
    if [(c["function"]["name"], c["function"]["arguments"]) for c in calls] != [
            (c.name, c.arguments) for c in answer.tool_calls]:
        return "tool_calls"
    for call, theirs in zip(calls, answer.tool_calls, strict=True):
        call["id"] = theirs.id
    return None


def _build(tree: ParsedTree, project: Project, backend: Backend, file: str,
           report: PandaImportReport) -> list[_Built]:
    template = template_of(services.config_for(project), backend)
    prompt_ids: dict[str, list[int]] = {}
    built: dict[int, _Built] = {}
    trees = 0
    for dialog in tree.dialogs:
        stored = dialog.prompt.as_dict()
        canonical = json.dumps(stored, sort_keys=True)
        section = "deleted_dialogs" if dialog.deleted else "dialogs"
        try:
            if canonical not in prompt_ids:
                prompt_ids[canonical] = render_prompt(backend, dialog.prompt, template)
            ids = answer_ids(dialog.answer, template, backend)
        except Refused as exc:  # the template cannot write it (no markers for reasoning or calls...)
            report.errors.append(FieldError(file, f"{section}.{dialog.key}.messages", str(exc)))
            break
        first = dialog.operations[0] if dialog.operations else {}
        named = built.get(dialog.parent)
        node = Node(key=dialog.key, context=stored["messages"], tools=stored.get("tools", []),
                    prompt_ids=prompt_ids[canonical], status=NodeStatus.COMPLETE,
                    finish_reason=dialog.answer.finish_reason or "",
                    model_id=model_of(first) or (named.node.model_id if named else ""), deleted=dialog.deleted,
                    round=sum(m.role == "user" for m in dialog.prompt.messages) or 1, locked_until=0)
        TokenSequence(node).extend(ids, origin=Origin.MODEL)  # the file keeps no logprobs or top-k
        parse_into(node, template=template, backend=backend)
        unread = _readable(node, dialog.answer)
        if unread:
            report.errors.append(FieldError(
                file, f"{section}.{dialog.key}.messages[{len(stored['messages'])}].{unread}",
                gettext("the project's response template (%(template)s) does not read this answer's %(part)s back as "
                        "written (it holds the template's own markers?), so it cannot be stored as it is")
                % {"template": template.name, "part": unread}))
        time = time_ms(first.get("time"))
        if dialog.root:
            operator = root_operator(first)
            parent = named if operator in TURNS else None
            if parent is None:
                trees += 1
            node.tree = parent.node.tree if parent else trees
            payload = {"model_id": node.model_id, "seed": None, "imported_from": file}
            if named is not None:
                payload["from_node_key"] = named.node.key
            events = [(operator, payload, time)]
        else:
            parent = named
            node.tree = parent.node.tree
            node.fork_index = fork = fork_token_idx(parent.node.token_ids, ids)
            # The prefix is the parent's, as in a correction made here.
            TokenSequence(node).adopt(TokenSequence(parent.node), fork)
            operator, payload = correction(node, parent.node, first, backend, report.warnings)
            events = [(operator, payload, time)]
        node.operator = operator
        for operation in dialog.operations[1:]:
            if operation.get("operator") == EventKind.CONTINUE_GENERATING:
                events.append((EventKind.CONTINUE_GENERATING, {"from_token": operation.get("from_token")},
                               time_ms(operation.get("time"))))
        _keep_shape(node, dialog, backend)
        built[dialog.key] = _Built(node, dialog, parent, events)
    return list(built.values())


def _keep_shape(node: Node, dialog: ParsedDialog, backend: Backend) -> None:
    """Keep the file's own `messages` and `tools` with the dialog where the export would write them in another
    shape (the app's tool-call `index`, `reasoning_content`, a null `name`...), so that they go back as they came."""
    ours = dialog_messages(node, backend)
    for name in ("messages", "tools"):
        if name in dialog.raw and dialog.raw[name] != ours.get(name, []):
            dialog.kept[name] = dialog.raw[name]


def _when(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms is not None else None


def import_panda_json(*, project: Project, data, annotator, file: str = "upload.panda.json",
                      dry_run: bool = False, live: bool = False) -> PandaImportReport:
    """Import one `.panda.json` file (as the onPanda app or this platform writes it) as an Item with a
    Session of `annotator` holding all its trees.

    By default the session is finished: a file with a good dialog becomes an accepted session whose current
    node is its last good dialog; without one, a rejected session; either way the claim is done, as after
    `finish`. `live`: the session stays open on the same node, under an active claim of `annotator` (a
    lease as if just claimed), so that they claim it and go on correcting it (an annotator holds one
    active claim per project: refused if they hold another).
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

    backend = backend_for(project, model=services.config_for(project).model_name)
    if live and Claim.objects.filter(project=project, annotator=annotator, state=ClaimState.ACTIVE).exists():
        report.errors.append(FieldError(file, "live", gettext("%(user)s is working on another item of this project; "
                                                              "finish it first, or import the file as finished")
                                        % {"user": annotator}))
        return report
    built = _build(tree, project, backend, file, report)
    report.describe([entry.node for entry in built])
    if report.errors or dry_run:
        return report
    try:
        with transaction.atomic():
            _write(project, tree, built, annotator, file, report, live=live)
            if not live:  # a finished session: its export rows are derived once, by a worker after commit
                stored.build_soon(project.pk)
    except IntegrityError:
        # The same file imported at the same moment by someone else: the unique source hash caught it.
        if not Item.objects.filter(project=project, source_sha256=report.sha256).exists():
            raise
        report.duplicate, report.item_id, report.session_id = True, None, None
        return report
    report.created = True
    return report


def _write(project: Project, tree: ParsedTree, built: list[_Built], annotator, file: str,
           report: PandaImportReport, *, live: bool) -> None:
    root = built[0].node
    item = Item.objects.create(
        project=project, external_id=tree.external_id, messages=root.context, tools=root.tools,
        prompt_ids=root.prompt_ids,
        # The file is the source record, so its hash is the item's source hash (unique per project).
        source_sha256=report.sha256, claims_done=0 if live else 1,  # the imported session's claim, when done
        meta={"panda_sha256": report.sha256, "panda_uuid": tree.panda_uuid, "imported_from": file},
        # The first dialog is the item's initial rollout, as it is for items answered here.
        rollout={"token_ids": root.token_ids, "logprobs": root.logprobs, "top": root.top,
                 "finish_reason": root.finish_reason or "stop", "model_id": root.model_id, "seed": None},
    )
    lease = timezone.now() + timedelta(minutes=services.config_for(project).lease_minutes) if live else timezone.now()
    claim = Claim.objects.create(item=item, project=project, annotator=annotator,
                                 state=ClaimState.ACTIVE if live else ClaimState.DONE, lease_expires_at=lease)
    good = [entry for entry in built if entry.dialog.is_good]
    kept = {str(entry.node.key): entry.dialog.kept for entry in built}
    status = SessionStatus.OPEN if live else SessionStatus.ACCEPTED if good else SessionStatus.REJECTED
    session = Session.objects.create(claim=claim, item=item, project=project, annotator=annotator, status=status,
                                     meta={"panda_json": {**tree.meta, "dialogs": kept}})
    timed: list[tuple[int, datetime]] = []
    for entry in built:
        node = entry.node
        node.session, node.parent = session, entry.parent.node if entry.parent else None
        node.save()
        for kind, payload, ms in entry.events:
            # Model steps have no actor, as in the services; corrections, turns and new trees are the annotator's.
            actor = None if kind == EventKind.CONTINUE_GENERATING or (
                kind == EventKind.GENERATE_NEW and node.tree == 1) else annotator
            event = Event.objects.create(session=session, kind=kind, node=node, payload=payload, actor=actor)
            if ms is not None:
                timed.append((event.pk, _when(ms)))
    remaining = [entry for entry in built if not entry.node.deleted] or built
    final = (good or remaining)[-1].node
    if not live:
        finish = Event.objects.create(session=session, kind=EventKind.ACCEPT if good else EventKind.REJECT,
                                      node=final, actor=annotator,
                                      payload={"imported_from": file, "good": [entry.node.key for entry in good]})
        timed.append((finish.pk, _when(tree.update_time)))
    # Keep the times the file recorded (auto_now_add stamps "now" on create).
    for pk, moment in timed:
        Event.objects.filter(pk=pk).update(created_at=moment)
    session.current_node = final
    session.version = len(built)  # as if written by the services: one write per node, plus the verdict
    session.save(update_fields=["current_node", "version"])
    figures.imported(session=session)  # the queue's and the metrics' kept figures (annotate/figures.py)
    report.item_id, report.session_id = item.pk, session.pk
