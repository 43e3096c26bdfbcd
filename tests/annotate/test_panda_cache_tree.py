"""cache_tree: the tokens and logprobs of our answers, in the shape and compression the onPanda app reads."""

import json
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from annotate import corrections, services, streaming
from annotate.models import Node
from annotate.panda_json import import_panda_json, session_to_panda_json
from annotate.panda_json.cache_tree import decode, encode, node_tokens

from ..doubles import ByteBackend
from .conftest import session_answering
from .panda_files import as_file
from .trees import build_trees

pytestmark = pytest.mark.django_db

LZ_STRING = Path(settings.BASE_DIR) / "frontend" / "node_modules" / "lz-string"


def merged(tokens: list[dict]) -> dict:
    """The message the app's default response template reads from cached chunks: the deltas' texts joined per
    key, tool-call fragments joined per call index (id and type from the first), the last finish_reason;
    reasoning loses its trailing newlines, content the leading ones."""
    message: dict = {}
    for token in tokens:
        for key, value in token["delta"].items():
            if key == "tool_calls":
                for fragment in value:
                    calls = message.setdefault("tool_calls", [])
                    if fragment["index"] == len(calls):
                        calls.append({"index": fragment["index"], "id": fragment.get("id"),
                                      "type": fragment.get("type"), "function": {"name": "", "arguments": ""}})
                    for part, text in fragment.get("function", {}).items():
                        calls[fragment["index"]]["function"][part] += text
            elif key == "role":
                message["role"] = value
            else:
                message[key] = message.get(key, "") + value
        if token.get("finish_reason"):
            message["finish_reason"] = token["finish_reason"]
    if "reasoning" in message:
        message["reasoning"] = message["reasoning"].rstrip("\n")
        message["content"] = message.get("content", "").lstrip("\n")
    return message


def cached(document: dict) -> dict:
    return decode(document["cache_tree"])


def answer(dialog: dict) -> dict:
    message = dict(dialog["messages"][-1])
    for call in message.get("tool_calls", []):
        call.pop("index", None)
        call["function"].setdefault("arguments", "")
    return message


@pytest.fixture
def chars(chars):
    chars.script = " sat."  # the trees' continuations
    return chars


def test_each_dialog_is_cached_with_its_logprobs_and_the_forks_candidates(project, members, chars):
    session = build_trees(project, members, chars)["accepted"]
    document = as_file(session_to_panda_json(session))
    assert document["cache_tree"]["compressed_type"] == "lz-string-base64"
    cache = cached(document)
    assert sorted(cache) == sorted(document["dialogs"]) == ["1", "2", "3"]
    nodes = {str(node.key): node for node in session.nodes.all()}
    for key, dialog in document["dialogs"].items():
        tokens, node = cache[key]["tokens"], nodes[key]
        message = merged(tokens)
        assert {k: message.get(k) for k in ("role", "content")} == {k: answer(dialog)[k] for k in ("role", "content")}
        assert message["finish_reason"] == node.finish_reason == "stop"
        assert [t["tokenIndex"] for t in tokens] == list(range(len(node.token_ids)))
        assert [t["logprobs"]["content"][0].get("logprob") for t in tokens] == node.logprobs
    # Dialog 2 picked a candidate at 4: that token is the bifurcation point and keeps the position's top-k;
    # no other token carries its top-k (the app's default download).
    picked = cache["2"]["tokens"]
    assert [t.get("bifurcationPoint") for t in picked].count(True) == 1 and picked[4]["bifurcationPoint"]
    assert [(alt["token"], alt["logprob"]) for alt in picked[4]["logprobs"]["content"][0]["top_logprobs"]] == [
        (chr(token_id), logprob) for token_id, logprob in nodes["2"].top[4]]
    assert all("top_logprobs" not in t["logprobs"]["content"][0] for i, t in enumerate(picked) if i != 4)
    # Dialog 3's "dog" was typed: no logprobs there, as the app writes typed text.
    typed = cache["3"]["tokens"]
    assert [t["logprobs"]["content"][0]["token"] for t in typed[4:7]] == list("dog")
    assert all("logprob" not in t["logprobs"]["content"][0] for t in typed[4:7])
    assert typed[0]["delta"]["role"] == "assistant" and "model" in typed[0] and "model" in typed[-1]


def test_reasoning_is_cached_in_its_channel(project, members, scored_backend, reasoning_session):
    document = as_file(session_to_panda_json(reasoning_session))
    dialog, tokens = document["dialogs"]["1"], cached(document)["1"]["tokens"]
    message = merged(tokens)
    assert (message["reasoning"], message["content"]) == (answer(dialog)["reasoning"], answer(dialog)["content"])
    # The template's "<think>" markers stream as no text.
    assert all(t["delta"] in ({}, {"role": "assistant"}) for t in tokens[:len("<think>")])


def test_tool_calls_are_cached_as_streamed_fragments(project, members, scored_backend):
    session = session_answering(project, members, scored_backend, tool_servers=())
    document = as_file(session_to_panda_json(session))
    message = merged(cached(document)["1"]["tokens"])
    theirs = answer(document["dialogs"]["1"])
    assert message["tool_calls"] == [{"index": 0, **call} for call in theirs["tool_calls"]]
    assert message["tool_calls"][0]["function"] == {"name": "get_current_time",
                                                    "arguments": json.dumps({"timezone": "Asia/Tokyo"})}


def test_a_token_that_ends_inside_a_character_carries_no_text():
    class Bytes(ByteBackend):
        def token_pieces(self, ids):
            return [bytes([token_id]) for token_id in ids]

    ids = list("日本".encode())
    node = Node(key=1, token_ids=ids, logprobs=[-0.1] * 6, top=[[]] * 6, channels=["content"] * 6,
                message={"role": "assistant", "content": "日本"}, finish_reason="length")
    tokens = node_tokens(node, Bytes())
    assert [t["delta"].get("content") for t in tokens] == ["", "", "日", "", "", "本"]
    assert merged(tokens) == {"role": "assistant", "content": "日本", "finish_reason": "length"}


def test_an_imported_files_cache_is_kept_and_nodes_made_here_added(project, members, chars):
    trees = build_trees(project, members, chars)
    services.finish(session=trees["open"], version=trees["open"].version, actor=members["annotator"], accept=False)
    document = as_file(session_to_panda_json(trees["accepted"]))
    theirs = decode(document["cache_tree"])
    theirs["1"]["tokens"][0]["custom"] = "kept"  # something only the app's entry has
    document["cache_tree"] = encode({"1": theirs["1"]})  # the app cached its first dialog only
    report = import_panda_json(project=project, data=document, annotator=members["annotator"], live=True)
    assert report.ok, report.as_dict()
    session = services.open_session(claim=services.claim_next(project=project, annotator=members["annotator"]))
    assert session.pk == report.session_id
    exported = as_file(session_to_panda_json(session))
    assert exported["cache_tree"] == document["cache_tree"]  # nothing made here yet: written back as it came

    child = corrections.correct(session=session, version=session.version, node_id=session.current_node_id, position=8,
                                text=" ran", actor=members["annotator"])
    list(streaming.continue_node(node=child))
    cache = decode(as_file(session_to_panda_json(session))["cache_tree"])
    assert cache["1"] == {"tokens": theirs["1"]["tokens"]}  # the file's entry, untouched
    assert set(cache) == {"1", str(child.key)}  # and the node made here (the file's nodes hold text)
    child.refresh_from_db()
    assert [t["logprobs"]["content"][0].get("logprob") for t in cache[str(child.key)]["tokens"]] == child.logprobs


def test_decode_reads_what_the_app_may_hold_and_refuses_the_rest():
    cache = {"1": {"tokens": [{"delta": {"content": "x"}}]}}
    assert decode(encode(cache)) == cache
    assert decode(cache) == cache and decode(json.dumps(cache)) == cache
    assert decode({"compressed_type": "gzip", "compressed": "..."}) is None
    assert decode("not json") is None and decode([1]) is None


def _node(script: str, *args: str) -> str:
    return subprocess.run(["node", "-e", script, *args], capture_output=True, text=True, check=True,
                          cwd=LZ_STRING.parent.parent, timeout=60).stdout


TEXTS = ["plain", "日本語のテキスト", "emoji 🐼 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", 'quotes " \\ and \n newlines', "x" * 5000]


def test_the_apps_lz_string_reads_ours_and_we_read_its():
    """Against the npm package the app uses (frontend devDependencies): both directions, every kind of text."""
    cache = {str(i): {"tokens": [{"delta": {"content": text}}]} for i, text in enumerate(TEXTS)}
    ours = encode(cache)["compressed"]
    read = _node("const LZ = require('lz-string'); "
                 "process.stdout.write(JSON.stringify(JSON.parse(LZ.decompressFromBase64(process.argv[1]))))", ours)
    assert json.loads(read) == cache
    theirs = _node("const LZ = require('lz-string'); "
                   "process.stdout.write(LZ.compressToBase64(JSON.stringify(JSON.parse(process.argv[1]))))",
                   json.dumps(cache))
    assert decode({"compressed_type": "lz-string-base64", "compressed": theirs}) == cache
    legacy = _node("const LZ = require('lz-string'); process.stdout.write(JSON.stringify("
                   "{compressed_type: 'lz-string', compressed: LZ.compress(process.argv[1])}))", json.dumps(cache))
    assert decode(json.loads(legacy)) == cache
