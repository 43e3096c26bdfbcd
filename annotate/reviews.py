"""Review of accepted sessions, and where an accepted answer first departed from the model.

A review is a curator's verdict on an accepted session. Reviews are append-only
(DESIGN §6): a second review does not overwrite the first; the latest is current.

`first_error_position` reads the session tree: the accepted node's ancestor chain
holds the corrections that survived (undone branches hang off the chain and are
ignored). Because a correction can only come after the tokens an earlier one
fixed (`locked_until`), the fork nearest the root is also the earliest position
the annotator changed, i.e. where the model's answer first went wrong.
"""

from collections.abc import Iterable, Mapping

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from dataplatform.accounts.permissions import CAN_CURATE, role_in

from .errors import AnnotationError
from .models import SESSION_STATUS_WORDS, EventKind, Node, Review, Session, SessionStatus

# node id -> (parent id, fork index, operator); enough of a session tree to walk a lineage.
Tree = Mapping[int, tuple[int | None, int | None, str]]
TREE_FIELDS = ("id", "parent_id", "fork_index", "operator")


def review_session(*, session: Session, reviewer, decision: str, comment: str = "") -> Review:
    """Record a curator's verdict on an accepted session; `decision` and `comment` are what ReviewSerializer
    checked (a known decision; a rejection says what is wrong).

    Refused with AnnotationError when the session is not accepted. A reviewer who may not curate the session's
    project gets PermissionDenied: the API checks roles too, but a service must not rely on it.
    """
    if role_in(reviewer, session.item.project) not in CAN_CURATE:
        raise PermissionDenied(_("Only a curator or an admin of this project can review its sessions."))
    # Read the status from the database, not from the caller's copy, which may be stale. Accepted is a
    # final state (no service moves a session out of it), so no lock is needed between check and insert.
    status = Session.objects.filter(pk=session.pk).values_list("status", flat=True).first()
    if status != SessionStatus.ACCEPTED:
        raise AnnotationError(_("Only accepted sessions can be reviewed; this one is %(status)s.") % {
            "status": SESSION_STATUS_WORDS.get(status, status) if status else _("gone")})
    return Review.objects.create(session_id=session.pk, reviewer=reviewer, decision=decision, comment=comment)


def lineage_forks(tree: Tree, node_id: int | None) -> list[int]:
    """Fork positions of the corrections on `node_id`'s ancestor chain within its turn, root first.

    Empty when `node_id` is its turn's first response (nothing was corrected) or is unknown. The walk
    stops at the turn's first response (a tool round's or a new round's node has a parent but no fork:
    positions of earlier turns are in other responses); more tokens for a response that ran out
    (continue_generating) are not a correction.
    """
    forks: list[int] = []
    seen: set[int] = set()
    while node_id is not None and node_id in tree and node_id not in seen:
        seen.add(node_id)  # a cycle cannot be built by the services; do not loop forever on bad data anyway
        parent_id, fork_index, operator = tree[node_id]
        if fork_index is None:
            break
        if parent_id is not None and operator != EventKind.CONTINUE_GENERATING:
            forks.append(fork_index)
        node_id = parent_id
    forks.reverse()
    return forks


def tree_of(rows: Iterable[tuple[int, int | None, int | None, str]]) -> Tree:
    """Build a Tree from (id, parent_id, fork_index, operator) rows (TREE_FIELDS)."""
    return {node_id: (parent_id, fork_index, operator) for node_id, parent_id, fork_index, operator in rows}


def first_error_position(session: Session) -> int | None:
    """The fork position of the first correction that survived into the accepted answer.

    None when the model's first response was accepted as it was. An accepted session
    is frozen (no service writes to it after accept), so its current node is the
    node the accept event names.
    """
    row = Session.objects.filter(pk=session.pk).values("status", "current_node_id").first()
    if row is None or row["status"] != SessionStatus.ACCEPTED:
        raise AnnotationError(_("Only an accepted session has a first error position."))
    tree = tree_of(Node.objects.filter(session_id=session.pk).values_list(*TREE_FIELDS))
    forks = lineage_forks(tree, row["current_node_id"])
    return forks[0] if forks else None


def first_error_positions(sessions: Iterable[Session]) -> dict[int, int | None]:
    """`first_error_position` of a page of accepted sessions, by session id, read in one query: the review page
    shows one per row, and a query per row made the page cost grow with its length."""
    accepted = {session.pk: session.current_node_id for session in sessions
                if session.status == SessionStatus.ACCEPTED}
    trees: dict[int, dict] = {session_id: {} for session_id in accepted}
    for session_id, *node in Node.objects.filter(session_id__in=accepted).values_list("session_id", *TREE_FIELDS):
        trees[session_id][node[0]] = tuple(node[1:])
    return {session_id: (forks[0] if (forks := lineage_forks(trees[session_id], node_id)) else None)
            for session_id, node_id in accepted.items()}
