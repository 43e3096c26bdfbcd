"""The operators that change a response inside its turn: each makes a child of the current node.

- `correct` (onPanda's continue_with_chosen, continue_with_input and a forced stop): the token at a
  position, in any channel, is replaced by a top-k candidate, a typed rewrite, or the end; the child
  keeps the tokens before it and, unless it ends there, streams the rest (`streaming.continue_node`);
- `edit_selection`: a typed span replaces a span in the middle and the tokens after it are kept,
  re-scored by the model (prompt logprobs) so they keep real probabilities and top-k;
- `continue_generating`: a response that ended at its token budget gets another budget.

Every write names the session version the client saw (a stale one is refused) and adds its Event. Each
reads and checks under the session's lock, tokenizes, scores, parses and checks the token budget (budget.py)
with no transaction open, and writes under the lock again if the version has not moved (locking.py).
"""

from django.utils.translation import gettext as _

from dataplatform.inference import backend_for

from . import budget, figures
from .errors import CorrectionRefused
from .locking import SessionLock, bump
from .models import Event, EventKind, Node, NodeStatus, Origin, Session
from .nodes import fork_of, next_key, parse_into, template_of
from .services import config_for
from .tokens import TokenSequence

STOP_MARKER = "<|stop|>"  # typed at the end of a rewrite, it ends the response there (as in onPanda)


def _current(lock: SessionLock, node_id: int) -> Node:
    """The current node, read under the session's lock (released before any backend call), and checked."""
    node = lock.look(lambda session: session.current_node)
    if node is None or node.pk != node_id:
        raise CorrectionRefused(_("Corrections apply to the node you are looking at; reload the session."))
    if node.status == NodeStatus.STREAMING:
        raise CorrectionRefused(_("Wait for the model to finish this response before correcting it."))
    return node


def _correctable(node: Node, position: int) -> None:
    if position < node.locked_until:
        raise CorrectionRefused(
            _("Token %(position)s comes before your earlier correction (tokens before %(locked)s are "
              "fixed). Undo that correction first.") % {"position": position, "locked": node.locked_until})
    if not 0 <= position < len(node.token_ids):
        raise CorrectionRefused(_("Position %(position)s is outside the response (%(tokens)s tokens).")
                                % {"position": position, "tokens": len(node.token_ids)})


def _save(lock: SessionLock, session: Session, child: Node, kind: str, payload: dict, actor) -> Node:
    """Parse the child's tokens (no transaction open: a backend call), then save it as the session's current node
    and record what made it, under the lock, if the session has not moved since it was read."""
    project = session.item.project
    backend = backend_for(project, model=config_for(project).model_name)
    parse_into(child, template=template_of(config_for(project), backend), backend=backend)
    with lock.write() as session:  # refused if anything changed meanwhile
        child.session, child.key = session, next_key(session)
        child.save()
        session.current_node = child
        bump(session)
        event = Event.objects.create(session=session, kind=kind, node=child, actor=actor, payload=payload)
        if kind == EventKind.CONTINUE_WITH_CHOSEN:  # the metrics' candidate ranks and probabilities
            figures.chosen_made(project_id=project.pk, event_id=event.pk)
    return child


def correct(*, session: Session, version: int, node_id: int, position: int, actor,
            token_id: int | None = None, text: str | None = None, stop: bool = False) -> Node:
    """Replace the token at `position` of the current node: a top-k candidate, a typed rewrite, or a stop.

    Returns the new child node. Unless the correction ends the response, the child is left `streaming`;
    `streaming.continue_node` then generates the rest from its exact token ids. A child whose prompt (the
    conversation, the kept tokens, the typed ones) is over the token budget is refused, naming `text` when the
    typed text is what made it long."""
    if sum(x is not None and x is not False for x in (token_id, text, stop or None)) != 1:
        raise CorrectionRefused(_("Give exactly one of: a candidate token, a typed rewrite, or stop."))
    lock = SessionLock(session.pk, version)
    node = _current(lock, node_id)
    _correctable(node, position)
    child = fork_of(node, session=session, operator=EventKind.CONTINUE_WITH_CHOSEN, keep=position)
    rejected = TokenSequence(node)[position]
    common = {"position": position, "rejected_token_id": rejected.token_id, "channel": rejected.channel}
    project = session.item.project
    backend = backend_for(project, model=config_for(project).model_name)
    tokens = TokenSequence(child)
    typed_ids = []
    if token_id is not None:
        stop = token_id in backend.eos_token_ids  # picking the model's end token ends the response there
        candidates = [candidate for candidate, _logprob in rejected.top]
        if token_id not in candidates:
            raise CorrectionRefused(_("Token %(token)s is not among the model's top-%(k)s here.")
                                    % {"token": token_id, "k": len(candidates)})
        rank = candidates.index(token_id)
        logprob = rejected.top[rank][1]
        tokens.append(token_id, origin=Origin.CANDIDATE, logprob=logprob, top=rejected.top, rank=rank + 1)
        kind = EventKind.CONTINUE_WITH_CHOSEN
        payload = common | {"token_id": token_id, "rank": rank + 1, "logprob": logprob,
                            "top_logprobs": rejected.top}
    elif text is not None:
        ends_here = text.endswith(STOP_MARKER)
        typed = text[: -len(STOP_MARKER)] if ends_here else text
        # The typed text is tokenized alone and appended to the unchanged prefix ids.
        typed_ids = backend.tokenize(typed) if typed else []
        if not typed_ids and not ends_here:
            raise CorrectionRefused(_("Type some text, or end it with <|stop|> to stop here."))
        tokens.extend(typed_ids, origin=Origin.TYPED)
        stop = ends_here
        kind = EventKind.CONTINUE_WITH_INPUT
        payload = common | {"text": text, "token_ids": typed_ids, "stop": ends_here}
    else:
        kind = EventKind.FORCE_STOP
        payload = common
    child.operator = kind
    child.locked_until = len(tokens)
    if stop:
        child.status, child.finish_reason = NodeStatus.COMPLETE, "stop"
    else:  # the model continues it: what it reads must fit the budget
        budget.check_continuation(child, config=config_for(project), backend=backend, kept=position,
                                  typed=len(tokens) - position, field="text" if typed_ids else None)
    return _save(lock, session, child, kind, payload, actor)


def edit_selection(*, session: Session, version: int, node_id: int, start: int, end: int, text: str,
                   actor) -> Node:
    """Replace tokens [start, end) of the current node with typed text and keep the tokens after them.

    The kept tokens were generated after the old span; the model scores them again after the new one
    (prompt logprobs with top-k), so every kept token has its probability under the prefix it now has.
    The scoring reads the whole response: over the token budget, it is refused before it runs."""
    lock = SessionLock(session.pk, version)
    node = _current(lock, node_id)
    _correctable(node, start)
    if not start < end <= len(node.token_ids):
        raise CorrectionRefused(_("The selection [%(start)s, %(end)s) is not a span of the response "
                                  "(%(tokens)s tokens).") % {"start": start, "end": end,
                                                             "tokens": len(node.token_ids)})
    project = session.item.project
    backend = backend_for(project, model=config_for(project).model_name)
    typed_ids = backend.tokenize(text) if text else []
    response = TokenSequence(node)
    kept, rejected_ids = response.slice(end).token_ids, response.slice(start, end).token_ids
    if typed_ids == rejected_ids:
        raise CorrectionRefused(_("The new text is the same as the selection."))
    child = fork_of(node, session=session, operator=EventKind.EDIT_SELECTION, keep=start)
    tokens = TokenSequence(child)
    tokens.extend(typed_ids, origin=Origin.TYPED)
    child.locked_until = len(tokens)
    config = config_for(project)
    if kept:
        budget.check_continuation(child, config=config, backend=backend, kept=start, typed=len(typed_ids),
                                  scored=len(kept), field="text")
    top_k = config.top_k
    scores = backend.prompt_logprobs(child.prompt_ids + tokens.token_ids + kept, top_k=top_k)[-len(kept):] \
        if kept else []
    rescored = [score.get(token_id) if score else None for token_id, score in zip(kept, scores, strict=True)]
    tokens.extend(kept, origin=Origin.MODEL, logprobs=rescored, tops=[_top(score, top_k) for score in scores])
    child.status, child.finish_reason = NodeStatus.COMPLETE, node.finish_reason
    payload = {"start": start, "end": end, "text": text, "token_ids": typed_ids, "rejected_token_ids": rejected_ids,
               "kept_tokens": len(kept), "channel": response[start].channel}
    return _save(lock, session, child, EventKind.EDIT_SELECTION, payload, actor)


def _top(score: dict | None, top_k: int) -> list[list]:
    """Prompt logprobs at one position as a node's top-k: [[token_id, logprob], ...] best first (the scored
    token itself comes with them even when it is not among the best: it is left out unless it is)."""
    return sorted(([int(token_id), logprob] for token_id, logprob in (score or {}).items()),
                  key=lambda pair: -pair[1])[:top_k]


def continue_generating(*, session: Session, version: int, node_id: int, actor) -> Node:
    """A response that stopped at its token budget (`length`) continues: a child with every token kept and
    another budget of the project's max_tokens, left streaming (refused when the prompt and the response so
    far are over the token budget)."""
    lock = SessionLock(session.pk, version)
    node = _current(lock, node_id)
    if node.finish_reason != "length":
        ended = (_("Only a response that ran out of tokens can be continued; this one ended with "
                   "%(reason)s.") % {"reason": node.finish_reason} if node.finish_reason
                 else _("Only a response that ran out of tokens can be continued; this one has not ended."))
        raise CorrectionRefused(ended)
    project = session.item.project
    child = fork_of(node, session=session, operator=EventKind.CONTINUE_GENERATING, keep=len(node.token_ids))
    child.locked_until = node.locked_until
    child.max_tokens = len(node.token_ids) + config_for(project).max_tokens
    budget.check_continuation(child, config=config_for(project),
                              backend=backend_for(project, model=config_for(project).model_name),
                              kept=len(node.token_ids))
    return _save(lock, session, child, EventKind.CONTINUE_GENERATING, {"from_token": len(node.token_ids)}, actor)
