"""Files shaped as the onPanda app writes them (tests/fixtures/panda_app, one per feature) import whole:
every tree, every operator at its fork, the top-k of a chosen token, deleted dialogs, and all the rest."""

import copy
import json

import pytest

from annotate.models import EventKind, Node, Origin, Session, SessionStatus
from annotate.panda_json import import_panda_json

from .panda_files import NAMES, corpus, imported

pytestmark = pytest.mark.django_db


def nodes_of(session: Session) -> dict[int, Node]:
    return {node.key: node for node in session.nodes.order_by("key")}


@pytest.mark.parametrize("name", NAMES)
def test_every_file_of_the_corpus_imports(project, members, chars, name):
    session = imported(project, members, name)
    document = corpus(name)
    live = {int(key) for key, dialog in document["dialogs"].items() if dialog["messages"][-1]["role"] == "assistant"}
    deleted = {int(key) for key in document.get("deleted_dialogs", {})}
    nodes = nodes_of(session)
    assert set(nodes) == live | deleted  # the file's keys stay the node keys
    assert {key for key, node in nodes.items() if node.deleted} == deleted
    for node in nodes.values():
        assert node.status == "complete" and len(node.origins) == len(node.token_ids) == len(node.channels)
        assert node.prompt_ids and node.context[-1]["role"] in ("user", "tool")


def test_no_version_and_unset_verdicts_make_the_latest_dialog_good(project, members, chars):
    session = imported(project, members, "no_version")
    assert session.status == SessionStatus.ACCEPTED and session.current_node.key == 2
    assert session.events.get(kind=EventKind.ACCEPT).payload["good"] == [2]


def test_several_good_dialogs_are_kept_good(project, members, chars):
    session = imported(project, members, "several_good")
    assert session.status == SessionStatus.ACCEPTED and session.current_node.key == 3  # the last good one
    assert session.events.get(kind=EventKind.ACCEPT).payload["good"] == [2, 3]


def test_several_trees_become_the_sessions_trees(project, members, chars):
    nodes = nodes_of(imported(project, members, "several_trees"))
    # 3 regenerates (a new tree), 4 edits the system prompt (a new tree), 5 is the next round after 2.
    assert {key: (node.operator, node.tree, node.parent.key if node.parent else None, node.fork_index)
            for key, node in nodes.items()} == {
        1: ("generate_new", 1, None, None), 2: ("continue_with_input", 1, 1, 1), 3: ("generate_new", 2, None, None),
        4: ("edit_prompt", 3, None, None), 5: ("start_new_round", 1, 2, None)}
    assert nodes[4].context[0] == {"role": "system", "content": "You are kind."}
    assert nodes[5].round == 2 and nodes[5].context[-2] == {"role": "assistant", "content": "Two."}
    assert nodes[4].prompt_ids != nodes[1].prompt_ids != nodes[5].prompt_ids
    report = import_panda_json(project=project, data=corpus("several_trees"), annotator=members["annotator"],
                               dry_run=True)
    assert report.duplicate  # the dry run of a file imported before says so


def test_the_dry_run_reports_trees_dialogs_and_operators(project, members, chars):
    report = import_panda_json(project=project, data=corpus("several_trees"), annotator=members["annotator"],
                               file="trees.panda.json", dry_run=True)
    assert report.ok and not report.created
    summary = report.as_dict()
    assert (summary["dialogs"], summary["trees"], summary["panda_trees"]) == (5, 3, 4)
    assert summary["operators"] == {"continue_with_input": 1, "edit_prompt": 1, "generate_new": 2,
                                    "start_new_round": 1}
    assert summary["errors"] == [] and summary["deleted_dialogs"] == []


def test_reasoning_tool_calls_and_results_with_corrections_in_arguments_and_reasoning(project, members, chars):
    nodes = nodes_of(imported(project, members, "agentic"))
    document = corpus("agentic")
    tools = document["dialogs"]["1"]["tools"]
    assert all(node.tools == tools for node in nodes.values())
    first = nodes[1].message
    written = document["dialogs"]["1"]["messages"][-1]["tool_calls"]
    # The node holds the conversation model's shape (the file's call id; the app's `index` is kept for export).
    assert first["reasoning"] == "Look it up." and first["tool_calls"] == [
        {key: value for key, value in call.items() if key != "index"} for call in written]
    assert nodes[1].finish_reason == "tool_calls" and "index" in written[0]
    kept = nodes[1].session.meta["panda_json"]["dialogs"]["1"]
    assert kept["messages"][-1]["tool_calls"] == written
    # 2 picks "P" (rank 2 of the rejected token's top-k) inside the call's arguments: Lyon -> Paris.
    arguments = nodes[2]
    assert arguments.operator == "continue_with_chosen" and arguments.channels[arguments.fork_index] == "tool_arguments"
    assert chars.detokenize([arguments.token_ids[arguments.fork_index]]) == "P"
    assert arguments.origins[arguments.fork_index] == Origin.CANDIDATE and arguments.candidate_ranks[
        arguments.fork_index] == 2
    assert arguments.top[arguments.fork_index] == [[ord("L"), -0.5], [ord("P"), -0.9]]
    assert nodes[1].top[arguments.fork_index] == [[ord("L"), -0.5], [ord("P"), -0.9]]  # the parent's too
    # 3 answers the tool's result: the next turn of 2.
    assert nodes[3].operator == "run_tool_calls" and nodes[3].parent == nodes[2] and nodes[3].fork_index is None
    assert nodes[3].context[-1]["role"] == "tool" and nodes[3].tree == 1
    # 4 types ", so advise" inside the reasoning of 3.
    typed = nodes[4]
    assert typed.operator == "continue_with_input" and typed.channels[typed.fork_index] == "reasoning"
    span = slice(typed.fork_index, typed.locked_until)
    assert chars.detokenize(typed.token_ids[span]) == ", so advise" and set(typed.origins[span]) == {Origin.TYPED}
    assert typed.origins[typed.locked_until] == Origin.MODEL


def test_every_in_turn_operator_keeps_its_meaning(project, members, chars):
    session = imported(project, members, "operators")
    nodes = nodes_of(session)
    assert nodes[1].finish_reason == "length"
    assert [event.kind for event in nodes[2].events.order_by("id")] == ["generate_new", "continue_generating"]
    chosen = nodes[3]
    assert (chosen.operator, chosen.fork_index, chosen.candidate_ranks[11], chosen.logprobs[11]) == (
        "continue_with_chosen", 11, 3, -2.0)
    stop = nodes[4]  # the app's "<|stop|>" item: the response ends there
    assert stop.operator == EventKind.FORCE_STOP and stop.fork_index == 7 and stop.finish_reason == "stop"
    assert stop.message["content"] == "The sea"
    selection = nodes[5]
    event = selection.events.get(kind=EventKind.EDIT_SELECTION)
    assert (event.payload["start"], event.payload["end"], event.payload["text"]) == (4, 7, "ocean")
    assert selection.origins[4:9] == [Origin.TYPED] * 5 and selection.origins[9] == Origin.MODEL
    typed = nodes[6]
    assert typed.operator == "continue_with_input" and typed.origins[8:15] == [Origin.TYPED] * 7


def test_a_typed_patch_that_begins_before_the_fork(project, members, chars):
    """The app's "Tw" typed over "Three.": the fork is the first token that differs ("w"), and only what
    differs from the parent is typed."""
    nodes = nodes_of(imported(project, members, "several_good"))
    assert nodes[2].fork_index == 1 and nodes[2].origins[:4] == [Origin.MODEL, Origin.TYPED, Origin.MODEL,
                                                                 Origin.MODEL]
    assert nodes[2].locked_until == 2


def test_hash_map_is_expanded(project, members, chars):
    nodes = nodes_of(imported(project, members, "hash_map"))
    assert nodes[1].context[0]["content"].startswith("Rules: be exact") and len(nodes[1].context[0]["content"]) > 6000


def test_deleted_dialogs_are_deleted_nodes(project, members, chars):
    session = imported(project, members, "deleted")
    nodes = nodes_of(session)
    assert nodes[2].deleted and not nodes[1].deleted and not nodes[3].deleted
    assert nodes[3].parent == nodes[2] and nodes[3].fork_index == 3  # made from the deleted one
    assert session.current_node.key == 3


def test_titles_custom_fields_sado_info_and_unanswered_dialogs_are_kept(project, members, chars):
    session = imported(project, members, "fields")
    kept = session.meta["panda_json"]
    document = corpus("fields")
    assert {key: kept["file"][key] for key in ("title", "description", "comment", "sado_info", "cache_tree")} == {
        key: document[key] for key in ("title", "description", "comment", "sado_info", "cache_tree")}
    assert kept["dialogs"]["2"]["annotate"]["customs"] == document["dialogs"]["2"]["annotate"]["customs"]
    assert kept["dialogs"]["1"]["comment_of_dialog"] == "first try"
    assert kept["pending_dialogs"] == {"dialogs": {"3": document["dialogs"]["3"]}}


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["dialogs"]["2"]["messages"][-1].update(content="<tool_call> by hand"), "dialogs.2.messages[2].content"),
    (lambda d: d["deleted_dialogs"].update({"2": copy.deepcopy(d["dialogs"]["2"])}), "deleted_dialogs.2"),
    (lambda d: d["dialogs"]["2"]["annotate"].update(is_good="yes"), "dialogs.2.annotate.is_good"),
    (lambda d: d["dialogs"]["2"]["messages"][-1].update(role="robot"), "dialogs.2.messages[2].role"),
])
def test_what_cannot_be_stored_is_refused_by_dialog_and_field(project, members, chars, change, field):
    document = corpus("fields")
    change(document)
    report = import_panda_json(project=project, data=document, annotator=members["annotator"], file="f.panda.json")
    assert not report.ok and not report.created and [error.field for error in report.errors] == [field]
    assert not Session.objects.exists()


def test_an_operator_with_no_meaning_here_is_a_typed_rewrite_with_a_warning(project, members, chars):
    document = corpus("operators")
    document["dialogs"]["6"]["operations"][0]["operator"] = "auto"  # the app's flush of a hand edit
    report = import_panda_json(project=project, data=document, annotator=members["annotator"])
    assert report.ok and report.warnings == ["dialog 6: operator 'auto' is imported as a typed rewrite"]
    node = nodes_of(Session.objects.get(pk=report.session_id))[6]
    assert node.operator == "continue_with_input" and set(node.origins[node.fork_index:]) == {Origin.TYPED}


def test_a_prompt_edited_in_place_is_a_tree_of_its_own(project, members, chars):
    """The app flags a dialog whose prompt differs from its parent's `is_prompt_modified`; one edited in place
    without the flag (PandaTree fails on such a file) imports as an edited prompt, said in a warning, and
    goes out flagged, so that PandaTree reads our export."""
    from onpanda.parser import PandaTree

    from annotate.panda_json import session_to_panda_json

    document = corpus("operators")
    document["dialogs"]["4"]["messages"][0]["content"] = "A short line about the river."
    report = import_panda_json(project=project, data=document, annotator=members["annotator"])
    assert report.ok, report.as_dict()
    assert report.warnings == [
        "dialogs.4: its prompt differs from dialog 2's, which it names as its parent, but is_prompt_modified "
        "is not set; imported as an edited prompt (a tree of its own) and exported with is_prompt_modified: true"]
    nodes = nodes_of(Session.objects.get(pk=report.session_id))
    assert nodes[4].parent is None and nodes[4].operator == EventKind.EDIT_PROMPT
    assert nodes[4].tree not in {nodes[key].tree for key in (1, 2, 3, 5, 6)}
    assert nodes[4].context[0]["content"] == "A short line about the river."
    with pytest.raises(AssertionError):
        PandaTree(copy.deepcopy(document)).build_legacy_data_v1()
    exported = session_to_panda_json(Session.objects.get(pk=report.session_id))
    assert exported["dialogs"]["4"]["operations"][0]["is_prompt_modified"] is True
    assert document["dialogs"]["4"]["operations"][0]["is_prompt_modified"] is False  # the input is not changed
    tree = PandaTree(json.loads(json.dumps(exported)))
    tree.build_legacy_data_v1()
    assert all(4 not in pair for pair in tree.fork_pairs)  # another prompt: no fork pair with dialog 2
