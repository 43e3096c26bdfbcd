"""Import, writing: a parsed `.panda.json` tree into the database, as an Item with one finished Session.

A `.panda.json` stores text, not token ids. Imported responses are therefore re-tokenized with the
current backend's tokenizer: the ids may differ from the ones the original model produced (a model
can emit a non-canonical tokenization), the fork positions are recomputed from the new ids, and
per-token logprobs, top-k and seeds are unknown (None / empty) except what the operations record at
a fork. Imported trees are history: every token is locked and no node is reopened. A file imports
whole or not at all; re-importing a file (same sha256 of its canonical JSON) adds nothing.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from dataplatform.accounts.models import Project
from dataplatform.imports import JsonProblem, check_storable, json_path
from dataplatform.inference import Backend

from .. import corrections, services
from ..models import Claim, ClaimState, Event, EventKind, Item, Node, NodeStatus, Origin, Session, SessionStatus
from ..nodes import parse_into, template_of
from ..prompts import render_prompt
from ..supervision import fork_token_idx
from .parser import ParsedDialog, ParsedTree, panda_sha256, parse_panda_json, time_ms
from .report import FieldError, PandaImportReport
from .validator import model_of


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
    model_id = model_of(first) or (parent.model_id if parent else "")
    spec = _NodeSpec(key=key, parent=parent, dialog=dialog, token_ids=ids, logprobs=[None] * len(ids),
                     top=[[] for _ in ids], origins=[Origin.MODEL] * len(ids), candidate_ranks=[None] * len(ids),
                     fork_index=None, model_id=model_id, events=[])
    if parent is None:
        spec.events.append((EventKind.GENERATE_NEW, {"model_id": model_id, "seed": None, "imported_from": file},
                            time_ms(first.get("time"))))
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
                                time_ms(operation.get("time"))))
    return spec


def _correction(spec: _NodeSpec, parent: _NodeSpec, operation: dict, backend: Backend,
                report: PandaImportReport) -> tuple[str, dict, int | None]:
    """The correction event that made `spec` from `parent`, and the origins of its tokens from the fork on."""
    ids, fork = spec.token_ids, spec.fork_index
    tail = len(ids) - fork
    time = time_ms(operation.get("time"))
    base = {"position": fork, "rejected_token_id": parent.token_ids[fork] if fork < len(parent.token_ids) else None}
    operator = operation.get("operator")
    patch = (operation.get("continue_with_input") or {}).get("input_patch") \
        if isinstance(operation.get("continue_with_input"), dict) else None
    if operator == EventKind.CONTINUE_WITH_INPUT and isinstance(patch, str):
        stop = patch.endswith(corrections.STOP_MARKER)
        typed = patch[: -len(corrections.STOP_MARKER)] if stop else patch
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
    prompt_ids = render_prompt(backend, tree.prompt, template_of(services.config_for(project), backend))
    if dry_run:
        return report

    try:
        with transaction.atomic():
            _write(project, tree, list(specs.values()), prompt_ids, annotator, file, report, backend)
    except IntegrityError:
        # The same file imported at the same moment by someone else: the unique source hash caught it.
        if not Item.objects.filter(project=project, source_sha256=report.sha256).exists():
            raise
        report.duplicate, report.item_id, report.session_id = True, None, None
        return report
    report.created = True
    return report


def _write(project: Project, tree: ParsedTree, specs: list[_NodeSpec], prompt_ids: list[int], annotator, file: str,
           report: PandaImportReport, backend) -> None:
    root = specs[0]
    prompt = tree.prompt.as_dict()
    item = Item.objects.create(
        project=project, external_id=tree.external_id, messages=prompt["messages"], tools=prompt.get("tools", []),
        prompt_ids=prompt_ids,
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
    template = template_of(services.config_for(project), backend)
    for spec in specs:
        node = Node(
            session=session, parent=nodes.get(spec.parent.key) if spec.parent else None, key=spec.key,
            operator=spec.events[0][0] if spec.events else EventKind.GENERATE_NEW,
            context=prompt["messages"], tools=prompt.get("tools", []), prompt_ids=prompt_ids,
            fork_index=spec.fork_index, locked_until=len(spec.token_ids), token_ids=spec.token_ids,
            logprobs=spec.logprobs, top=spec.top, origins=spec.origins, candidate_ranks=spec.candidate_ranks,
            status=NodeStatus.COMPLETE, finish_reason=spec.dialog.finish_reason, model_id=spec.model_id,
        )
        parse_into(node, template=template, backend=backend)
        node.save()
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
