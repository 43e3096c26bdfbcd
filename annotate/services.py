"""Every write of the onPanda workflow: rollouts, claims, sessions, corrections, continuation.

All state changes happen here, each with its append-only Event in the same
transaction. Writes to a session carry the version the client saw; a stale
version is refused (the API answers 409), never silently applied.
"""

import hashlib
from collections.abc import Iterator
from datetime import timedelta

from django.db import close_old_connections, connection, transaction
from django.db.models import Max, Q
from django.utils import timezone

from dataplatform import claims
from dataplatform.accounts.models import Project
from dataplatform.errors import Conflict, Refused
from dataplatform.inference import BackendError, backend_for_model

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
from .prompts import render_prompt, stored_prompt

STOP_MARKER = "<|stop|>"  # typed at the end of a rewrite, it ends the response there (as in onPanda)
SAVE_EVERY_TOKENS = 8  # a streaming node is saved this often, so a failure loses at most a few tokens


class AnnotationError(Refused):
    """A request the workflow refuses, with a message for the annotator."""


class StaleVersion(Conflict, AnnotationError):
    """The session changed since the client read it (another tab, a double click)."""


class CorrectionRefused(AnnotationError):
    pass


# --- configuration ----------------------------------------------------------------------------

def config_for(project: Project) -> AnnotationConfig:
    """The project's settings, read once per project object (a request or a job reuses it)."""
    config = getattr(project, "_annotation_config", None)
    if config is None:
        try:  # joined in when the project was read with project_for(..., related=["annotation_config"])
            config = project.annotation_config
        except AnnotationConfig.DoesNotExist:
            config, _ = AnnotationConfig.objects.get_or_create(project=project)
        project._annotation_config = config
    return config


def update_config(*, project: Project, changes: dict) -> AnnotationConfig:
    """Change some of the project's settings; `changes` holds values ConfigSerializer has checked."""
    config = config_for(project)
    for name, value in changes.items():
        setattr(config, name, value)
    # Only the changed columns: two curators saving different settings at once both keep theirs.
    config.save(update_fields=list(changes))
    return config


def backend_for(project: Project):
    """The model backend the project chose (its annotation config), or the platform's default."""
    return backend_for_model(config_for(project).model_name)


def seed_for(config: AnnotationConfig, item: Item, salt: str) -> int | None:
    if config.seed_policy == SeedPolicy.FIXED:
        return config.seed
    if config.seed_policy == SeedPolicy.PER_ITEM:
        digest = hashlib.blake2b(f"{config.seed}:{item.pk}:{salt}".encode(), digest_size=4).digest()
        return int.from_bytes(digest, "big")
    return None


# --- initial rollouts (a job kind) -----------------------------------------------------------------

def generate_rollouts(*, project: Project, progress, regenerate: bool = False) -> dict:
    """Answer every item that has no rollout yet (or all, with regenerate), saving each as it is done."""
    config = config_for(project)
    backend = backend_for(project)
    items = Item.objects.filter(project=project).order_by("id")
    if not regenerate:
        items = items.filter(rollout__isnull=True)
    progress.set_total(items.count())
    done = 0
    for item in items.iterator(chunk_size=100):
        prompt_ids = render_prompt(backend, stored_prompt(item.messages, item.tools))
        seed = seed_for(config, item, "rollout")
        steps = list(backend.stream(prompt_ids, max_tokens=config.max_tokens, temperature=config.temperature,
                                    seed=seed, top_k=config.top_k))
        Item.objects.filter(pk=item.pk).update(prompt_ids=prompt_ids, rollout={
            "token_ids": [s.token_id for s in steps],
            "logprobs": [s.logprob for s in steps],
            "top": [[list(pair) for pair in s.top] for s in steps],
            "finish_reason": steps[-1].finish_reason if steps else "length",
            "model_id": backend.model_id,
            "seed": seed,
        })
        done += 1
        progress.report(done, message=f"{done} of {progress.job.progress_total} items answered")
    return {"answered": done}


# --- claims ---------------------------------------------------------------------------------------

def claim_next(*, project: Project, annotator) -> Claim | None:
    """The annotator's current claim, renewed, or a claim on the next answered item with a free slot."""
    config = config_for(project)
    return claims.claim_next(claim_model=Claim, item_field="item", holder_field="annotator", project_id=project.pk,
                             holder_id=annotator.pk, overlap=config.overlap, lease_minutes=config.lease_minutes,
                             ready=Q(rollout__isnull=False))


def end_claim(*, claim: Claim, state: ClaimState) -> Claim:
    """Skip or release a claim (or mark it done): only an active one, once, under its item's lock."""
    try:
        return claims.end_claim(claim_model=Claim, item_field="item", claim_id=claim.pk, state=state,
                                overlap=lambda: config_for(claim.project).overlap)
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
            raise AnnotationError(f"{to_user} has already had this item.")
        if Claim.objects.filter(project_id=claim.project_id, annotator=to_user, state=ClaimState.ACTIVE).exists():
            raise AnnotationError(f"{to_user} is working on another item of this project; reassign this one when "
                                  "they have finished it.")
        keeps_its_slot = claim.state == ClaimState.ACTIVE and claim.lease_expires_at > now
        if not keeps_its_slot and claims.holders(Claim, "item", claim.item_id, now=now) >= config.overlap:
            raise AnnotationError("This item has no free slot to reassign: its claim has ended and others hold "
                                  "every slot.")
        if claim.state == ClaimState.ACTIVE:
            claim.state = ClaimState.RELEASED
            claim.save(update_fields=["state", "updated_at"])
        return Claim.objects.create(item_id=claim.item_id, project_id=claim.project_id, annotator=to_user,
                                    lease_expires_at=now + timedelta(minutes=config.lease_minutes))


# --- sessions -------------------------------------------------------------------------------------

def claim_with_session(*, project: Project, annotator) -> Claim | None:
    """`claim_next` and `open_session` in one transaction: the claim, with its session as `.session`.

    One transaction instead of two, and a claim made just now has no session to look for: this is
    the path of every Claim press (API and browser), the hottest write of the platform."""
    with transaction.atomic():
        claim = claim_next(project=project, annotator=annotator)
        if claim is not None:
            claim.session = open_session(claim=claim)
    return claim


def open_session(*, claim: Claim) -> Session:
    """The claim's session; the first time, its root node is the item's initial rollout."""
    existing = None if getattr(claim, "is_new", False) else Session.objects.filter(claim=claim).first()
    if existing:
        return existing
    rollout = Item.objects.values_list("rollout", flat=True).get(pk=claim.item_id)  # not the whole item
    if not rollout:
        raise AnnotationError("This item has no model response yet; run the rollout job first.")
    with transaction.atomic(savepoint=False):  # inside claim_with_session's transaction: no savepoint needed
        session = Session.objects.create(claim=claim, item_id=claim.item_id, annotator_id=claim.annotator_id)
        root = Node.objects.create(
            session=session, key=1, token_ids=rollout["token_ids"], logprobs=rollout["logprobs"], top=rollout["top"],
            origins=[Origin.MODEL] * len(rollout["token_ids"]), candidate_ranks=[None] * len(rollout["token_ids"]),
            finish_reason=rollout["finish_reason"], model_id=rollout["model_id"], seed=rollout["seed"],
        )
        session.current_node = root
        session.save(update_fields=["current_node"])
        Event.objects.create(session=session, kind=EventKind.GENERATE_NEW, node=root, actor=None,
                             payload={"model_id": rollout["model_id"], "seed": rollout["seed"]})
    return session


def _locked_session(session_id: int, version: int) -> Session:
    session = Session.objects.select_for_update(of=("self",)).select_related(
        "current_node", "item", "claim").get(pk=session_id)
    if session.version != version:
        raise StaleVersion(f"The session changed (version {session.version}, you had {version}); reload it.")
    if session.status != SessionStatus.OPEN:
        raise AnnotationError(f"The session is {session.status}; it cannot change.")
    if session.claim.state != ClaimState.ACTIVE:  # skipped, released or reassigned: the item is not yours now
        raise AnnotationError(f"Your claim on this item was {session.claim.state}; the session cannot change.")
    return session


def _bump(session: Session) -> None:
    session.version += 1
    session.save(update_fields=["version", "current_node", "status", "updated_at"])


def correct(*, session: Session, version: int, node_id: int, position: int, actor,
            token_id: int | None = None, text: str | None = None, stop: bool = False) -> Node:
    """Replace the token at `position` of the current node: a top-k candidate, a typed rewrite, or a stop.

    Returns the new child node. Unless the correction ends the response, the child is
    left `streaming`; `continue_node` then generates the rest from its exact token ids.
    """
    if sum(x is not None and x is not False for x in (token_id, text, stop or None)) != 1:
        raise CorrectionRefused("Give exactly one of: a candidate token, a typed rewrite, or stop.")
    with transaction.atomic():
        session = _locked_session(session.pk, version)
        node = session.current_node
        if node is None or node.pk != node_id:
            raise CorrectionRefused("Corrections apply to the node you are looking at; reload the session.")
        if node.status == NodeStatus.STREAMING:
            raise CorrectionRefused("Wait for the model to finish this response before correcting it.")
        if position < node.locked_until:
            raise CorrectionRefused(
                f"Token {position} comes before your earlier correction (tokens before {node.locked_until} are "
                "fixed). Undo that correction first.")
        if not 0 <= position < len(node.token_ids):
            raise CorrectionRefused(f"Position {position} is outside the response ({len(node.token_ids)} tokens).")

        prefix = slice(0, position)
        child = Node(
            session=session, parent=node, key=(session.nodes.aggregate(top=Max("key"))["top"] or 0) + 1,
            fork_index=position,
            token_ids=node.token_ids[prefix], logprobs=node.logprobs[prefix], top=node.top[prefix],
            origins=node.origins[prefix], candidate_ranks=node.candidate_ranks[prefix],
            model_id=node.model_id, seed=node.seed, status=NodeStatus.STREAMING,
        )
        rejected_id = node.token_ids[position]
        if token_id is not None:
            # Picking the model's end token ends the response there.
            stop = token_id in backend_for(session.item.project).eos_token_ids
            candidates = [candidate for candidate, _ in node.top[position]]
            if token_id not in candidates:
                raise CorrectionRefused(f"Token {token_id} is not among the model's top-{len(candidates)} here.")
            rank = candidates.index(token_id)
            logprob = node.top[position][rank][1]
            child.token_ids.append(token_id)
            child.logprobs.append(logprob)
            child.top.append(node.top[position])
            child.origins.append(Origin.CANDIDATE)
            child.candidate_ranks.append(rank + 1)
            kind = EventKind.CONTINUE_WITH_CHOSEN
            payload = {"position": position, "token_id": token_id, "rank": rank + 1, "logprob": logprob,
                       "rejected_token_id": rejected_id, "top_logprobs": node.top[position]}
        elif text is not None:
            ends_here = text.endswith(STOP_MARKER)
            typed = text[: -len(STOP_MARKER)] if ends_here else text
            # The typed text is tokenized alone and appended to the unchanged prefix ids.
            typed_ids = backend_for(session.item.project).tokenize(typed) if typed else []
            if not typed_ids and not ends_here:
                raise CorrectionRefused("Type some text, or end it with <|stop|> to stop here.")
            child.token_ids += typed_ids
            child.logprobs += [None] * len(typed_ids)
            child.top += [[] for _ in typed_ids]
            child.origins += [Origin.TYPED] * len(typed_ids)
            child.candidate_ranks += [None] * len(typed_ids)
            stop = ends_here
            kind = EventKind.CONTINUE_WITH_INPUT
            payload = {"position": position, "text": text, "token_ids": typed_ids, "rejected_token_id": rejected_id,
                       "stop": ends_here}
        else:
            kind = EventKind.FORCE_STOP
            payload = {"position": position, "rejected_token_id": rejected_id}
        child.locked_until = len(child.token_ids)
        if stop:
            child.status, child.finish_reason = NodeStatus.COMPLETE, "stop"
        child.save()
        session.current_node = child
        _bump(session)
        Event.objects.create(session=session, kind=kind, node=child, actor=actor, payload=payload)
    return child


def continue_node(*, node: Node) -> Iterator:
    """Generate the rest of a streaming (or interrupted) node from its exact token ids, yielding each step.

    The node is saved every few tokens and at the end; if the backend fails, the node
    keeps what it has, is marked interrupted, and the error propagates (retry = call again).
    """
    session = node.session
    config = config_for(session.item.project)
    if node.status == NodeStatus.COMPLETE:
        return
    if session.status != SessionStatus.OPEN:
        raise AnnotationError(f"The session is {session.status}; its responses no longer change.")
    if node.status == NodeStatus.INTERRUPTED:
        Event.objects.create(session=session, kind=EventKind.CONTINUE_GENERATING, node=node, actor=None,
                             payload={"from_token": len(node.token_ids)})
    backend = backend_for(session.item.project)
    remaining = config.max_tokens - len(node.token_ids)
    fields = ["token_ids", "logprobs", "top", "origins", "candidate_ranks", "status", "finish_reason"]
    if remaining <= 0:
        node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
        node.save(update_fields=fields)
        return
    node.status = NodeStatus.STREAMING
    prompt = session.item.prompt_ids + node.token_ids
    seed = seed_for(config, session.item, f"node:{node.pk}:{len(node.token_ids)}")
    try:
        steps = backend.stream(prompt, max_tokens=remaining, temperature=config.temperature, seed=seed,
                               top_k=config.top_k)
        for count, step in enumerate(_releasing_connection(steps), start=1):
            node.token_ids.append(step.token_id)
            node.logprobs.append(step.logprob)
            node.top.append([list(pair) for pair in step.top])
            node.origins.append(Origin.MODEL)
            node.candidate_ranks.append(None)
            if step.finish_reason:
                node.status, node.finish_reason = NodeStatus.COMPLETE, step.finish_reason
            if count % SAVE_EVERY_TOKENS == 0 or step.finish_reason:
                node.save(update_fields=fields)
            yield step
    except BackendError:
        node.status = NodeStatus.INTERRUPTED
        node.save(update_fields=fields)
        raise
    if node.status != NodeStatus.COMPLETE:  # the backend ended without a finish reason
        node.status, node.finish_reason = NodeStatus.COMPLETE, "length"
        node.save(update_fields=fields)


def _releasing_connection(steps: Iterator) -> Iterator:
    """The backend's steps, with the database connection handed back before each one is computed.

    A step waits for the model (one forward pass at a time per process) behind every other stream, for
    seconds under load. Holding a pooled connection meanwhile, 20 streams took the whole pool and every
    other request waited for one and failed (503). Outside a transaction only: inside one (a test, a
    caller's atomic block) the connection must stay.
    """
    while True:
        if not connection.in_atomic_block:
            close_old_connections()  # pooled (CONN_MAX_AGE 0): back to the pool; the next save takes one again
        step = next(steps, None)
        if step is None:
            return
        yield step


def undo(*, session: Session, version: int, actor) -> Session:
    """Go back to the parent of the current node. The undone node stays in the tree as a rejected branch."""
    with transaction.atomic():
        session = _locked_session(session.pk, version)
        node = session.current_node
        if node is None or node.parent_id is None:
            raise AnnotationError("Nothing to undo: this is the model's first response.")
        if node.status == NodeStatus.STREAMING:
            raise AnnotationError("Wait for the model to finish before undoing.")
        session.current_node = node.parent
        _bump(session)
        Event.objects.create(session=session, kind=EventKind.UNDO, node=node.parent, actor=actor,
                             payload={"undone_node": node.pk})
    return session


def finish(*, session: Session, version: int, actor, accept: bool, comment: str = "") -> Session:
    """Accept the current node as the answer, or reject the item. Either way the claim is done."""
    with transaction.atomic():
        session = _locked_session(session.pk, version)
        node = session.current_node
        if accept and node.status != NodeStatus.COMPLETE:
            raise AnnotationError("Only a complete response can be accepted; wait for it or continue it.")
        session.status = SessionStatus.ACCEPTED if accept else SessionStatus.REJECTED
        _bump(session)
        Event.objects.create(session=session, kind=EventKind.ACCEPT if accept else EventKind.REJECT, node=node,
                             actor=actor, payload={"comment": comment} if comment else {})
        end_claim(claim=session.claim, state=ClaimState.DONE)  # refused: the whole verdict is undone
    return session
