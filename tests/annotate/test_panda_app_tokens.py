"""Where onpanda re-tokenizes text and our token ids disagree with its fork index.

A model can emit a non-canonical tokenization: SmolLM2 can write a blank line as one "\n\n" token where
its tokenizer, reading the text, makes two "\n" (its pre-tokenizer splits a run of newlines before a
letter). An annotator who corrects the "B" after that blank line forks at token index 2 of what the
model emitted ("A", "\n\n", "B"). The .panda.json holds text only, so onpanda's PandaTree re-tokenizes
it ("A", "\n", "\n", "B") and its fork index is 3.

Which is right: both, each for its own ids. Ours is the index into the ids the model emitted and the
annotator saw, which is what our token-level export trains on (on-policy: the prefix is the model's own
tokens); PandaTree's is the index into the re-tokenized text, the ids it then trains on. What must agree
is the text at the fork, and it does: the same prefix "A\n\n", "B" rejected and "C" chosen. Importing the
file re-tokenizes too, so a non-canonical tokenization does not survive a .panda.json: the imported fork
is PandaTree's.
"""

import pytest
from onpanda.parser import PandaTree

from annotate import corrections, services
from annotate.models import Item, Session
from annotate.panda_json import import_panda_json, session_to_panda_json

from .conftest import fake_rollout

pytestmark = [pytest.mark.django_db, pytest.mark.model]

PROMPT = [{"role": "user", "content": "Write A, a blank line, then B."}]


def test_a_fork_inside_a_non_canonical_blank_line(project, other_project, members, local_backend, use_backend):
    newline, = local_backend.tokenize("\n")
    blank, = local_backend.tokenize("\n\n")  # a token of its own, which the tokenizer uses only before a space
    assert local_backend.tokenize("A\n\nB") == local_backend.tokenize("A") + [newline, newline] + local_backend.tokenize("B")
    a_ids, b_ids = local_backend.tokenize("A"), local_backend.tokenize("B")
    eos = sorted(local_backend.eos_token_ids)[0]
    emitted = a_ids + [blank] + b_ids + [eos]  # what the model wrote: one "\n\n"
    Item.objects.create(project=project, messages=PROMPT, source_sha256="c" * 64,
                        prompt_ids=local_backend.chat_prompt_ids(PROMPT), rollout=fake_rollout(emitted))
    annotator = members["annotator"]
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    root = session.current_node
    position = len(a_ids) + 1  # the "B" after the blank line
    child = corrections.correct(session=session, version=0, node_id=root.pk, position=position, text="C<|stop|>",
                                actor=annotator)
    session = services.finish(session=session, version=1, actor=annotator, accept=True)
    assert child.fork_index == position == 2

    use_backend(local_backend)
    document = session_to_panda_json(Session.objects.get(pk=session.pk))
    assert [d["messages"][-1]["content"] for d in document["dialogs"].values()] == ["A\n\nB", "A\n\nC"]
    level, = (messages[-1]["token_level"] for messages in
              PandaTree(document).build_token_level_supervision_data_v1(tokenizer=local_backend.tokenizer))
    assert level["fork_token_idx"] == 3  # PandaTree's ids: "A", "\n", "\n", "B" against "A", "\n", "\n", "C"
    assert (level["rejected_token_id"], level["chosen_token_id"]) == (b_ids[0], local_backend.tokenize("C")[0])

    report = import_panda_json(project=other_project, data=document, annotator=annotator)
    assert report.ok, report.as_dict()
    imported = Session.objects.get(pk=report.session_id).nodes.get(key=2)
    assert imported.fork_index == 3  # re-tokenized on import, as PandaTree does
