"""onpanda.pairs: fork and outcome pairs of a hand-made tree, and its filters."""

import pytest

from .. import agentic
from ..trees import PROMPT
from .rows import load_shards, tools_of, trained

pytestmark = pytest.mark.django_db


def test_pairs_of_a_hand_made_tree(run_export, trees):
    export, rows = run_export("onpanda.pairs")
    accepted, rejected = trees["accepted"], trees["rejected"]
    by_id = {row["id"]: row for row in rows}
    a, r = accepted.pk, rejected.pk
    assert sorted(by_id) == sorted([f"{a}.1-{a}.3", f"{a}.2-{a}.3", f"{r}.1-{a}.3", f"{r}.2-{a}.3"])
    fork = by_id[f"{a}.1-{a}.3"]
    assert fork["pair_type"] == "fork" and fork["fork_token_idx"] == 4
    assert trained(fork["prompt"]) == PROMPT and fork["tools"] is None
    assert trained(fork["chosen"]) == [{"role": "assistant", "content": "The dog sat."}]
    assert trained(fork["rejected"]) == [{"role": "assistant", "content": "The cat sat."}]
    assert by_id[f"{a}.2-{a}.3"]["rejected"][0]["content"] == f"The {chr(ord('c') + 1000)} sat."  # the candidate
    outcome = by_id[f"{r}.2-{a}.3"]
    assert outcome["pair_type"] == "outcome" and outcome["fork_token_idx"] is None
    assert outcome["rejected"][0]["content"] == "The" and outcome["rejected_annotator"] == "curator"
    assert outcome["chosen_annotator"] == "annotator"


def test_pairs_filters(run_export, trees):
    assert {row["pair_type"] for row in run_export("onpanda.pairs", filters={"pair_type": ["fork"]})[1]} == {"fork"}
    assert len(run_export("onpanda.pairs", filters={"pair_type": ["outcome"]})[1]) == 2
    # Only the annotator's sessions: the rejected session is left out, and its outcome pairs with it.
    assert len(run_export("onpanda.pairs", filters={"annotator": ["annotator"]})[1]) == 2


def test_an_agentic_prompt_and_its_tools_go_with_each_pair(run_export, agentic_session):
    export, rows = run_export("onpanda.pairs")
    assert export.manifest["kind_version"] == 3 and len(rows) == 1
    assert trained(rows[0]["prompt"]) == agentic.TRAINING_MESSAGES and tools_of(rows[0]["tools"]) == agentic.STORED_TOOLS
    assert trained(rows[0]["chosen"]) == [{"role": "assistant", "content": "Yes, it rains."}]
    assert trained(rows[0]["rejected"]) == [{"role": "assistant", "content": " sat."}]


@pytest.mark.model
def test_a_pair_goes_into_the_embedded_tokenizers_chat_template_as_trl_puts_it(run_export, agentic_session,
                                                                               local_backend, export_storage_in_tmp):
    export, _ = run_export("onpanda.pairs")
    row = load_shards(export_storage_in_tmp, export)[0]
    tokenizer = local_backend.tokenizer
    # TRL's preference rows: the prompt (ending with a tool result) gets the generation prompt; prompt + chosen
    # is the whole conversation, which must start with it.
    prompt = tokenizer.apply_chat_template(row["prompt"], tools=row["tools"], add_generation_prompt=True,
                                           tokenize=False)
    whole = tokenizer.apply_chat_template(row["prompt"] + row["chosen"], tools=row["tools"], tokenize=False)
    assert whole.startswith(prompt) and whole[len(prompt):] == "Yes, it rains.<|im_end|>\n"
