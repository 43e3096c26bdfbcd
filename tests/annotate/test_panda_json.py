""".panda.json v2: what we export is what onPanda's parser reads, and what we import round-trips."""

import copy
import json

import pytest
from onpanda.parser import PandaTree

from annotate import corrections, services, streaming
from annotate.models import Claim, ClaimState, EventKind, Item, Node, Session, SessionStatus
from annotate.panda_json import import_panda_json, panda_sha256, session_to_panda_json
from annotate.supervision import response_ids

from ..doubles import EOS, RecordingProgress
from ..exporting import export_rows
from . import agentic
from .exporters.rows import trained
from .panda_files import as_file, minimal_file
from .trees import build_agentic_session, build_trees

pytestmark = pytest.mark.django_db


@pytest.fixture
def chars(chars):
    chars.script = " sat."  # the trees' continuations
    return chars


def structure(document: dict) -> dict:
    """A document's tree, texts and verdicts: what must survive export -> import -> export."""
    return {key: {"messages": dialog["messages"], "is_good": dialog["annotate"]["is_good"],
                  "parent": dialog["operations"][0]["parent"],
                  "operators": [op["operator"] for op in dialog["operations"]]}
            for key, dialog in document["dialogs"].items()}


# --- export, on a hand-made tree ---------------------------------------------------------------------------

def test_export_writes_the_tree_as_onpanda_does(project, members, chars):
    trees = build_trees(project, members, chars)
    document = as_file(session_to_panda_json(trees["accepted"]))
    assert document["version"] == "2.0" and isinstance(document["update_time"], int)
    assert document["uuid"] == session_to_panda_json(trees["accepted"])["uuid"]  # stable per session
    assert document["deleted_dialogs"] == {} and document["hash_map"] == {}
    dialogs = document["dialogs"]
    assert sorted(dialogs) == ["1", "2", "3"]
    assert [dialogs[k]["messages"][-1]["content"] for k in "123"] == [
        "The cat sat.", f"The {chr(ord('c') + 1000)} sat.", "The dog sat."]
    assert all(dialogs[k]["messages"][:-1] == [{"role": "user", "content": "Where did the cat sit?"}] for k in "123")
    assert [dialogs[k]["annotate"]["is_good"] for k in "123"] == [False, False, True]

    root_op = dialogs["1"]["operations"][0]
    assert root_op["operator"] == "generate_new" and root_op["is_new_generated"] and root_op["parent"] == "1"
    chosen = dialogs["2"]["operations"][0]
    assert chosen["operator"] == "continue_with_chosen" and chosen["parent"] == "1"
    picked = ord("c") + 1000
    assert chosen["continue_with_chosen"] == {"token": chr(picked), "token_id": picked,
                                              "bytes": list(chr(picked).encode()), "logprob": -1.0, "rank": 2}
    rejected = chosen["rejected_token"]
    assert rejected["token"] == "c" and rejected["token_id"] == ord("c") and rejected["token_index"] == 4
    assert rejected["unicode_start_index"] == 4
    assert [t["token_id"] for t in rejected["top_logprobs"]] == [ord("c"), picked, picked + 1]
    typed = dialogs["3"]["operations"][0]
    assert typed["operator"] == "continue_with_input" and typed["parent"] == "1"
    assert typed["continue_with_input"] == {"input_patch": "dog", "token_ids": [ord(c) for c in "dog"]}
    assert all(op["time"] > 0 for d in dialogs.values() for op in d["operations"])

    tree = PandaTree(document)
    assert tree.dense_keys == [3] and tree.fork_pairs == [(1, 3), (2, 3)] and tree.outcome_pairs == []
    assert tree.build_legacy_data_v1()["sfts"][0][-1]["content"] == "The dog sat."


def test_a_forced_stop_is_written_as_the_apps_chosen_stop(project, members, chars):
    document = as_file(session_to_panda_json(build_trees(project, members, chars)["rejected"]))
    stop = document["dialogs"]["2"]["operations"][0]
    # The app offers "<|stop|>" after the candidates: a chosen item with a finish_reason and no token.
    assert stop["operator"] == "continue_with_chosen" and stop["continue_with_chosen"] == {"finish_reason": "stop"}
    assert (stop["is_prompt_modified"], stop["response_modified_type"], stop["common_prefix_length"]) == (
        False, "truncated", 3)
    assert document["dialogs"]["2"]["messages"][-1] == {"role": "assistant", "content": "The", "finish_reason": "stop"}
    # A rejected session has no good dialog: the onPanda tool opens it, PandaTree refuses it as training data.
    assert not any(d["annotate"]["is_good"] for d in document["dialogs"].values())
    with pytest.raises(AssertionError, match="no dialog with annotate.is_good=True"):
        PandaTree(document)


# --- import ---------------------------------------------------------------------------------------------

def test_round_trip_into_another_project(project, other_project, members, chars):
    trees = build_trees(project, members, chars)
    for name in ("accepted", "rejected"):
        original = trees[name]
        document = as_file(session_to_panda_json(original))
        report = import_panda_json(project=other_project, data=document, annotator=members["annotator"],
                                   file=f"{name}.panda.json")
        assert report.ok and report.created and not report.warnings, report.as_dict()
        copy_ = Session.objects.get(pk=report.session_id)
        assert copy_.item.project == other_project and copy_.status == original.status
        assert copy_.claim.state == ClaimState.DONE and copy_.annotator == members["annotator"]
        assert copy_.item.external_id == original.item.external_id
        again = as_file(session_to_panda_json(copy_))
        assert structure(again) == structure(document)
        for ours, theirs in zip(original.nodes.order_by("key"), copy_.nodes.order_by("key"), strict=True):
            # The text was re-tokenized (one token per character here: the same ids), with the end-of-turn
            # token of a finished answer (a forced stop made here has none: the response is cut before a token).
            assert response_ids(ours) == response_ids(theirs) and theirs.token_ids[-1] == EOS
            spelled = len(response_ids(theirs))
            assert ours.fork_index == theirs.fork_index and ours.origins[:spelled] == theirs.origins[:spelled]
            assert ours.candidate_ranks[:spelled] == theirs.candidate_ranks[:spelled]
        kinds = list(copy_.events.values_list("kind", flat=True))
        verdict = EventKind.ACCEPT if name == "accepted" else EventKind.REJECT
        assert kinds[0] == EventKind.GENERATE_NEW and kinds[-1] == verdict


def test_reimporting_the_same_file_adds_nothing(project, members, chars):
    document = as_file(session_to_panda_json(build_trees(project, members, chars)["accepted"]))
    first = import_panda_json(project=project, data=document, annotator=members["trainer"], file="a.panda.json")
    assert first.created and Item.objects.get(pk=first.item_id).meta["panda_sha256"] == first.sha256
    items = Item.objects.count()
    # Formatting and key order do not matter: the hash is of the canonical JSON.
    reordered = json.loads(json.dumps(document, indent=2, sort_keys=True))
    second = import_panda_json(project=project, data=reordered, annotator=members["trainer"], file="b.panda.json")
    assert second.duplicate and not second.created and second.sha256 == first.sha256
    assert Item.objects.count() == items


def test_import_a_file_written_by_onpanda(project, members, chars):
    report = import_panda_json(project=project, data=minimal_file(), annotator=members["annotator"],
                               file="onpanda.panda.json")
    assert report.ok and report.created, report.as_dict()
    assert report.skipped_dialogs == ["3"] and report.key_map == {"1": 1, "2": 2} and report.dialogs == 2
    session = Session.objects.get(pk=report.session_id)
    item = session.item
    assert item.messages == minimal_file()["dialogs"]["1"]["messages"][:-1]
    assert item.prompt_ids == chars.chat_prompt_ids(item.messages) and item.external_id == "2025-08-19_12-00-00.000"
    assert item.rollout["token_ids"] == chars.tokenize("Answer is three.") + [EOS]
    assert item.rollout["model_id"] == "vllm-model"
    assert session.status == SessionStatus.ACCEPTED and session.current_node.key == 2
    assert session.project_id == item.project_id == project.pk  # the review page finds it by its project
    assert Claim.objects.get(pk=session.claim_id).state == ClaimState.DONE
    child = session.current_node
    # Re-tokenized (here one token per character), the fork falls where the texts differ: "Answer is t|w".
    assert child.fork_index == 11 and child.token_ids == chars.tokenize("Answer is two.") + [EOS]
    assert child.origins[:11] == ["model"] * 11 and child.origins[11] == "candidate"
    assert child.logprobs[11] == -1.5 and child.model_id == "vllm-model" and child.finish_reason == "stop"
    assert child.locked_until == 12  # as after a pick made here: the tokens up to the chosen one are fixed
    events = list(session.events.order_by("id"))
    assert [e.kind for e in events] == [EventKind.GENERATE_NEW, EventKind.CONTINUE_WITH_CHOSEN, EventKind.ACCEPT]
    assert events[1].payload["rejected_token_id"] == ord("h") and events[1].payload["token_id"] == ord("w")
    assert [int(e.created_at.timestamp() * 1000) for e in events] == [1755599990000, 1755599995000, 1755600000000]
    assert PandaTree(as_file(session_to_panda_json(session))).fork_pairs == [(1, 2)]


def test_hash_map_contents_and_the_default_good_dialog(project, members, chars):
    document = minimal_file()
    long_answer = "Answer is two. " * 2000
    document["hash_map"] = {"aGFzaA==": long_answer}
    document["dialogs"]["2"]["messages"][-1]["content"] = "<|hash|>aGFzaA=="
    del document["dialogs"]["3"]
    for dialog in document["dialogs"].values():
        dialog["annotate"]["is_good"] = None  # onPanda's default: the last dialog is the good one
    report = import_panda_json(project=project, data=document, annotator=members["annotator"])
    assert report.ok, report.as_dict()
    session = Session.objects.get(pk=report.session_id)
    assert session.status == SessionStatus.ACCEPTED and session.current_node.key == 2
    assert chars.detokenize(response_ids(session.current_node)) == long_answer


def _break(path: str, value):
    def apply(document: dict) -> dict:
        *parents, last = path.split("/")
        target = document
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if value is KeyError:
            del target[last]
        else:
            target[int(last) if isinstance(target, list) else last] = value
        return document

    return apply


@pytest.mark.parametrize(("breakage", "field"), [
    (_break("version", "3.0"), "version"),
    (_break("update_time", KeyError), "update_time"),
    (_break("dialogs", {}), "dialogs"),
    (_break("dialogs/2/messages/1/role", "robot"), "dialogs.2.messages[1].role"),
    (_break("dialogs/2/messages/2/content", [{"type": "image_url", "image_url": {"url": "x"}}]),
     "dialogs.2.messages[2].content[0]"),
    (_break("dialogs/2/operations/0/parent", "first"), "dialogs.2.operations[0].parent"),
    (_break("deleted_dialogs", {"2": {}}), "deleted_dialogs.2"),
    (_break("version", 2), "version"),
    (_break("dialogs/1/annotate/is_good", "yes"), "dialogs.1.annotate.is_good"),
    (_break("dialogs/1/messages/2/content", "<|hash|>bWlzc2luZw=="), "dialogs.1.messages[2].content"),
])
def test_a_bad_file_is_reported_by_field_and_writes_nothing(project, members, chars, breakage, field):
    before = (Item.objects.count(), Session.objects.count(), Node.objects.count())
    report = import_panda_json(project=project, data=breakage(minimal_file()), annotator=members["annotator"],
                               file="bad.panda.json")
    assert not report.ok and not report.created
    assert report.errors[0].as_dict()["field"] == field and report.errors[0].file == "bad.panda.json"
    assert (Item.objects.count(), Session.objects.count(), Node.objects.count()) == before


def test_dry_run_reports_without_writing(project, members, chars):
    report = import_panda_json(project=project, data=minimal_file(), annotator=members["annotator"], dry_run=True)
    assert report.ok and report.dialogs == 2 and not report.created and Item.objects.count() == 0


# --- agentic prompts: reasoning, tool calls, tool results and tools ---------------------------------------

def test_an_agentic_prompt_is_written_as_onpanda_writes_it(project, members, chars):
    document = as_file(session_to_panda_json(build_agentic_session(project, members)))
    for dialog in document["dialogs"].values():
        assert dialog["messages"][:-1] == agentic.STORED_MESSAGES and dialog["tools"] == agentic.STORED_TOOLS
    tree = PandaTree(document)
    assert tree.fork_pairs == [(1, 2)]
    # onPanda's SFT samples carry the tools on their first message.
    assert tree.build_legacy_data_v1()["sfts"][0][0]["tools"] == agentic.STORED_TOOLS


def test_an_agentic_prompt_round_trips_through_another_project(project, other_project, members, chars):
    original = build_agentic_session(project, members)
    document = as_file(session_to_panda_json(original))
    report = import_panda_json(project=other_project, data=document, annotator=members["annotator"])
    assert report.ok and report.created and not report.warnings, report.as_dict()
    item = Item.objects.get(pk=report.item_id)
    assert (item.messages, item.tools) == (agentic.STORED_MESSAGES, agentic.STORED_TOOLS)
    assert item.prompt_ids == original.item.prompt_ids  # rendered from the same messages and tools
    assert structure(as_file(session_to_panda_json(Session.objects.get(pk=report.session_id)))) == structure(document)


def agentic_file() -> dict:
    """minimal_file() with the agentic prompt in every dialog, and reasoning in the first dialog's answer."""
    document = minimal_file()
    for dialog in document["dialogs"].values():
        answer = dialog["messages"][2:]
        dialog["messages"] = agentic.record()["messages"] + answer
        dialog["tools"] = agentic.record()["tools"]
    document["dialogs"]["1"]["messages"][-1]["reasoning"] = "Three, I guess."
    return document


def test_an_answers_reasoning_is_imported_and_the_prompts_kept(project, members, chars):
    report = import_panda_json(project=project, data=agentic_file(), annotator=members["annotator"])
    assert report.ok and report.created and not report.warnings, report.as_dict()
    item = Item.objects.get(pk=report.item_id)
    assert (item.messages, item.tools) == (agentic.STORED_MESSAGES, agentic.STORED_TOOLS)
    session = Session.objects.get(pk=report.session_id)
    root = session.nodes.get(key=1)
    assert root.message["reasoning"] == "Three, I guess." and "reasoning" in root.channels
    assert session.current_node.key == 2


def test_dialogs_offering_other_tools_have_another_prompt(project, members, chars):
    document = agentic_file()
    document["dialogs"]["2"]["tools"][0]["description"] = "Yesterday's weather."
    report = import_panda_json(project=project, data=document, annotator=members["annotator"])
    assert report.ok, report.as_dict()
    nodes = {node.key: node for node in Session.objects.get(pk=report.session_id).nodes.all()}
    assert nodes[2].tools[0]["function"]["description"] == "Yesterday's weather."
    assert nodes[1].tools == agentic.STORED_TOOLS
    # Another prompt without is_prompt_modified: an edited prompt, a tree of its own, and said so.
    assert nodes[2].parent is None and nodes[2].operator == "edit_prompt" and nodes[2].tree != nodes[1].tree
    assert report.warnings and report.warnings[0].startswith("dialogs.2: its prompt differs from dialog 1's")


# --- the real model: interop with the onpanda package ---------------------------------------------------


@pytest.fixture
def model_session(project, members, local_backend):
    """A tree corrected on the real model (greedy, so the same every run):

    1 the rollout; 2 a candidate at 2 (undone); 3 " Mars and Venus" typed at 1; 4 a candidate right after the
    typed text of 3, accepted.
    """
    config = services.config_for(project)
    config.max_tokens, config.top_k, config.temperature = 16, 5, 0.0
    config.save()
    Item.objects.create(project=project, messages=[{"role": "user", "content": "Name two planets."}],
                        source_sha256="b" * 64)
    services.generate_rollouts(project=project, progress=RecordingProgress())
    annotator = members["annotator"]
    session = services.open_session(claim=services.claim_next(project=project, annotator=annotator))

    def alternative(node, position):
        return next(token_id for token_id, _ in node.top[position]
                    if token_id != node.token_ids[position] and token_id not in local_backend.eos_token_ids)

    root = session.current_node
    assert len(root.token_ids) > 3
    first = corrections.correct(session=session, version=0, node_id=root.pk, position=2,
                             token_id=alternative(root, 2), actor=annotator)
    list(streaming.continue_node(node=first))
    services.undo(session=session, version=1, actor=annotator)
    typed = corrections.correct(session=session, version=2, node_id=root.pk, position=1, text=" Mars and Venus",
                             actor=annotator)
    list(streaming.continue_node(node=typed))
    typed.refresh_from_db()
    position = typed.locked_until + 1
    assert position < len(typed.token_ids) - 1
    last = corrections.correct(session=session, version=3, node_id=typed.pk, position=position,
                            token_id=alternative(typed, position), actor=annotator)
    list(streaming.continue_node(node=last))
    return services.finish(session=session, version=4, actor=annotator, accept=True)


@pytest.mark.model
def test_a_real_tree_as_onpanda_reads_it_exports_it_and_round_trips_it(model_session, other_project, members,
                                                                       export_storage_in_tmp, local_backend):
    """The checks against onPanda's package share the one tree the real model makes (~3.5 s a tree)."""
    real_tree_parses_with_panda_tree(model_session)
    sft_and_pairs_exports_agree_with_panda_tree(model_session, members, export_storage_in_tmp)
    token_supervision_agrees_with_panda_tree(model_session, members, export_storage_in_tmp, local_backend)
    real_tree_round_trips_through_another_project(model_session, other_project, members)


def real_tree_parses_with_panda_tree(model_session):
    document = as_file(session_to_panda_json(model_session))
    tree = PandaTree(document)
    assert tree.dense_keys == [4] and tree.fork_pairs == [(1, 4), (2, 4), (3, 4)]
    assert [document["dialogs"][k]["operations"][0]["operator"] for k in "1234"] == [
        "generate_new", "continue_with_chosen", "continue_with_input", "continue_with_chosen"]
    assert [document["dialogs"][k]["operations"][0]["parent"] for k in "234"] == ["1", "1", "3"]
    assert len(document["dialogs"]["4"]["operations"][0]["rejected_token"]["top_logprobs"]) >= 5


def sft_and_pairs_exports_agree_with_panda_tree(model_session, members, export_storage_in_tmp):
    project = model_session.item.project
    tree = PandaTree(as_file(session_to_panda_json(model_session)))
    legacy = tree.build_legacy_data_v1()

    _, sft = export_rows(project, members["curator"], export_storage_in_tmp, "onpanda.sft")
    assert [row["id"] for row in sft] == [model_session.pk]
    assert [messages[-1]["content"] for messages in legacy["sfts"]] == [sft[0]["messages"][-1]["content"]]
    assert trained(sft[0]["messages"][:-1]) == model_session.item.messages

    _, pairs = export_rows(project, members["curator"], export_storage_in_tmp, "onpanda.pairs")
    ours = sorted((row["rejected"][0]["content"], row["chosen"][0]["content"]) for row in pairs)
    theirs = sorted((p[-2]["content"], p[-1]["content"]) for p in legacy["preferences"])
    assert ours == theirs and len(ours) == 3
    assert {row["pair_type"] for row in pairs} == {"fork"}


def token_supervision_agrees_with_panda_tree(model_session, members, export_storage_in_tmp, local_backend):
    project = model_session.item.project
    tree = PandaTree(as_file(session_to_panda_json(model_session)))
    theirs = {tuple(messages[0]["onpanda"]["dialog_pair"]): messages[-1]
              for messages in tree.build_token_level_supervision_data_v1(tokenizer=local_backend.tokenizer)}
    _, rows = export_rows(project, members["curator"], export_storage_in_tmp, "onpanda.token_supervision")
    assert len(rows) == len(theirs) == 3
    nodes = {node.key: node for node in model_session.nodes.all()}
    compared = 0
    for row in rows:
        pair = (row["rejected_node_key"], row["chosen_node_key"])
        # onPanda re-tokenizes the text; the ids agree only where the model's tokenization is the canonical one.
        if any(local_backend.tokenize(local_backend.detokenize(ids)) != ids
               for ids in (response_ids(nodes[key]) for key in pair)):
            continue
        compared += 1
        level = theirs[pair]["token_level"]
        assert row["fork_token_idx"] == level["fork_token_idx"]
        assert row["chosen_token_id"] == level["chosen_token_id"]
        assert row["rejected_token_id"] == level["rejected_token_id"]
        assert [c["text"] for c in row["chosen_chunks"]] == [c["text"] for c in theirs[pair]["content"]]
        assert [c["text"] for c in row["rejected_chunks"]] == [c["text"] for c in level["rejected_content"]]
        assert row["rejected_loss"] == (not level["rejected_content"][1]["ignore_loss"])
    assert compared


def real_tree_round_trips_through_another_project(model_session, other_project, members):
    document = as_file(session_to_panda_json(model_session))
    report = import_panda_json(project=other_project, data=copy.deepcopy(document), annotator=members["annotator"],
                               file="planets.panda.json")
    assert report.ok and report.created, report.as_dict()
    imported = Session.objects.get(pk=report.session_id)
    again = as_file(session_to_panda_json(imported))
    assert structure(again) == structure(document)
    assert imported.status == SessionStatus.ACCEPTED and imported.current_node.key == 4
    assert PandaTree(again).fork_pairs == [(1, 4), (2, 4), (3, 4)]
    assert panda_sha256(document) == imported.item.meta["panda_sha256"]
