"""An agentic session end to end through the exports: a correction inside the reasoning, a tool call run on
the registry's time server, the next turn, accepted. onpanda.sft carries the whole trajectory, onpanda.pairs
pairs only answers to the same conversation, onpanda.token_supervision names the fork's channel, the
metrics count the correction by channel and round, and TRL's own chat-template step takes the rows."""

import json

import pytest
from onpanda.parser import PandaTree

from annotate import corrections, services, streaming, turns
from annotate.metrics import project_metrics
from annotate.models import Item
from annotate.panda_json import session_to_panda_json

from ...doubles import EOS, CharBackend
from ...lazy_module import LazyModule
from .. import agentic
from ..conftest import fake_rollout
from ..panda_files import as_file
from .rows import TOOL_TEMPLATE, load_shards, trained

trl_data_utils = LazyModule("trl.data_utils")  # TRL's own chat-template step

REASONING = "Tokyo is far.\n"
ROOT = f"<think>\n{REASONING}</think>\n\n" + agentic.call_text({"timezone": "Europe/Tokyo"})
FIXED = agentic.call_text({"timezone": "Asia/Tokyo"})
TOOLS = [{"type": "function", "function": {
    "name": "get_current_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}]


@pytest.fixture
def trajectory(project, members, time_server, use_backend):
    """The annotator rewrites the reasoning from "far" on; the model closes it and calls the tool with the
    right zone; the call runs; the model answers the result; accepted."""
    backend = CharBackend(script=" nine hours ahead.\n</think>\n\n" + FIXED)
    use_backend(backend)
    config = services.config_for(project)
    config.tool_servers = ["time"]
    config.save()
    Item.objects.create(project=project, messages=agentic.TIME_PROMPT, tools=TOOLS, source_sha256="c" * 64,
                        prompt_ids=backend.chat_prompt_ids(agentic.TIME_PROMPT, tools=TOOLS),
                        rollout=fake_rollout(backend.tokenize(ROOT) + [EOS]) | {"channels": []})
    annotator = members["annotator"]
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))
    root = session.current_node
    position = ROOT.index("far")
    fixed = corrections.correct(session=session, version=0, node_id=root.pk, position=position, text="UTC+9,",
                                actor=annotator)
    list(streaming.continue_node(node=fixed))
    backend.script = "It is evening in Tokyo."
    nxt = turns.run_tool_calls(session=session, version=1, node_id=fixed.pk, actor=annotator).node
    list(streaming.continue_node(node=nxt))
    return services.finish(session=session, version=2, actor=annotator, accept=True)


def test_sft_carries_the_whole_trajectory(run_export, trajectory, export_storage_in_tmp, local_backend):
    export, rows = run_export("onpanda.sft")
    (row,) = rows
    user, call, result, answer = trained(row["messages"])
    assert user == agentic.TIME_PROMPT[0]
    assert call["reasoning_content"] == "Tokyo is UTC+9, nine hours ahead."
    assert call["tool_calls"][0]["function"] == {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
    assert result["role"] == "tool" and json.loads(result["content"])["timezone"] == "Asia/Tokyo"
    assert answer == {"role": "assistant", "content": "It is evening in Tokyo."}
    # TRL's language-modeling step renders the row as it is: no conversion code.
    shard = load_shards(export_storage_in_tmp, export)[0]
    text = trl_data_utils.apply_chat_template({"messages": shard["messages"]}, local_backend.tokenizer,
                                              tools=shard["tools"], chat_template=TOOL_TEMPLATE)["text"]
    assert '[think]Tokyo is UTC+9, nine hours ahead.[/think][call get_current_time {"timezone": "Asia/Tokyo"}]' in text
    assert text.endswith("[assistant]It is evening in Tokyo.")


def test_pairs_and_token_supervision_stay_within_a_turn(run_export, trajectory, export_storage_in_tmp,
                                                        local_backend):
    export, rows = run_export("onpanda.pairs")
    (pair,) = rows  # the first turn's fork; the second turn has one response and nothing to pair
    assert pair["pair_type"] == "fork" and trained(pair["prompt"]) == agentic.TIME_PROMPT
    chosen, rejected = trained(pair["chosen"])[0], trained(pair["rejected"])[0]
    assert chosen["reasoning_content"].startswith("Tokyo is UTC+9") and rejected["reasoning_content"] == "Tokyo is far."
    assert rejected["tool_calls"][0]["function"]["arguments"] == {"timezone": "Europe/Tokyo"}
    shard = load_shards(export_storage_in_tmp, export)[0]
    example = {key: shard[key] for key in ("prompt", "chosen", "rejected")}
    rendered = trl_data_utils.apply_chat_template(example, local_backend.tokenizer, tools=shard["tools"],
                                                  chat_template=TOOL_TEMPLATE)
    assert "Asia/Tokyo" in rendered["chosen"] and "Europe/Tokyo" in rendered["rejected"]

    _, (supervision,) = run_export("onpanda.token_supervision")
    assert supervision["fork_channel"] == "reasoning"
    assert supervision["fork_token_idx"] == ROOT.index("far")


def test_metrics_count_the_correction_by_channel_and_round(project, trajectory):
    metrics = project_metrics(project)
    assert metrics["corrections_by_channel"] == {"reasoning": 1}
    assert metrics["corrections_by_round"] == {"1": 1}
    assert metrics["fork_positions"]["corrections"] == 0  # the accepted answer's own turn was not corrected


def test_the_trajectory_as_panda_json_keeps_every_turn_and_parses_with_panda_tree(trajectory):
    document = as_file(session_to_panda_json(trajectory))
    corrected, after_tool = document["dialogs"]["2"], document["dialogs"]["3"]
    assert corrected["messages"][-1]["reasoning"] == "Tokyo is UTC+9, nine hours ahead."
    assert corrected["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_current_time"
    assert after_tool["messages"][-2]["role"] == "tool" and after_tool["operations"][0]["operator"] == "run_tool_calls"
    # onPanda keeps one prompt per tree: the next turn roots a tree of its own (is_prompt_modified, as the app
    # writes it) and names the dialog it follows.
    operation = after_tool["operations"][0]
    assert operation["parent"] == operation["previous_dialog"] == "2" and operation["is_prompt_modified"]
    assert after_tool["annotate"]["is_good"]
    tree = PandaTree(document)
    assert 3 in tree.dense_keys
