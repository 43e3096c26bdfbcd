"""Reads of the onPanda workflow, scoped to the requesting user.

Annotators see only their own claims and sessions; curators and admins see the
whole project. Writing to a session is for its annotator alone.
"""

import math
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _

from dataplatform.accounts.models import ApiToken, Membership, Project
from dataplatform.accounts.permissions import CAN_ANNOTATE, CAN_CURATE, visible_projects
from dataplatform.inference import backend_for
from dataplatform.inference.text import group_pieces
from dataplatform.tallies import selectors as tallies

from . import figures
from .models import Claim, ClaimState, Node, Session, SessionStatus
from .services import config_for


def sessions_visible_to(user, *, token: ApiToken | None = None) -> QuerySet[Session]:
    """Curators see every session of their projects; annotators only their own."""
    curated = visible_projects(user, roles=CAN_CURATE, token=token)
    annotated = visible_projects(user, roles=CAN_ANNOTATE, token=token)
    return (Session.objects.filter(Q(item__project__in=curated) | Q(item__project__in=annotated, annotator=user))
            # with the project's settings (config_for): every onPanda call reads them
            .select_related("item", "item__project", "item__project__annotation_config", "annotator",
                            "current_node", "claim")
            .defer("item__rollout"))  # the initial rollout (top-k per position) is only read when a session opens


def session_for(user, session_id: int, *, token: ApiToken | None = None) -> Session:
    session = sessions_visible_to(user, token=token).filter(pk=session_id).first()
    if session is None:
        raise Http404(_("No such session."))
    if session.current_node is not None:
        # Its text is rendered through node.session.item.project: reuse what was loaded (3 queries fewer).
        session.current_node.session = session
    return session


def session_for_writing(user, session_id: int, *, token: ApiToken | None = None) -> Session:
    """Only the session's own annotator may change it (others get a 404, not a hint).

    Leaner than `session_for`: this is on the path of every correction and stream, so it
    asks only what a writer needs (their own session, in a project they still annotate in)."""
    session = (Session.objects.filter(pk=session_id, annotator_id=user.pk,
                                      item__project__in=visible_projects(user, roles=CAN_ANNOTATE, token=token))
               .select_related("item", "item__project", "item__project__annotation_config")
               .defer("item__rollout").first())
    if session is None:
        raise Http404(_("No such session."))
    return session


def sessions_to_review(project: Project, *, pending: bool = False) -> QuerySet[Session]:
    """The project's accepted sessions, latest first, walked on the (project, status, -id) index: what a row of the
    review page shows (not the item's prompt and rollout, large JSON), with their reviews; `pending`: unreviewed."""
    sessions = (Session.objects.filter(project=project, status=SessionStatus.ACCEPTED)
                .select_related("item", "annotator").prefetch_related("reviews")
                .only("id", "status", "current_node_id", "item__id", "item__external_id", "annotator__id",
                      "annotator__username").order_by("-id"))
    return sessions.filter(reviews__isnull=True) if pending else sessions


def node_of(session: Session, node_id: int) -> Node:
    node = session.nodes.filter(pk=node_id).first()
    if node is None:
        raise Http404(_("No such node in this session."))
    node.session = session  # reuse the loaded session, item and project instead of fetching them again
    return node


# What a row of a claims list shows (the queue page, my-items): not the item's prompt and rollout, nor the session's
# meta, which are large JSON and made a page of 200 claims cost seconds to read.
CLAIM_ROW = ("id", "project_id", "item_id", "annotator_id", "state", "lease_expires_at", "updated_at",
             "item__id", "item__external_id", "session__id", "session__status")


def my_claims(user, project: Project) -> QuerySet[Claim]:
    """The user's claims in the project, latest first, walked on the (project, annotator, -updated_at, -id) index."""
    return (Claim.objects.filter(project=project, annotator=user)
            .select_related("item", "session").only(*CLAIM_ROW).order_by("-updated_at", "-id"))


def queue_state(project: Project) -> dict:
    """Counts a curator needs: items, answered items, claims by state (kept figures: annotate/figures.py), and
    the active claims' live and expired leases (counted: an annotator holds one active claim a project at most)."""
    now = timezone.now()
    kept = tallies.counts(project.pk, figures.QUEUE)
    leases = figures.active_claims(project.pk).aggregate(
        live=Count("id", filter=Q(lease_expires_at__gt=now)), expired=Count("id", filter=Q(lease_expires_at__lte=now)))
    return {
        "items": kept.get("items", 0),
        "answered": kept.get("answered", 0),
        "claims": {state: kept.get(f"claims|{state}", 0) for state in ClaimState.values},
        "active_leases": leases["live"],
        "expired_leases": leases["expired"],
    }


def project_claims(project: Project) -> QuerySet[Claim]:
    """The project's claims, latest first, for the curator's queue table (a page of them: the claim's own project
    column and its (project, -updated_at, -id) index, not a join through the items)."""
    return (Claim.objects.filter(project=project).select_related("item", "annotator", "session")
            .only(*CLAIM_ROW, "annotator__username").order_by("-updated_at", "-id"))


# --- presenting a node ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenGroup:
    """One or more tokens that together make whole characters (what the annotator clicks)."""

    start: int
    end: int
    text: str
    origin: str
    locked: bool
    channel: str  # the response template's channel of its first token (reasoning, content, tool_name, ...)
    logprob: float | None  # of the whole group (the sum of its tokens'); None when a token was typed or written


ORIGIN_ORDER = ("typed", "template", "candidate", "model")  # a group shows the most human-made of its tokens


def backend_of(node: Node):
    """The backend of the node's project (its annotation config's model): token pieces for display."""
    project = node.session.item.project
    return backend_for(project, model=config_for(project).model_name)


def token_groups(node: Node) -> list[TokenGroup]:
    backend = backend_of(node)
    pieces = backend.token_pieces(node.token_ids) if node.token_ids else []
    groups = []
    for group in group_pieces(pieces):
        origins = set(node.origins[group.start:group.end])
        origin = next(origin for origin in ORIGIN_ORDER if origin in origins or origin == "model")
        logprobs = node.logprobs[group.start:group.end]
        channel = node.channels[group.start] if group.start < len(node.channels) else "content"
        groups.append(TokenGroup(start=group.start, end=group.end, text=group.text, origin=origin,
                                 locked=group.start < node.locked_until, channel=channel,
                                 logprob=None if None in logprobs else sum(logprobs)))
    return groups


def candidates_at(node: Node, position: int) -> list[dict]:
    """The model's top-k at a position, with text and probability; the current token marked."""
    if not 0 <= position < len(node.token_ids):
        raise Http404(_("No token at that position."))
    backend = backend_of(node)
    current = node.token_ids[position]
    top = node.top[position]
    pieces = backend.token_pieces([token_id for token_id, _ in top]) if top else []
    return [
        {"rank": rank, "token_id": token_id, "text": piece.decode("utf-8", errors="replace"),
         "logprob": logprob, "probability": math.exp(logprob), "current": token_id == current}
        for rank, ((token_id, logprob), piece) in enumerate(zip(top, pieces, strict=True), start=1)
    ]


def annotators_of(project: Project) -> list[str]:
    """Usernames that may take items in the project (for the curator's reassign menu)."""
    return list(Membership.objects.filter(project=project, role__in=list(CAN_ANNOTATE))
                .order_by("user__username").values_list("user__username", flat=True))
