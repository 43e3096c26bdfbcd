"""Every conversational export kind (a kind with a chat column), its rows rendered as a trainer renders them with the
embedded model's chat template, the one the platform prompts it with (tests/conversations/
test_templates_chat_template.py): the reasoning and the tool calls of every row are in its text, and the two sides of
a pair that differ in the data (content, reasoning or a tool call) differ in their texts.

The rows are each app's own, agentic wherever its data can be: onPanda answers corrected inside a call's arguments
and inside the reasoning, under a prompt with tools, reasoning, a call and its result; an OpenHands trajectory and
an OpenAI tool-calling chat (SWE); the OpenHands run curated as an AED case; ATD near ties (text only). No model:
the onPanda answers are the one-token-per-character backend's, and the template is rendered with transformers' own
Jinja rendering, as `apply_chat_template` renders it."""

import json

import pyarrow as pa
import pytest

from annotate import corrections
from annotate import services as onpanda
from annotate.models import Item
from dataplatform.conversations.templates.chat_template import chat_template
from dataplatform.exports.registry import all_kinds
from labeler.importers import import_trajectories

from .. import trace_fixtures
from ..annotate import agentic
from ..corpora.aed.export_corpus import openhands_tool_case
from ..corpora.atd.prompts import near_ties
from ..doubles import CharBackend, RecordingProgress
from ..exporting import chat_cell, export_rows
from ..lazy_module import LazyModule

pytestmark = pytest.mark.django_db

TEMPLATE = chat_template()
chat_template_utils = LazyModule("transformers.utils.chat_template_utils")  # the Jinja rendering TRL calls
CHAT_COLUMNS = ("messages", "prompt", "completion", "chosen", "rejected")
KINDS = {
    "onpanda": ["onpanda.sft", "onpanda.pairs", "onpanda.token_supervision"],
    "swe": ["swe.trajectories"],
    "aed": ["aed.diagnosis_sft", "aed.preference", "aed.recovery", "aed.repair"],
    "atd": ["atd.dpo", "atd.scored"],
}


def is_chat(type_: pa.DataType) -> bool:
    return (pa.types.is_list(type_) and pa.types.is_struct(type_.value_type)
            and {"role", "content"} <= {field.name for field in type_.value_type})


def test_every_conversational_kind_is_rendered_here():
    chats = {kind.name: [field.name for field in kind.schema if is_chat(field.type)] for kind in all_kinds()}
    conversational = {name for name, columns in chats.items() if columns and not name.startswith("test.")}
    assert conversational == {name for names in KINDS.values() for name in names}
    assert all(set(columns) <= set(CHAT_COLUMNS) for columns in chats.values())  # conversations() reads them all


# --- what the rows render to -----------------------------------------------------------------------------------

def conversations(row: dict) -> dict[str, list[dict]]:
    """The conversations a trainer renders of a row: its messages, and the prompt followed by each answer."""
    chats = {column: chat_cell(row[column]) for column in CHAT_COLUMNS if row.get(column) is not None}
    rendered = {"messages": chats["messages"]} if "messages" in chats else {}
    return rendered | {side: chats.get("prompt", []) + chats[side] for side in ("completion", "chosen", "rejected")
                       if side in chats}


def agentic_parts(messages: list[dict]) -> list[str]:
    """Each reasoning, and each call's name and arguments (as a template writes an object: `tojson`)."""
    parts = [message["reasoning_content"] for message in messages if message.get("reasoning_content")]
    for call in (call["function"] for message in messages for call in message.get("tool_calls") or []):
        arguments = call["arguments"]
        parts += [call["name"], arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)]
    return parts


def differences(chosen: list[dict], rejected: list[dict]) -> set[str]:
    """What differs between two answers: content, reasoning, tool_calls (or the number of messages)."""
    if len(chosen) != len(rejected):
        return {"messages"}
    return {field for a, b in zip(chosen, rejected, strict=True) for field in ("content", "reasoning_content",
                                                                               "tool_calls") if a.get(field) != b.get(field)}


def check(rows: list[dict]) -> dict[str, int]:
    """Check every row; count the rows with reasoning, with tool calls, and the pairs by what their sides differ in."""
    assert rows
    seen = {"reasoning": 0, "tool_calls": 0}
    for row in rows:
        tools = [json.loads(tool) for tool in row["tools"]] if row.get("tools") else None
        texts, chats = {}, conversations(row)
        for name, messages in chats.items():
            text = chat_template_utils.render_jinja_template([messages], tools=tools, chat_template=TEMPLATE)[0][0]
            for part in agentic_parts(messages):
                assert part in text, (name, part, text)
            texts[name] = text
        every = [message for messages in chats.values() for message in messages]
        seen["reasoning"] += any(message.get("reasoning_content") for message in every)
        seen["tool_calls"] += any(message.get("tool_calls") for message in every)
        if "chosen" in texts:
            differ = differences(chat_cell(row["chosen"]), chat_cell(row["rejected"]))
            assert differ and texts["chosen"] != texts["rejected"], row
            for field in differ:
                seen[f"pairs differing in {field}"] = seen.get(f"pairs differing in {field}", 0) + 1
    return seen


@pytest.fixture
def rows_of(project, members, export_storage_in_tmp):
    def go(kind: str) -> list[dict]:
        return export_rows(project, members["curator"], export_storage_in_tmp, kind)[1]
    return go


# --- each app's rows -------------------------------------------------------------------------------------------

LYON = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n</tool_call>'


def answered(project, annotator, backend, *, messages, tools, script: str, at: str, typed: str) -> None:
    """An item answered with `script`, the annotator typing `typed` from where `at` starts; accepted."""
    backend.script = script
    Item.objects.create(project=project, messages=messages, tools=tools, source_sha256=f"{Item.objects.count():064d}")
    onpanda.generate_rollouts(project=project, progress=RecordingProgress())
    session = onpanda.open_session(claim=onpanda.claim_next(project=project, annotator=annotator))
    corrections.correct(session=session, version=0, node_id=session.current_node.pk, position=script.index(at),
                        text=typed + corrections.STOP_MARKER, actor=annotator)
    onpanda.finish(session=session, version=1, actor=annotator, accept=True)


def test_onpanda_kinds(project, members, use_backend, rows_of):
    backend = use_backend(CharBackend())
    answered(project, members["annotator"], backend, messages=agentic.STORED_MESSAGES, tools=agentic.STORED_TOOLS,
             script=LYON, at="Lyon", typed='Paris"}}\n</tool_call>')
    answered(project, members["annotator"], backend, messages=[{"role": "user", "content": "Greet Bob."}], tools=[],
             script="<think>\nBob is a friend.\n</think>\n\nHi Bob.", at="friend",
             typed="a colleague.\n</think>\n\nHi Bob.")
    sft, pairs, supervision = (check(rows_of(kind)) for kind in KINDS["onpanda"])
    # Calls: the weather row (its prompt's and its answer's); reasoning: that row's prompt, and Bob's answer.
    for rows in (sft, pairs, supervision):
        assert (rows["tool_calls"], rows["reasoning"]) == (1, 2)
    assert pairs["pairs differing in tool_calls"] == pairs["pairs differing in reasoning_content"] == 1


def test_swe_kinds(project, rows_of):
    lines = [json.dumps(trace_fixtures.records(name)[0]) for name in (trace_fixtures.OPENHANDS, trace_fixtures.OPENAI)]
    assert import_trajectories(project=project, file="runs.jsonl", lines=lines).ok
    [trajectories] = (check(rows_of(kind)) for kind in KINDS["swe"])
    assert trajectories["tool_calls"] == trajectories["reasoning"] == 2


# The stored AED kinds are read on the Arrow path on PostgreSQL, a connection of its own: committed rows only.
@pytest.mark.django_db(transaction=True)
def test_aed_kinds(project, members, use_backend, rows_of):
    """An OpenHands run whose error step is its edit call, fixed by running the tests first: the recovery run makes
    that call; the preference pair sets the fix against the edit call. (No tokenizer: the token columns are null.)"""
    use_backend(CharBackend())
    curator = members["curator"]
    openhands_tool_case(project, curator, accept_fix=True)
    diagnosis, preference, recovered, repair = (check(rows_of(kind)) for kind in KINDS["aed"])
    assert preference["tool_calls"] and preference["reasoning"] and preference["pairs differing in tool_calls"]
    assert recovered["tool_calls"] and recovered["reasoning"] and repair


@pytest.mark.django_db(transaction=True)  # exported through ADBC, a connection of its own: committed rows only
def test_atd_kinds(project, members, rows_of):
    near_ties(project, members)
    dpo, scored = (check(rows_of(kind)) for kind in KINDS["atd"])
    assert dpo["pairs differing in content"] == 3 and scored
