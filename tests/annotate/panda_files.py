""".panda.json documents the tests share: a file as onPanda's annotator writes one, the onPanda app's corpus
(tests/fixtures/panda_app, one file per feature), and the pieces of hostile files (an lz-string stream that
spells far more than it weighs, nesting past any parser's depth)."""

import copy
import json
from pathlib import Path

from annotate.models import Session
from annotate.panda_json import import_panda_json


def as_file(document: dict) -> dict:
    """What a reader of the written file gets back (JSON keys are strings, tuples become lists...)."""
    return json.loads(json.dumps(document, ensure_ascii=False))


def minimal_file() -> dict:
    """A file as onPanda's annotator writes one: a rollout, a candidate pick (good) and an unanswered dialog."""
    prompt = [{"role": "system", "content": ""}, {"role": "user", "content": "1+1=? Answer in words."}]
    def ask(*answer):  # each dialog holds its own copy of the prompt, as in a parsed file
        return copy.deepcopy(prompt) + list(answer)

    return {
        "version": "2.0", "uuid": "2025-08-19_12-00-00.000", "update_time": 1755600000000,
        "hash_map": {}, "deleted_dialogs": {},
        "dialogs": {
            "1": {"messages": ask({"role": "assistant", "content": "Answer is three.", "finish_reason": "stop"}),
                  "annotate": {"is_good": False},
                  "operations": [{"operator": "generate_new", "parent": "1", "is_new_generated": True,
                                  "on_policy": True, "time": 1755599990000, "chat_config": {"model": "vllm-model"}}]},
            "2": {"messages": ask({"role": "assistant", "content": "Answer is two.", "finish_reason": "stop"}),
                  "annotate": {"is_good": True},
                  "operations": [{"operator": "continue_with_chosen", "parent": "1", "on_policy": True,
                                  "time": 1755599995000,
                                  "continue_with_chosen": {"token": "w", "logprob": -1.5, "bytes": [119]},
                                  "rejected_token": {"delta": {"content": "h"}, "tokenIndex": 11,
                                                     "unicode_start_index": 11}}]},
            "3": {"messages": ask(), "annotate": {"is_good": None}, "operations": []},
        },
    }


CORPUS = Path(__file__).parent.parent / "fixtures" / "panda_app"
NAMES = sorted(path.name.removesuffix(".panda.json") for path in CORPUS.glob("*.panda.json"))


def corpus(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.panda.json").read_text())


def imported(project, members, name: str) -> Session:
    report = import_panda_json(project=project, data=corpus(name), annotator=members["annotator"],
                               file=f"{name}.panda.json")
    assert report.ok and report.created, report.as_dict()
    return Session.objects.get(pk=report.session_id)


BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def lz_run(codes: int) -> str:
    """lz-string's base64 of "a" * (1 + 2 + ... + (codes + 1)), as `LZString.compressToBase64` writes it: "a",
    then `codes` codes each naming the entry being defined (the last piece plus its first character), so each
    writes one character more than the one before. 14,000 codes (30 KB) spell ~10^8 characters."""
    bits: list[int] = []

    def put(value: int, width: int) -> None:  # lz-string writes a code's lowest bit first
        bits.extend((value >> i) & 1 for i in range(width))

    put(0, 2)  # an 8-bit character follows
    put(ord("a"), 8)
    size, width, enlarge_in = 4, 3, 4
    for _ in range(codes):
        put(size, width)
        size, enlarge_in = size + 1, enlarge_in - 1
        if enlarge_in == 0:
            enlarge_in, width = 2**width, width + 1
    put(2, width)  # the end
    bits += [0] * (-len(bits) % 6)
    text = "".join(BASE64[sum(bit << (5 - i) for i, bit in enumerate(bits[at:at + 6]))]
                   for at in range(0, len(bits), 6))
    return text + "=" * (-len(text) % 4)


def nested(depth: int) -> str:
    return '{"1":' * depth + "1" + "}" * depth
