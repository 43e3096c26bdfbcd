"""The corpus of app-shaped files (tests/fixtures/panda_app) both ways: import -> export -> import keeps the
trees, tokens, channels, provenance and fields; and onpanda's PandaTree reads our export of each file as it
reads the original (the same trees, SFT rows, fork and outcome pairs, token-level v1 and v2 supervision)."""

import json

import pytest
from onpanda import utf8_tokenizer
from onpanda.parser import PandaTree
from onpanda.response_templates import build_response_template

from annotate.models import Session
from annotate.panda_json import import_panda_json, session_to_panda_json

from .panda_files import NAMES, corpus, imported

pytestmark = pytest.mark.django_db



NODE_FIELDS = ("key", "tree", "round", "operator", "fork_index", "locked_until", "token_ids", "logprobs", "top",
               "origins", "candidate_ranks", "channels", "message", "context", "tools", "prompt_ids", "finish_reason",
               "model_id", "deleted", "status")


def as_file(document: dict) -> dict:
    return json.loads(json.dumps(document, ensure_ascii=False))


def shape(session: Session) -> list[dict]:
    """Every node as the platform holds it, with its parent's key and what made it (kinds and payloads)."""
    return [{**{name: getattr(node, name) for name in NODE_FIELDS}, "parent": node.parent.key if node.parent else None,
             "events": [(event.kind, {k: v for k, v in event.payload.items() if k != "imported_from"})
                        for event in node.events.order_by("id")]}
            for node in session.nodes.order_by("key")]


def without_platform(document: dict) -> dict:
    return {key: value for key, value in document.items() if key != "dataplatform"}


@pytest.mark.parametrize("name", NAMES)
def test_import_export_import_keeps_everything(project, other_project, members, chars, name):
    first = imported(project, members, name)
    exported = as_file(session_to_panda_json(first))
    report = import_panda_json(project=other_project, data=exported, annotator=members["annotator"],
                               file=f"again-{name}.panda.json")
    assert report.ok and report.created and not report.warnings, report.as_dict()
    second = Session.objects.get(pk=report.session_id)
    assert shape(second) == shape(first)
    assert (second.status, second.current_node.key) == (first.status, first.current_node.key)
    assert second.meta["panda_json"]["dialogs"] == first.meta["panda_json"]["dialogs"]
    assert second.meta["panda_json"]["file"] == first.meta["panda_json"]["file"]
    assert second.item.external_id == first.item.external_id
    # And the file written from the second import is the file written from the first.
    assert without_platform(as_file(session_to_panda_json(second))) == without_platform(exported)


@pytest.mark.parametrize("name", NAMES)
def test_export_gives_back_what_the_file_held(project, members, chars, name):
    original = corpus(name)
    exported = as_file(session_to_panda_json(imported(project, members, name)))
    for field in ("uuid", "update_time", "title", "description", "comment", "sado_info", "cache_tree"):
        assert exported.get(field) == original.get(field), field
    assert exported["version"] == "2.0" and exported["hash_map"] == original["hash_map"]
    for section in ("dialogs", "deleted_dialogs"):
        assert list(exported[section]) == list(original.get(section, {}))
        for key, dialog in original.get(section, {}).items():
            assert exported[section][key] == dialog, (section, key)


def _panda_tree_view(document: dict, tokenizer) -> dict:
    tree = PandaTree(document, tokenizer=None)
    legacy = tree.build_legacy_data_v1()
    return {"trees": tree.trees, "dense_keys": tree.dense_keys, "fork_pairs": tree.fork_pairs,
            "outcome_pairs": tree.outcome_pairs, "sfts": legacy["sfts"], "preferences": legacy["preferences"],
            "token_v1": tree.build_token_level_supervision_data_v1(tokenizer=tokenizer),
            "token_v2": tree.build_token_level_supervision_data_v2(tokenizer=tokenizer),
            # Every channel flattened (reasoning, tool calls): a fork in the reasoning or the arguments is supervised.
            "token_v1_channels": tree.build_token_level_supervision_data_v1(
                tokenizer=tokenizer, response_template=build_response_template())}


@pytest.mark.parametrize("name", NAMES)
def test_panda_tree_reads_our_export_as_the_original_bytes(project, members, chars, name):
    """With onpanda's own byte tokenizer (fast; no model)."""
    exported = as_file(session_to_panda_json(imported(project, members, name)))
    assert _panda_tree_view(exported, utf8_tokenizer) == _panda_tree_view(corpus(name), utf8_tokenizer)


def test_forks_in_the_reasoning_and_the_arguments_stay_there_for_panda_tree(project, members, chars):
    exported = as_file(session_to_panda_json(imported(project, members, "agentic")))
    levels = {tuple(messages[0]["onpanda"]["dialog_pair"]): messages[-1]["token_level"]
              for messages in PandaTree(exported).build_token_level_supervision_data_v1(
                  tokenizer=utf8_tokenizer, response_template=build_response_template())}
    assert levels[(1, 2)]["rejected_messages_location"]["path_keys"][1] == "tool_calls"
    assert levels[(3, 4)]["rejected_messages_location"]["path_keys"][1:] == ["reasoning"]


@pytest.fixture
def real(local_backend, use_backend):
    use_backend(local_backend)
    return local_backend


@pytest.mark.model
@pytest.mark.parametrize("name", NAMES)
def test_panda_tree_reads_our_export_as_the_original(project, other_project, members, real, name):
    """Imported on the embedded model (its tokenizer and response template) and read with its tokenizer, as a
    trainer would run the package; and the round trip on that backend."""
    first = imported(project, members, name)
    exported = as_file(session_to_panda_json(first))
    theirs = _panda_tree_view(corpus(name), real.tokenizer)
    assert _panda_tree_view(exported, real.tokenizer) == theirs
    assert theirs["sfts"]  # every file of the corpus has a good dialog
    report = import_panda_json(project=other_project, data=exported, annotator=members["annotator"])
    assert report.ok and not report.warnings, report.as_dict()
    # The same nodes, prompt ids included: tools are read in the key order the database keeps (jsonb
    # reorders keys), so the ids rendered from the file and from the stored tools agree.
    assert shape(Session.objects.get(pk=report.session_id)) == shape(first)
