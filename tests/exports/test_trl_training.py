"""TRL trains on the exports as a trainer pulls them: each kind is pulled over the API, loaded with `datasets`
and handed to SFTTrainer or DPOTrainer with no conversion code, on the embedded model's converted folder.

Before the 3 steps, one collated batch shows where the loss falls: labels are -100 on every token the kind's
mask leaves out (the prompt, the on-policy context around a patch, the error in context), and a DPO batch's
completion mask covers the answers only. The expectations are derived independently of TRL, from the
tokenizer's own chat template, which is the one the platform prompts the model with: the onPanda kinds' first
rows are agentic (a pair forking inside a tool call's arguments, under a prompt offering the tool; one forking
inside the reasoning), and their calls and reasoning are in the loss, their differing tokens on both sides."""

import hashlib
import json
import math

import pytest
import trl
from datasets import load_dataset

from annotate import corrections, streaming
from annotate import services as annotate_services
from annotate.models import Item
from dataplatform.exports.registry import get_kind
from dataplatform.exports.writers import file_sha256
from dataplatform.inference.checkpoint import converted_dir

from ..annotate.agentic_rollouts import agentic_item
from ..conftest import api_client_for
from ..corpora.aed.export_corpus import corpus  # noqa: F401  (the AED cases fixture)
from ..corpora.atd.prompts import near_ties
from ..doubles import RecordingProgress
from ..exporting import export_rows

pytestmark = [pytest.mark.model, pytest.mark.django_db]


IGNORE = -100
# 3 steps on CPU inside the CI budget: plain SGD (no Adam moments to allocate for 135M weights); what is
# tested is where the loss falls and that the trainers take the rows, not how well they optimise. One row a step,
# in the dataset's order: a step costs its row's tokens, not a long row's padding (an agentic prompt with its tools
# is ~180 tokens, the others ~35), and the rows trained are the first three, which the tests name. In float32, as the
# checkpoint is: TRL's configs default to bf16 autocast, which this CPU runs emulated (the first SFT's 3 steps: 54 s
# in bf16, 10 s in float32).
TRAINING = {"max_steps": 3, "per_device_train_batch_size": 1, "train_sampling_strategy": "sequential",
            "learning_rate": 1e-5, "optim": "sgd", "logging_steps": 1, "save_strategy": "no", "report_to": "none",
            "use_cpu": True, "gradient_checkpointing": False, "max_length": 256, "dataloader_num_workers": 0, "seed": 0,
            "bf16": False}
TRAINED = 3  # rows: max_steps x per_device_train_batch_size


@pytest.fixture
def pull(project, members, export_storage_in_tmp, tmp_path):
    """Export a kind, pull its manifest and shards over the API with a trainer's token (checking each shard's
    sha256 against the manifest) and load the train split with `datasets`."""
    client = api_client_for(members["trainer"], read_only=True)

    def go(kind: str):
        export, _ = export_rows(project, members["curator"], export_storage_in_tmp, kind, validation_ratio=0)
        base = f"/api/v1/projects/{project.slug}/exports/{export.pk}"
        manifest = client.get(f"{base}/manifest").json()
        folder = tmp_path / f"pulled-{export.pk}"
        folder.mkdir()
        for shard in manifest["shards"]:
            response = client.get(f"{base}/shards/{shard['name']}")
            assert response.status_code == 200
            (folder / shard["name"]).write_bytes(b"".join(response.streaming_content))
            assert file_sha256(folder / shard["name"]) == shard["sha256"]
        assert manifest["shards"], f"{kind} exported no rows"
        return load_dataset("parquet", data_files={"train": str(folder / "train-*.parquet")},
                            cache_dir=str(tmp_path / "hf-cache"))["train"]

    return go


@pytest.fixture(scope="session")
def checkpoint(local_backend):
    """The converted folder, loaded as a trainer loads it: the model and its tokenizer from that folder alone.
    Loaded once for the module's five trainers (each trains on from where the last stopped; what is checked
    is where the loss falls, which the weights do not change), the tokenizer a copy of its own, not the
    backend's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = converted_dir(local_backend.data_dir)
    return {"model": AutoModelForCausalLM.from_pretrained(folder),
            "processing_class": AutoTokenizer.from_pretrained(folder)}


# Two prompts answered with a given text (the 135M model rarely calls a tool or reasons on its own; its probabilities
# are not what is tested here, so they are made up: no forward pass), which the annotator corrects inside a channel:
# the call's city inside its arguments, the reasoning inside it.
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
AGENTIC = {  # question: (tools, the response given to the model to write, what the annotator makes of it)
    "Weather in Paris?": (
        [WEATHER], '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
    "Greet Bob.": ([], "<think>\nBob is a friend.\n</think>\n\nHello Bob!",
                   "<think>\nBob is a colleague.\n</think>\n\nHello Bob!"),
}


@pytest.fixture
def corrected_sessions(project, members, local_backend):
    """Two prompts answered by the real model, each corrected at its second token with the model's own
    runner-up, continued and accepted: SFT rows, fork pairs and token-level patches on real token ids. And the
    two AGENTIC prompts, each corrected where the text the annotator types parts from the response: a pair forking
    inside a tool call's arguments (the prompt offers the tool), one forking inside the reasoning."""
    config = annotate_services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 10, 5, 0.0
    config.save()
    # The AGENTIC prompts first: their rows come first in every kind, so the trainers train on them.
    for number, (question, (tools, written, _)) in enumerate(AGENTIC.items()):
        agentic_item(project, local_backend, text=written, messages=[{"role": "user", "content": question}],
                     tools=tools, external_id=f"agentic-{number}", scored=False)
    for number, question in enumerate(["Name two planets.", "Say hello to Ada."]):
        Item.objects.create(project=project, messages=[{"role": "user", "content": question}],
                            source_sha256=f"{number:064d}")
    annotate_services.generate_rollouts(project=project, progress=RecordingProgress())  # the other two
    annotator = members["annotator"]
    for _ in range(4):
        session = annotate_services.open_session(claim=annotate_services.claim_next(project=project,
                                                                                    annotator=annotator))
        root = session.current_node
        question = session.item.messages[0]["content"]
        if question in AGENTIC:
            typed = AGENTIC[question][2]
            fork = max(cut for cut in range(len(root.token_ids))
                       if typed.startswith(local_backend.detokenize(root.token_ids[:cut])))
            kept = local_backend.detokenize(root.token_ids[:fork])
            corrections.correct(session=session, version=0, node_id=root.pk, position=fork,
                                text=typed[len(kept):] + corrections.STOP_MARKER, actor=annotator)
        else:
            runner_up = next(token for token, _ in root.top[1] if token != root.token_ids[1])
            child = corrections.correct(session=session, version=0, node_id=root.pk, position=1,
                                        token_id=runner_up, actor=annotator)
            list(streaming.continue_node(node=child))
        annotate_services.finish(session=session, version=1, actor=annotator, accept=True)


def trained_three_steps(trainer) -> None:
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert trainer.state.global_step == 3 and len(losses) == 3 and all(math.isfinite(loss) for loss in losses)


def prompt_length(tokenizer, row: dict) -> int:
    return len(tokenizer.apply_chat_template(clean(row["prompt"]), tools=row.get("tools"), add_generation_prompt=True,
                                             tokenize=True, return_dict=False))


def completion_text(tokenizer, row: dict, completion: list[dict]) -> str:
    """The completion as the tokenizer's own chat template writes it after the row's prompt."""
    before = tokenizer.apply_chat_template(clean(row["prompt"]), tools=row.get("tools"), add_generation_prompt=True,
                                           tokenize=False)
    whole = tokenizer.apply_chat_template(clean(row["prompt"] + completion), tools=row.get("tools"), tokenize=False)
    assert whole.startswith(before)
    return whole[len(before):]


def clean(messages: list[dict]) -> list[dict]:
    return [{key: value for key, value in message.items() if value is not None} for message in messages]


def agentic_parts(messages: list[dict]) -> list[str]:
    """The reasoning and the tool calls (name, arguments as the template writes them) of the messages."""
    return [part for message in messages for part in (
        [message["reasoning_content"]] if message.get("reasoning_content") else []) + [
        text for call in message.get("tool_calls") or [] for text in (
            call["function"]["name"], json.dumps(call["function"]["arguments"], ensure_ascii=False))]]


def loss_tokens(batch, row: int) -> list[int]:
    return [int(token) for token, label in zip(batch["input_ids"][row], batch["labels"][row], strict=True)
            if label != IGNORE]


def test_sft_on_onpanda_sft_puts_the_loss_on_the_completion_only(pull, checkpoint, corrected_sessions, tmp_path,
                                                                  local_backend):
    dataset = pull("onpanda.sft")
    trainer = trl.SFTTrainer(**checkpoint, train_dataset=dataset,
                             args=trl.SFTConfig(output_dir=str(tmp_path / "sft"), **TRAINING))
    tokenizer = local_backend.tokenizer
    batch = trainer.data_collator([trainer.train_dataset[index] for index in range(len(dataset))])
    for index, row in enumerate(dataset):
        start = prompt_length(tokenizer, row)
        assert all(label == IGNORE for label in batch["labels"][index][:start].tolist())  # the prompt, system too
        trained = tokenizer.decode(loss_tokens(batch, index))
        assert trained == completion_text(tokenizer, row, row["completion"])
        # The completion's reasoning and tool calls get the loss; the prompt's are in its text.
        parts = agentic_parts(row["completion"])
        assert all(part in trained for part in parts)
        assert all(part in tokenizer.decode(batch["input_ids"][index][:start]) for part in agentic_parts(row["prompt"]))
    # The Paris call and Bob's reasoning come first, so they are among the rows trained.
    assert [index for index, row in enumerate(dataset) if agentic_parts(row["completion"])] == [0, 1]
    assert TRAINED > 1
    trained_three_steps(trainer)


def test_sft_on_token_supervision_trains_the_patch_only(pull, checkpoint, corrected_sessions, tmp_path,
                                                        local_backend):
    dataset = pull("onpanda.token_supervision")
    assert len(dataset) == 4 and {row["template_model"] for row in dataset} == {local_backend.model_id}
    assert [row["fork_channel"] for row in dataset][:2] == ["tool_arguments", "reasoning"]  # trained first
    tokenizer = local_backend.tokenizer
    # Every row names the template that rendered its prompt ids: the embedded model's own, tools included.
    template_sha256 = hashlib.sha256(tokenizer.chat_template.encode()).hexdigest()
    for row in dataset:
        assert row["template_sha256"] == template_sha256
        assert row["prompt_token_ids"] == tokenizer.apply_chat_template(
            clean(row["prompt"]), tools=row.get("tools"), add_generation_prompt=True, tokenize=True, return_dict=False)
    trainer = trl.SFTTrainer(**checkpoint, train_dataset=dataset,
                             args=trl.SFTConfig(output_dir=str(tmp_path / "sft"), **TRAINING))
    batch = trainer.data_collator([trainer.train_dataset[index] for index in range(len(dataset))])
    for index, row in enumerate(dataset):
        patch = [token for chunk in row["chosen_chunks"] if not chunk["ignore_loss"] for token in chunk["token_ids"]]
        assert loss_tokens(batch, index) == patch  # nothing of the prompt or of the model's own tokens around it
        assert batch["input_ids"][index][:len(row["input_ids"])].tolist() == row["input_ids"]
    trained_three_steps(trainer)


# The stored AED kinds are read on the Arrow path on PostgreSQL, a connection of its own: committed rows only.
@pytest.mark.django_db(transaction=True)
def test_sft_on_aed_recovery_never_trains_the_error(pull, checkpoint, corpus, tmp_path, local_backend):  # noqa: F811
    dataset = pull("aed.recovery")
    trainer = trl.SFTTrainer(**checkpoint, train_dataset=dataset,
                             args=trl.SFTConfig(output_dir=str(tmp_path / "sft"), **TRAINING))
    batch = trainer.data_collator([trainer.train_dataset[0]])
    row = dataset[0]
    assert loss_tokens(batch, 0) == [token for token, bit in zip(row["input_ids"], row["completion_mask"],
                                                                 strict=True) if bit]
    trained = local_backend.tokenizer.decode(loss_tokens(batch, 0))
    assert trained.startswith("answer 346") and "391 + 45" not in trained  # the error step is context only
    trained_three_steps(trainer)


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
@pytest.mark.parametrize("kind", ["onpanda.pairs", "atd.dpo"])
def test_dpo_masks_the_prompt_and_trains(kind, pull, checkpoint, project, members, tmp_path, local_backend,
                                         request):
    if kind == "onpanda.pairs":
        request.getfixturevalue("corrected_sessions")
    else:
        near_ties(project, members)
    dataset = pull(kind)
    assert get_kind(kind).trl_format == "preference"
    trainer = trl.DPOTrainer(**checkpoint, train_dataset=dataset,
                             args=trl.DPOConfig(output_dir=str(tmp_path / "dpo"), beta=0.1, **TRAINING))
    assert len(trainer.train_dataset) == len(dataset)  # no row dropped for length
    tokenizer = local_backend.tokenizer
    forks = []
    for index, row in enumerate(dataset):
        batch = trainer.data_collator([trainer.train_dataset[index]])  # rows: the chosen, then the rejected
        start = prompt_length(tokenizer, row)
        scored = []
        for side, answer in enumerate((row["chosen"], row["rejected"])):
            mask = batch["completion_mask"][side].tolist()
            assert not any(mask[:start])
            scored.append([int(token) for token, bit in zip(batch["input_ids"][side], mask, strict=True) if bit])
            assert tokenizer.decode(scored[-1]) == completion_text(tokenizer, row, answer)
        # The two answers' scored tokens differ: the pair has something to prefer.
        assert scored[0] != scored[1]
        fork = next(at for at, (chosen, rejected) in enumerate(zip(*scored, strict=False)) if chosen != rejected)
        forks.append((agentic_parts(row["chosen"]), agentic_parts(row["rejected"]),
                      tokenizer.decode(scored[0][fork:]), tokenizer.decode(scored[1][fork:])))
    if kind == "onpanda.pairs":  # first (so trained): a pair forking inside a call's arguments, one inside reasoning
        assert forks[:2] == [
            (["get_weather", '{"city": "Paris"}'], ["get_weather", '{"city": "Lyon"}'],
             'Paris"}}\n</tool_call><|im_end|>\n', 'Lyon"}}\n</tool_call><|im_end|>\n'),
            (["Bob is a colleague."], ["Bob is a friend."],
             " colleague.\n</think>\n\nHello Bob!<|im_end|>\n", " friend.\n</think>\n\nHello Bob!<|im_end|>\n")]
    trained_three_steps(trainer)
