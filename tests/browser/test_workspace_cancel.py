"""A response stuck streaming, in Chromium: the workspace opens on a node another request holds (its stream
answers 409 and the page says so), the annotator cancels it with q, and then undo works. No model: the
one-token-per-character backend stands in (annotate/test_supervision.py)."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from annotate import corrections, services
from annotate.models import Item, Node, NodeStatus, Session

from ..annotate.conftest import fake_rollout
from ..doubles import CharBackend
from .pages import at_node, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_stuck_stream_is_cancelled_with_q_and_then_undo_works(page, live_server, project, members, use_backend):
    backend = CharBackend()
    use_backend(backend)
    annotator = members["annotator"]
    Item.objects.create(project=project, messages=[{"role": "user", "content": "Hi"}], source_sha256="c" * 64,
                        prompt_ids=backend.tokenize("<user>Hi<assistant>"),
                        rollout=fake_rollout(backend.tokenize("Hello.")))
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    child = corrections.correct(session=session, version=0, node_id=session.current_node_id, position=1,
                                text="ey", actor=annotator)
    Node.objects.filter(pk=child.pk).update(stream_lease=timezone.now())  # another request streams it

    log_in(page, live_server, "annotator")
    page.goto(live_server.url + reverse("annotate-workspace", args=[session.pk]))
    expect(page.locator("#status-line")).to_have_text(re.compile("another request"))
    expect(page.locator("#btn-cancel")).to_be_visible()
    page.keyboard.press("q")
    # The reloaded page: the node interrupted, not streaming again, with Retry to continue it.
    expect(page.locator("#response-facts")).to_have_text(re.compile("Interrupted"), timeout=15_000)
    expect(page.locator("#btn-retry")).to_be_visible()
    assert Node.objects.get(pk=child.pk).status == NodeStatus.INTERRUPTED
    page.wait_for_load_state("load")  # a key pressed before the reloaded page's scripts run is lost
    page.keyboard.press("u")
    at_node(page, r"node 1,", timeout=15_000)
    assert Session.objects.get(pk=session.pk).current_node_id == session.current_node_id
