"""Hand-made onPanda correction trees, for the tests of what is made of finished sessions (exports,
.panda.json), on the one-token-per-character backend."""

import json

from annotate import corrections, services, streaming
from annotate.importers import import_prompts
from annotate.models import Item

from ..doubles import EOS, RecordingProgress
from . import agentic
from .conftest import fake_rollout

PROMPT = [{"role": "user", "content": "Where did the cat sit?"}]


def make_item(project, backend, text="The cat sat.", number=0):
    """An item whose rollout is `text`, ending with the model's stop token as a real backend's does."""
    return Item.objects.create(project=project, messages=PROMPT, source_sha256=f"{number:064d}",
                               prompt_ids=backend.chat_prompt_ids(PROMPT),
                               rollout=fake_rollout(backend.tokenize(text) + [EOS]))


def build_trees(project, members, backend) -> dict:
    """Item 1 answered by two annotators, plus an open session on item 2 (services must use `backend`).

    annotator (accepted): 1 "The cat sat." (the rollout), 2 candidate at 4 then " sat." (undone),
        3 typed "dog" at 4 then " sat.", accepted: "The dog sat.".
    curator (rejected): 1 the rollout, 2 a forced stop after "The".
    """
    config = services.config_for(project)
    config.overlap = 2
    config.save()
    make_item(project, backend, number=1)
    make_item(project, backend, number=2)
    annotator, curator = members["annotator"], members["curator"]

    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    root = session.current_node
    picked = corrections.correct(session=session, version=0, node_id=root.pk, position=4, token_id=ord("c") + 1000,
                              actor=annotator)
    list(streaming.continue_node(node=picked))
    services.undo(session=session, version=1, actor=annotator)
    typed = corrections.correct(session=session, version=2, node_id=root.pk, position=4, text="dog", actor=annotator)
    list(streaming.continue_node(node=typed))
    accepted = services.finish(session=session, version=3, actor=annotator, accept=True)

    other = services.open_session(claim=services.claim_next(project=project, annotator=curator))
    corrections.correct(session=other, version=0, node_id=other.current_node.pk, position=3, stop=True, actor=curator)
    rejected = services.finish(session=other, version=1, actor=curator, accept=False)

    still_open = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    assert still_open.item_id != accepted.item_id
    return {"accepted": accepted, "rejected": rejected, "open": still_open}


def build_agentic_session(project, members):
    """An accepted session on the agentic prompt (agentic.py), imported and answered as in production
    (services must use the one-token-per-character backend): the rollout is the backend's script, and the
    annotator types "Yes, it rains." over it from the first token, stopping there."""
    import_prompts(project=project, lines=[json.dumps(agentic.record())])
    services.generate_rollouts(project=project, progress=RecordingProgress())
    annotator = members["annotator"]
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=0,
                     text=f"Yes, it rains.{corrections.STOP_MARKER}", actor=annotator)
    return services.finish(session=session, version=1, actor=annotator, accept=True)
