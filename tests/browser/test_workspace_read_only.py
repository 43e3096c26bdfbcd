"""The onPanda workspace seen read-only, in Chromium: an accepted session by its annotator, and a
curator looking at an annotator's open session. The page shows the tokens but no editing controls,
and workspace.js must run there without an exception (it once wired controls only writers get)."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from annotate import services
from annotate.models import Item, Session, SessionStatus

from .pages import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORDS = ["Paris", " is", " the", " capital"]
EDITING_CONTROLS = ["#candidates", "#rewrite", "#btn-accept", "#btn-undo", "#btn-reject", "#btn-skip", "#btn-retry",
                    "#response .tok[tabindex]"]


class Vocabulary:
    """Stands in for the model's tokenizer (the page only needs each token's bytes): token 100 + n is WORDS[n]."""

    def token_pieces(self, ids):
        return [WORDS[token_id - 100].encode() for token_id in ids]


@pytest.fixture
def open_session_of(project, use_backend):
    """Opens a session on a new answered item for an annotator."""
    use_backend(Vocabulary())
    ids = [100 + n for n in range(len(WORDS))]
    rollout = {"token_ids": ids, "logprobs": [-0.1] * len(ids), "top": [[[t, -0.1]] for t in ids],
               "finish_reason": "stop", "model_id": "m", "seed": 0,
               # Parsed already: the vocabulary only spells tokens, it cannot parse them when the session opens.
               "channels": ["content"] * len(ids),
               "message": {"role": "assistant", "content": "".join(WORDS), "finish_reason": "stop"}}

    def open_session(annotator) -> Session:
        n = Item.objects.count()
        Item.objects.create(project=project, external_id=f"item-{n}", source_sha256=f"{n:064d}", prompt_ids=[1],
                            messages=[{"role": "user", "content": "What is the capital of France?"}],
                            rollout=rollout)
        return services.open_session(claim=services.claim_next(project=project, annotator=annotator))

    return open_session


def collect_page_errors(page) -> list[str]:
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def assert_read_only(page, page_errors: list[str]) -> None:
    expect(page.locator("#response .tok")).to_have_text(WORDS)
    for selector in EDITING_CONTROLS:
        expect(page.locator(selector)).to_have_count(0)
    # The keys that edit in a writable workspace do nothing here, and throw nothing.
    for key in ("ArrowRight", "Enter", "Escape", "1", "t", "s", "a", "u", "r", "k"):
        page.keyboard.press(key)
    assert page_errors == [] and page.console_errors == []


def test_an_accepted_session_is_read_only_for_its_annotator(page, live_server, members, open_session_of):
    annotator = members["annotator"]
    session = open_session_of(annotator)
    session = services.finish(session=session, version=session.version, actor=annotator, accept=True)
    page_errors = collect_page_errors(page)
    log_in(page, live_server, "annotator")
    page.goto(live_server.url + reverse("annotate-workspace", args=[session.pk]))

    assert_read_only(page, page_errors)
    assert Session.objects.get(pk=session.pk).status == SessionStatus.ACCEPTED  # "a" did not act on it
    # Its one shortcut works: n asks for the next item (there is none, so the queue says so).
    page.keyboard.press("n")
    expect(page.get_by_text("No items left for you in this project right now.")).to_be_visible()
    assert page_errors == []


def test_a_curator_sees_an_annotators_open_session_read_only(page, live_server, members, open_session_of):
    session = open_session_of(members["annotator"])
    untouched = (SessionStatus.OPEN, session.version, session.current_node_id)
    page_errors = collect_page_errors(page)
    log_in(page, live_server, "curator")
    page.goto(live_server.url + reverse("annotate-workspace", args=[session.pk]))

    assert_read_only(page, page_errors)
    expect(page.get_by_role("button", name="Next item (n)")).to_have_count(0)  # the session is not finished
    session.refresh_from_db()
    assert (session.status, session.version, session.current_node_id) == untouched  # no key acted on it
