""".panda.json is bounded by what it expands to (#37): hash_map references and lz-string cache_tree.

Each hostile file is built here, small: a hash named many times, an lz-string stream that spells ~10^8
characters from 30 KB, a deeply nested cache compressed. Import refuses them with the field named and
writes nothing; an export holding such a cache from before still succeeds."""

import json
import logging
import random

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from lzstring import LZString

from annotate.models import Item, Node, Session
from annotate.panda_json import MAX_FILE_BYTES, import_panda_json
from annotate.panda_json.cache_tree import CacheRefused, decode, encode
from annotate.panda_json.hash_map import HASH_PREFIX, object_hash
from annotate.panda_json.lz_string import TooLong, decompress, decompress_from_base64

from ..conftest import api_client_for
from ..exporting import export_rows
from .panda_files import corpus, lz_run, minimal_file, nested
from .trees import build_trees

pytestmark = pytest.mark.django_db

@pytest.fixture
def chars(chars):
    chars.script = " sat."  # the trees' continuations
    return chars


def compressed(text: str) -> dict:
    return {"compressed_type": "lz-string-base64", "compressed": LZString.compressToBase64(text)}


def rows() -> tuple[int, int, int]:
    return Item.objects.count(), Session.objects.count(), Node.objects.count()


def upload(members, document: dict, name: str = "bomb.panda.json"):
    return api_client_for(members["curator"]).post(
        "/api/v1/projects/alpha/annotate/import-panda/",
        {"file": SimpleUploadedFile(name, json.dumps(document).encode())}, format="multipart")


# --- the lz-string decompressor ----------------------------------------------------------------------------

def test_the_bounded_decompressor_reads_what_the_lzstring_package_writes():
    pieces = ["a", "b", " ", "日本", "\n", '"', "xyz" * 5, "\u00e9", "\uffff"]
    texts = ["".join(random.Random(seed).choices(pieces, k=seed * 7)) for seed in range(1, 60)] + ["x" * 5000]
    for text in texts:
        assert decompress_from_base64(LZString.compressToBase64(text), 10**6) == text
        assert decompress(LZString.compress(text), 10**6) == text
    assert lz_run(50) == LZString.compressToBase64("a" * sum(range(1, 52)))  # the bomb is the package's own run
    assert decompress_from_base64(lz_run(50), 10**6) == "a" * sum(range(1, 52))


def test_decompression_stops_as_soon_as_the_output_passes_the_cap():
    exact = sum(range(1, 52))
    assert decompress_from_base64(lz_run(50), exact) == "a" * exact
    with pytest.raises(TooLong):
        decompress_from_base64(lz_run(50), exact - 1)
    # ~10^8 characters (the lzstring package: minutes and ~0.5 GB); stopped after the first 100,000.
    bomb = lz_run(14_000)
    assert len(bomb) < 31_000
    with pytest.raises(TooLong):
        decompress_from_base64(bomb, 100_000)


def test_what_the_lzstring_package_fails_on_is_unreadable():
    # "w" starts with the header 3, which the package meets with an UnboundLocalError (an export's 500).
    assert decompress_from_base64("w", 100) is None
    assert decompress_from_base64("AAAA", 100) is None  # the input ends before the end marker
    assert decompress_from_base64("not base64!", 100) is None
    assert decode({"compressed_type": "lz-string-base64", "compressed": "w"}) is None
    assert decode({"compressed_type": ["unhashable"], "compressed": "w"}) is None


def test_decode_refuses_a_cache_over_the_cap_or_nested_too_deep(settings):
    settings.PANDA_CACHE_TREE_MAX_CHARS = 100_000
    cache = {"1": {"tokens": [{"delta": {"content": "x"}}]}}
    assert decode(encode(cache)) == cache
    with pytest.raises(CacheRefused, match="100,000 characters"):
        decode({"compressed_type": "lz-string-base64", "compressed": lz_run(14_000)})
    with pytest.raises(CacheRefused, match="100,000 characters"):
        decode({"compressed_type": "lz-string", "compressed": LZString.compress("[" * 100_001)})
    with pytest.raises(CacheRefused, match="100,000 characters"):
        decode({"big": "x" * 100_000})  # the object itself, as its JSON
    for deep in (nested(150), nested(5_000)):  # past MAX_JSON_DEPTH; past what Python's json can read
        with pytest.raises(CacheRefused, match="nested more than 100 levels deep"):
            decode(compressed(deep))
        with pytest.raises(CacheRefused, match="nested more than 100 levels deep"):
            decode(deep)  # a JSON string
    assert decode(compressed(nested(90))) is not None


# --- import: hash_map --------------------------------------------------------------------------------------

def test_hash_map_references_are_counted_to_the_limit_and_refused_past_it(project, members, chars, settings):
    """The app's own file (two references to one 6 KB content): imported at exactly what its references put
    back, refused one byte below, at the second reference, with nothing written."""
    document = corpus("hash_map")
    (digest, value), = document["hash_map"].items()
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    settings.PANDA_JSON_MAX_EXPANDED_BYTES = 2 * size - 1
    before = rows()
    report = import_panda_json(project=project, data=document, annotator=members["annotator"], file="app.panda.json")
    assert not report.ok and not report.created and rows() == before
    error = report.errors[0].as_dict()
    second = _references(document, digest)[1]
    assert (error["file"], error["field"]) == ("app.panda.json", second)
    assert f"{2 * size - 1:,} bytes" in error["message"] and "PANDA_JSON_MAX_EXPANDED_BYTES" in error["message"]
    settings.PANDA_JSON_MAX_EXPANDED_BYTES = 2 * size
    report = import_panda_json(project=project, data=document, annotator=members["annotator"])
    assert report.ok and report.created, report.as_dict()


def _references(document: dict, digest: str) -> list[str]:
    found = []

    def walk(value, path):
        if value == HASH_PREFIX + digest:
            found.append(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    for section in ("dialogs", "deleted_dialogs"):
        for key, dialog in document.get(section, {}).items():
            walk(dialog, f"{section}.{key}")
    return found


def test_a_1_mb_hash_named_100_times_is_refused_through_the_api(project, members, chars, settings):
    """The issue's file: 1 MB in hash_map, named by 100 messages of an unanswered dialog (100 MB put back,
    kept whole in Session.meta): refused with the default limit at the reference that passes it."""
    assert settings.PANDA_JSON_MAX_EXPANDED_BYTES == MAX_FILE_BYTES  # the default: the file limit again
    value = "x" * 1_000_000
    digest = object_hash(value)
    document = minimal_file()
    document["hash_map"] = {digest: value}
    prompt = document["dialogs"]["3"]["messages"]
    document["dialogs"]["3"]["messages"] = prompt + [{"role": "user", "content": HASH_PREFIX + digest}] * 100
    before = rows()
    response = upload(members, document)
    assert response.status_code == 400 and rows() == before
    passing = MAX_FILE_BYTES // (len(value) + 2)  # each reference adds the value's JSON: 1,000,002 bytes
    error = response.json()["errors"][0]
    assert (error["file"], error["field"]) == ("bomb.panda.json",
                                               f"dialogs.3.messages[{len(prompt) + passing}].content")
    assert f"{MAX_FILE_BYTES:,} bytes" in error["message"]


# --- import: cache_tree ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("cache", "words"), [
    ({"compressed_type": "lz-string-base64", "compressed": lz_run(14_000)}, "1,000,000 characters"),
    (compressed(nested(5_000)), "nested more than 100 levels deep"),
    (compressed(nested(150)), "nested more than 100 levels deep"),
    (nested(5_000), "nested more than 100 levels deep"),  # a JSON string
], ids=["lz-bomb", "deep", "deeper-than-allowed", "deep-string"])
def test_a_cache_tree_bomb_is_refused_through_the_api(project, members, chars, settings, cache, words):
    settings.PANDA_CACHE_TREE_MAX_CHARS = 1_000_000
    document = minimal_file()
    document["cache_tree"] = cache
    before = rows()
    response = upload(members, document)
    assert response.status_code == 400 and rows() == before
    (error,) = response.json()["errors"]
    assert (error["file"], error["field"]) == ("bomb.panda.json", "cache_tree") and words in error["message"]


def test_a_cache_tree_within_the_bounds_is_imported_as_it_came(project, members, chars):
    document = minimal_file()
    document["cache_tree"] = compressed(json.dumps({"1": {"tokens": [{"delta": {"content": "A"}}]}}))
    response = upload(members, document, name="ok.panda.json")
    assert response.status_code == 200, response.json()
    stored = Session.objects.get(pk=response.json()["session_id"]).meta["panda_json"]["file"]["cache_tree"]
    assert stored == document["cache_tree"]


# --- export: a bad cache stored before these bounds --------------------------------------------------------

@pytest.mark.parametrize("cache", [
    compressed(nested(5_000)),  # a RecursionError in every export of the project, before
    {"compressed_type": "lz-string-base64", "compressed": lz_run(14_000)},  # minutes and ~0.5 GB, before
    {"compressed_type": "lz-string-base64", "compressed": "w"},  # an UnboundLocalError, before
], ids=["deep", "lz-bomb", "bad-header"])
def test_an_export_writes_a_bad_stored_cache_back_as_stored(project, members, chars, settings, caplog,
                                                           export_storage_in_tmp, cache):
    settings.PANDA_CACHE_TREE_MAX_CHARS = 1_000_000
    session = build_trees(project, members, chars)["accepted"]
    # As an import before #37 could store it; the session's nodes were made here, so export merges their tokens.
    Session.objects.filter(pk=session.pk).update(meta={"panda_json": {"file": {"cache_tree": cache}}})
    with caplog.at_level(logging.WARNING, logger="annotate.panda_json.export"):
        _, exported = export_rows(project, members["curator"], export_storage_in_tmp, "onpanda.panda_json")
    document = json.loads(next(row for row in exported if row["id"] == session.pk)["panda_json"])
    assert document["cache_tree"] == cache
    refused = [record for record in caplog.records if record.name == "annotate.panda_json.export"]
    assert len(refused) == (cache["compressed"] != "w")  # an unreadable cache is written back without a word
    assert all(f"Session {session.pk}" in record.getMessage() for record in refused)
