"""How every operator changes a session: never holding its lock while a model or a tool works.

An operator (a correction, a new turn, a tool run, undo, accept...) changes a session in up to three steps
(DESIGN.md §6, "No lock across slow work"):

1. look: read the session and check the request under the session's row lock, held for the checks only;
2. work: tokenize, render, score, parse, run tools, with no transaction open. On vLLM a model call is an
   HTTP request, on the local model a forward pass, and a tool call starts a server: a lock held meanwhile
   would keep the session, a database connection and, on SQLite, the whole database's write lock for as
   long as the slowest of them takes;
3. write: lock the session again, refused with StaleVersion (a 409) if its version moved since the look (another
   tab, a double click, a stream's end), and write the change with its Event.

`SessionLock` gives every operator those steps; an operator with no work to do only writes. The test suite
fails any test in which a backend or tool call runs inside a transaction (tests/backend_guard.py).
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from django.db import transaction
from django.utils.translation import gettext as _

from .errors import AnnotationError, StaleVersion
from .models import CLAIM_STATE_WORDS, SESSION_STATUS_WORDS, ClaimState, Session, SessionStatus

Checked = TypeVar("Checked")


class SessionLock:
    """The session `session_id` as the client saw it at `version`: look at it, then write to it, each under its lock."""

    def __init__(self, session_id: int, version: int):
        self.session_id, self.version = session_id, version

    def look(self, check: Callable[[Session], Checked]) -> Checked:
        """Step 1: what `check` finds in the session read under its lock (it raises to refuse); the lock is released
        when it returns, so the work that follows holds nothing."""
        with transaction.atomic():
            return check(locked_session(self.session_id, self.version))

    @contextmanager
    def write(self) -> Iterator[Session]:
        """Step 3: the session locked for the write, refused (409) if its version moved since the look."""
        with transaction.atomic():
            yield locked_session(self.session_id, self.version)


def locked_session(session_id: int, version: int) -> Session:
    """The session under its row lock, if it is still at `version`, open, and its claim active."""
    session = Session.objects.select_for_update(of=("self",)).select_related(
        "current_node", "item", "claim").get(pk=session_id)
    if session.version != version:
        raise StaleVersion(_("The session changed (version %(now)s, you had %(yours)s); reload it.")
                           % {"now": session.version, "yours": version})
    if session.status != SessionStatus.OPEN:
        raise AnnotationError(_("The session is %(status)s; it cannot change.") % {
            "status": SESSION_STATUS_WORDS.get(session.status, session.status)})
    if session.claim.state != ClaimState.ACTIVE:  # skipped, released or reassigned: the item is not yours now
        raise AnnotationError(_("Your claim on this item was %(state)s; the session cannot change.")
                              % {"state": CLAIM_STATE_WORDS.get(session.claim.state, session.claim.state)})
    return session


def bump(session: Session) -> None:
    """A write's last step: the session's next version (with its current node and status)."""
    session.version += 1
    session.save(update_fields=["version", "current_node", "status", "updated_at"])
