"""onpanda.token_supervision: the fork token and the chunks that get loss, per fork pair."""

from types import SimpleNamespace

import pytest

from annotate.exporters.token_supervision import NamedTemplate, chosen_tokens
from annotate.prompts import stored_prompt
from annotate.supervision import token_supervision
from dataplatform.conversations.templates import FAMILIES
from dataplatform.conversations.token_masks import identity_columns, template_identity

from ...doubles import EOS, CharBackend
from .. import agentic
from ..trees import PROMPT
from .rows import tools_of, trained

pytestmark = pytest.mark.django_db


def test_token_supervision_rows(run_export, trees, chars):
    export, rows = run_export("onpanda.token_supervision")
    session = trees["accepted"]
    assert sorted(row["rejected_node_key"] for row in rows) == [1, 2] and export.rows_total == 2
    row = next(row for row in rows if row["rejected_node_key"] == 1)
    assert row["session_id"] == session.pk and row["chosen_node_key"] == 3 and row["annotator"] == "annotator"
    assert trained(row["prompt"]) == PROMPT and row["prompt_token_ids"] == chars.chat_prompt_ids(PROMPT)
    assert row["tools"] is None
    assert row["fork_token_idx"] == 4
    assert row["chosen_token_id"] == ord("d") and row["rejected_token_id"] == ord("c")
    assert not row["chosen_ends_at_fork"] and not row["rejected_ends_at_fork"]
    assert [c["text"] for c in row["chosen_chunks"]] == ["The ", "d", "og sat."]
    assert [c["ignore_loss"] for c in row["chosen_chunks"]] == [True, False, True]
    assert [c["text"] for c in row["rejected_chunks"]] == ["The ", "c", "at sat."]
    assert row["rejected_loss"] is True and row["chosen_text"] == "d" and row["rejected_text"] == "c"
    # The chunks' ids make up the response without the model's stop token.
    chosen_ids = [i for chunk in row["chosen_chunks"] for i in chunk["token_ids"]]
    assert chosen_ids == session.current_node.token_ids[:-1]
    # For TRL's SFT trainer as is: the prompt's ids then the chosen response's, loss on the patch "d" only.
    assert row["input_ids"] == row["prompt_token_ids"] + chosen_ids
    prompt_length = len(row["prompt_token_ids"])
    assert row["completion_mask"] == [0] * (prompt_length + 4) + [1] + [0] * 7
    assert [token for token in row["labels"] if token != -100] == [ord("d")]
    assert trained(row["completion"]) == [{"role": "assistant", "content": "The dog sat."}]


def test_a_chosen_stop_at_the_fork_puts_the_loss_on_the_end_of_turn_token():
    backend = CharBackend()
    supervision = token_supervision(backend.tokenize("Yes, because"), backend.tokenize("Yes"), backend)
    ids, mask = chosen_tokens([60, 62], supervision, backend)
    assert ids == [60, 62, *backend.tokenize("Yes"), EOS] and mask == [0, 0, 0, 0, 0, 1]


def test_an_agentic_prompt_and_its_tools_go_with_each_row(run_export, agentic_session, chars):
    export, rows = run_export("onpanda.token_supervision")
    assert export.manifest["kind_version"] == 5 and len(rows) == 1
    row = rows[0]
    assert trained(row["prompt"]) == agentic.TRAINING_MESSAGES and tools_of(row["tools"]) == agentic.STORED_TOOLS
    # The ids the rollout continued: the model's template applied to the same messages and tools.
    assert row["prompt_token_ids"] == chars.chat_prompt_ids(agentic.TRAINING_MESSAGES, tools=agentic.STORED_TOOLS)
    assert row["fork_token_idx"] == 0 and (row["chosen_text"], row["rejected_text"]) == ("Y", " ")


@pytest.mark.model
def test_a_row_names_the_chat_template_only_when_it_renders_the_rows_prompt_ids(local_backend):
    """The agentic prompt (tools, reasoning, a call, its result) rendered by the embedded model's response template
    is what its chat template renders, so its rows name it; rendered by another family, or another model's, not."""
    identity = template_identity(local_backend)
    conversation = stored_prompt(agentic.STORED_MESSAGES, agentic.STORED_TOOLS)

    def node(pk: int, family: str, model_id: str = local_backend.model_id):
        return SimpleNamespace(pk=pk, model_id=model_id, context=agentic.STORED_MESSAGES, tools=agentic.STORED_TOOLS,
                               prompt_ids=FAMILIES[family].render(conversation, None, backend=local_backend).ids)

    named = NamedTemplate(identity, local_backend)
    assert named.columns(node(1, "chatml-think")) == identity_columns(identity)
    assert named.columns(node(2, "qwen3")) == identity_columns(identity, rendered=False)
    assert named.columns(node(3, "chatml-think", model_id="another-model")) == identity_columns(None)
    assert named.unnamed == 2


@pytest.mark.model
def test_an_export_of_token_ids_loads_the_tokenizer_alone(run_export, trees, local_backend, use_backend):
    from annotate.models import Node
    from dataplatform.inference.local import LocalBackend

    Node.objects.update(model_id=local_backend.model_id)  # the rows' ids are the embedded model's
    fresh = use_backend(LocalBackend(local_backend.data_dir))
    export, rows = run_export("onpanda.token_supervision")
    assert not fresh.model_loaded and len(rows) == 2
    # The rows and the manifest name the tokenizer as the loaded model's backend does.
    identity = template_identity(local_backend)
    assert export.manifest["tokenizer"]["tokenizer_sha256"] == identity["tokenizer_sha256"]
    assert {row["tokenizer_sha256"] for row in rows} == {identity["tokenizer_sha256"]}
    assert {row["template_model"] for row in rows} == {local_backend.model_id}
