"""Every write of the onPanda workflow: rollouts, claims, sessions, corrections, continuation.

All state changes happen here, each with its append-only Event in the same
transaction. Writes to a session carry the version the client saw; a stale
version is refused (the API answers 409), never silently applied.
"""

import hashlib
import itertools
from collections.abc import Iterator
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from dataplatform import claims
from dataplatform.accounts.models import Project
from dataplatform.accounts.permissions import CAN_MANAGE_PROJECT
from dataplatform.errors import Forbidden, Missing
from dataplatform.exports import stored
from dataplatform.inference import PromptTooLong, backend_for
from dataplatform.status import Status
from dataplatform.tallies import services as tallies

from . import budget, figures
from .errors import (  # noqa: F401 (callers import them here)
    AnnotationError,
    CorrectionRefused,
    StaleVersion,
    ToolRunRefused,
)
from .locking import SessionLock, bump
from .models import (
    AnnotationConfig,
    Claim,
    ClaimState,
    Event,
    EventKind,
    Item,
    Node,
    NodeStatus,
    Origin,
    SeedPolicy,
    Session,
    SessionStatus,
)
from .nodes import parse_into, template_of
from .prompts import render_prompt, stored_prompt
from .tokens import TokenSequence

TREE_STARTS = (EventKind.GENERATE_NEW, EventKind.EDIT_PROMPT)


# --- configuration ----------------------------------------------------------------------------

def config_for(project: Project) -> AnnotationConfig:
    """The project's settings, read once per project object (a request or a job reuses it)."""
    config = getattr(project, "_annotation_config", None)
    if config is None:
        try:  # joined in when the project was read with project_for(..., related=["annotation_config"])
            config = project.annotation_config
        except AnnotationConfig.DoesNotExist:
            config, _created = AnnotationConfig.objects.get_or_create(project=project)
        project._annotation_config = config
    return config


# What runs on a project's behalf (tool servers, without asking) is an admin's choice; curators set the rest.
ADMIN_ONLY_SETTINGS = ("tool_servers", "auto_approve_tools")


def update_config(*, project: Project, changes: dict, role: str) -> AnnotationConfig:
    """Change some of the project's settings; `changes` holds values ConfigSerializer has checked."""
    admin_only = sorted(set(changes) & set(ADMIN_ONLY_SETTINGS))
    if admin_only and role not in CAN_MANAGE_PROJECT:
        raise Forbidden(_("Only a project admin may change %(settings)s.") % {"settings": ", ".join(admin_only)})
    config = config_for(project)
    for name, value in changes.items():
        setattr(config, name, value)
    # Only the changed columns: two curators saving different settings at once both keep theirs.
    config.save(update_fields=list(changes))
    return config


def seed_for(config: AnnotationConfig, item: Item, salt: str) -> int | None:
    if config.seed_policy == SeedPolicy.FIXED:
        return config.seed
    if config.seed_policy == SeedPolicy.PER_ITEM:
        digest = hashlib.blake2b(f"{config.seed}:{item.pk}:{salt}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big")
    return None


# --- initial rollouts (a job kind) -----------------------------------------------------------------

# Items read, rendered and handed to `backend.rollouts` together. The local model decodes them 32 rows at a time
# (max_rollout_batch); vLLM keeps up to VLLM_MAX_CONCURRENCY (64) of them in flight, and its slots empty only at a
# group's end, so a group is several times that. Each answer is saved as it arrives: a killed worker loses only
# the answers in progress, and its rerun reads what is still unanswered.
ROLLOUT_BATCH = 256


def generate_rollouts(*, project: Project, progress, regenerate: bool = False) -> dict:
    """Answer every item that has no rollout yet (or all, with regenerate), batch by batch through
    `backend.rollouts`, saving each item as its answer arrives: a rerun resumes with the items still unanswered."""
    config = config_for(project)
    backend = backend_for(project, model=config.model_name)
    template = template_of(config, backend)
    items = Item.objects.filter(project=project)
    if not regenerate:
        items = items.filter(rollout__isnull=True)
    progress.set_total(items.count())
    done, refused = 0, []
    for batch in _item_batches(items.only("id", "external_id", "messages", "tools")):
        prompts = [render_prompt(backend, stored_prompt(item.messages, item.tools), template) for item in batch]
        seeds = [seed_for(config, item, "rollout") for item in batch]
        # A prompt over the project's budget is not sent; the backend refuses one over the model's context. Either
        # way the item stays unanswered (no annotator is offered it), and the job's result names it.
        over = {index: refusal for index, ids in enumerate(prompts)
                if (refusal := budget.refusal(len(ids), config=config, backend=backend,
                                              max_tokens=config.max_tokens)) is not None}
        sent = [index for index in range(len(batch)) if index not in over]
        answers = backend.rollouts([prompts[i] for i in sent], max_tokens=config.max_tokens,
                                   temperature=config.temperature, seeds=[seeds[i] for i in sent], top_k=config.top_k)
        for index, steps in itertools.chain(over.items(), ((sent[row], steps) for row, steps in answers)):
            if isinstance(steps, PromptTooLong):
                refused.append({"item": batch[index].external_id or batch[index].pk, "error": str(steps)})
            else:
                rollout = rollout_of(steps, seed=seeds[index], backend=backend, template=template)
                _save_rollout(project, batch[index].pk, prompt_ids=prompts[index], rollout=rollout)
            done += 1
            progress.report(done, message=Status(gettext_noop("%(done)s of %(total)s items answered"), done=done,
                                                  total=progress.job.progress_total))
    result = {"answered": done - len(refused)}
    if refused:  # the first few, each with its item: what a curator needs to find and fix the prompts
        result |= {"refused": len(refused), "refusals": refused[:20]}
    return result


def _save_rollout(project: Project, item_id: int, *, prompt_ids: list[int], rollout: dict) -> None:
    """Store an item's rollout; a first one counts the item as answered (the queue's kept figures)."""
    with transaction.atomic():
        if Item.objects.filter(pk=item_id, rollout__isnull=True).update(prompt_ids=prompt_ids, rollout=rollout):
            figures.item_answered(project_id=project.pk)
        else:  # regenerated
            Item.objects.filter(pk=item_id).update(prompt_ids=prompt_ids, rollout=rollout)


def _item_batches(items) -> Iterator[list[Item]]:
    """`items` in id order, ROLLOUT_BATCH at a time, one short query each (keyset: no offset, no long transaction)."""
    last = 0
    while batch := list(items.filter(id__gt=last).order_by("id")[:ROLLOUT_BATCH]):
        last = batch[-1].pk
        yield batch


def rollout_of(steps: list, *, seed: int | None, backend, template) -> dict:
    """An item's stored rollout: the response's tokens with the logprob and top k of each, and its parse."""
    token_ids = [s.token_id for s in steps]
    finish_reason = steps[-1].finish_reason if steps else "length"
    parsed = template.parse(token_ids, backend=backend, finish_reason=finish_reason or "length")
    return {
        "token_ids": token_ids,
        "logprobs": [s.logprob for s in steps],
        "top": [[list(pair) for pair in s.top] for s in steps],
        "finish_reason": finish_reason,
        "model_id": backend.model_id,
        "seed": seed,
        "channels": parsed.channels,
        "message": parsed.message.as_dict(),
    }


# --- claims ---------------------------------------------------------------------------------------

def claim_next(*, project: Project, annotator) -> Claim | None:
    """The annotator's current claim, renewed, or a claim on the next answered item with a free slot."""
    config = config_for(project)
    return claims.claim_next(claim_model=Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                             holder_id=annotator.pk, overlap=config.overlap, lease_minutes=config.lease_minutes,
                             ready=Q(rollout__isnull=False), counted=figures.claims_counter(project.pk))


def end_claim(*, claim: Claim, state: ClaimState) -> Claim:
    """Skip or release a claim (or mark it done): only an active one, once, under its item's lock."""
    try:
        return claims.end_claim(claim_model=Claim, item_field="item", claim_id=claim.pk, state=state,
                                overlap=lambda: config_for(claim.project).overlap,
                                counted=figures.claims_counter(claim.project_id))
    except claims.ClaimRefused as exc:
        raise AnnotationError(str(exc)) from exc


def reassign(*, claim: Claim, to_user) -> Claim:
    """A curator moves an item from one annotator to another, who starts it afresh.

    The item's slot moves with it: the old claim is released and the new one takes its place, under the
    item's lock like every other change to its slots."""
    config = config_for(claim.project)
    now = timezone.now()
    with transaction.atomic():
        claims.lock_item_of(Claim, "item", claim.pk)
        claim = Claim.objects.select_for_update().get(pk=claim.pk)
        if Claim.objects.filter(item_id=claim.item_id, annotator=to_user).exists():
            raise AnnotationError(_("%(user)s has already had this item.") % {"user": to_user})
        if Claim.objects.filter(project_id=claim.project_id, annotator=to_user, state=ClaimState.ACTIVE).exists():
            raise AnnotationError(_("%(user)s is working on another item of this project; reassign this one when "
                                    "they have finished it.") % {"user": to_user})
        keeps_its_slot = claim.state == ClaimState.ACTIVE and claim.lease_expires_at > now
        if not keeps_its_slot and claims.holders(Claim, "item", claim.item_id, now=now) >= config.overlap:
            raise AnnotationError(_("This item has no free slot to reassign: its claim has ended and others hold "
                                    "every slot."))
        if claim.state == ClaimState.ACTIVE:
            claim.state = ClaimState.RELEASED
            claim.save(update_fields=["state", "updated_at"])
            tallies.add(claim.project_id, figures.QUEUE, claims.state_change(ClaimState.ACTIVE, ClaimState.RELEASED))
        new_claim = Claim.objects.create(item_id=claim.item_id, project_id=claim.project_id, annotator=to_user,
                                         lease_expires_at=now + timedelta(minutes=config.lease_minutes))
        tallies.add(claim.project_id, figures.QUEUE, claims.state_change(None, ClaimState.ACTIVE))
        return new_claim


# --- sessions -------------------------------------------------------------------------------------

def claim_with_session(*, project: Project, annotator) -> Claim | None:
    """`claim_next` and `open_session` in one transaction: the claim, with its session as `.session`.

    One transaction instead of two, and a claim made just now has no session to look for: this is
    the path of every Claim press (API and browser), the hottest write of the platform."""
    unread = False
    with transaction.atomic():
        claim = claim_next(project=project, annotator=annotator)
        if claim is not None:
            claim.session, unread = _session_of(claim)
    if unread:  # with no transaction open: the template asks the backend
        _read_root(claim.session)
    return claim


def open_session(*, claim: Claim) -> Session:
    """The claim's session; the first time, its root node is the item's initial rollout."""
    session, unread = _session_of(claim)
    if unread:
        _read_root(session)
    return session


def _session_of(claim: Claim) -> tuple[Session, bool]:
    """The claim's session, made the first time, and whether its root is still to be read by the template (a rollout
    stored without the channels of its tokens: made before rollouts carried them, or imported from a file)."""
    existing = None if getattr(claim, "is_new", False) else Session.objects.filter(claim=claim).first()
    if existing:
        return existing, False
    # Not the whole item: its rollout and prompt only.
    item = Item.objects.only("messages", "tools", "prompt_ids", "rollout").get(pk=claim.item_id)
    rollout = item.rollout
    if not rollout:
        raise AnnotationError(_("This item has no model response yet; run the rollout job first."))
    channels = rollout.get("channels", [])
    read = len(channels) == len(rollout["token_ids"])
    with transaction.atomic(savepoint=False):  # inside claim_with_session's transaction: no savepoint needed
        session = Session.objects.create(claim=claim, item_id=claim.item_id, project_id=claim.project_id,
                                         annotator_id=claim.annotator_id)
        root = Node(
            session=session, key=1, context=item.messages, tools=item.tools, prompt_ids=item.prompt_ids,
            round=sum(message["role"] == "user" for message in item.messages) or 1,
            finish_reason=rollout["finish_reason"], model_id=rollout["model_id"], seed=rollout["seed"],
            message=rollout.get("message", {}),
        )
        TokenSequence(root).extend(rollout["token_ids"], origin=Origin.MODEL, logprobs=rollout["logprobs"],
                                   tops=rollout["top"], channels=channels if read else None)
        root.save()
        session.current_node = root
        session.save(update_fields=["current_node"])
        Event.objects.create(session=session, kind=EventKind.GENERATE_NEW, node=root, actor=None,
                             payload={"model_id": rollout["model_id"], "seed": rollout["seed"]})
    return session, not read


def _read_root(session: Session) -> None:
    """The template reads the new session's root, with no transaction open (it asks the backend for the tokens'
    bytes), and its channels and message are stored: no one has seen the root yet but this request."""
    root, project = session.current_node, session.claim.project
    config = config_for(project)
    backend = backend_for(project, model=config.model_name)
    parse_into(root, template=template_of(config, backend), backend=backend)
    Node.objects.filter(pk=root.pk).update(channels=root.channels, message=root.message)


def undo(*, session: Session, version: int, actor) -> Session:
    """Go back to where the current node came from: its parent, or for a new tree's root the node the
    annotator was on. The undone node stays in the tree as a rejected branch."""
    with SessionLock(session.pk, version).write() as session:
        node = session.current_node
        if node.status == NodeStatus.STREAMING:
            raise AnnotationError(_("Wait for the model to finish this response, or cancel it."))
        back = node.parent_id
        if back is None:  # a tree's root: generate_new and edit_prompt record where they started from
            started = Event.objects.filter(session=session, node=node, kind__in=TREE_STARTS).first()
            back = started.payload.get("from_node") if started else None
        if back is None:
            raise AnnotationError(_("Nothing to undo: this is the model's first response."))
        session.current_node = session.nodes.get(pk=back)
        bump(session)
        Event.objects.create(session=session, kind=EventKind.UNDO, node=session.current_node, actor=actor,
                             payload={"undone_node": node.pk})
    return session


def select_node(*, session: Session, version: int, node_id: int, actor) -> Session:
    """Move to another node of the session (a sibling branch, another tree, an earlier turn)."""
    with SessionLock(session.pk, version).write() as session:
        if session.current_node.status == NodeStatus.STREAMING:
            raise AnnotationError(_("Wait for the model to finish this response, or cancel it."))
        target = session.nodes.filter(pk=node_id).first()
        if target is None:
            raise Missing(_("No such node in this session."))
        previous = session.current_node_id
        session.current_node = target
        bump(session)
        Event.objects.create(session=session, kind=EventKind.SELECT_NODE, node=target, actor=actor,
                             payload={"from_node": previous})
    return session


def finish(*, session: Session, version: int, actor, accept: bool, comment: str = "") -> Session:
    """Accept the current node as the answer, or reject the item. Either way the claim is done."""
    with SessionLock(session.pk, version).write() as session:
        node = session.current_node
        if accept and node.status != NodeStatus.COMPLETE:
            raise AnnotationError(_("Only a complete response can be accepted; wait for it or continue it."))
        session.status = SessionStatus.ACCEPTED if accept else SessionStatus.REJECTED
        bump(session)
        Event.objects.create(session=session, kind=EventKind.ACCEPT if accept else EventKind.REJECT, node=node,
                             actor=actor, payload={"comment": comment} if comment else {})
        end_claim(claim=session.claim, state=ClaimState.DONE)  # refused: the whole verdict is undone
        if accept:  # after end_claim: the item's row is locked, so its other sessions' accepts are all seen
            figures.session_accepted(project_id=session.item.project_id, session_id=session.pk,
                                     item_id=session.item_id)
        # A finished session never changes again: its export rows are derived once, by a worker after commit.
        stored.build_soon(session.item.project_id)
    return session
