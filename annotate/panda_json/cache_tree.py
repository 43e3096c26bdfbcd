"""`cache_tree`, as the onPanda app writes it (`dumpCacheTree` in src/stores/pandaState.js): the tokens of
each dialog's answer with their logprobs, so that the app shows the model's probabilities on open.

The app keeps, per dialog key, the chunks its chat-completions stream delivered (`{"tokens": [chunk, ...]}`)
and writes them compressed: `{"compressed_type": "lz-string-base64", "compressed": LZString's
compressToBase64 of the JSON}`. Each chunk is one token: `delta` (`role` on the first; then `reasoning`,
`content`, or a `tool_calls` fragment: the call's `index`, its `id`, `type` and name first, then pieces of
its arguments), `logprobs.content[0]` (`token`, `logprob`; `top_logprobs` only where the dialog forks,
marked `bifurcationPoint`; the app's other download keeps every token's), `tokenIndex`, `finish_reason` on the last, and `model`
on the first and the last. On open the app merges the deltas and, when they spell the dialog's answer,
shows the cached tokens with their probabilities; otherwise it matches their text to the answer's.

A node made here writes its own tokens in that shape: template text (the think and tool-call markers)
and the stop token become chunks with an empty delta, as a chat-completions server streams them; a token that ends in
the middle of a character carries no text, and the token that completes it carries the character.

A few KB of lz-string can spell billions of characters, and a cache nested deep enough ended every export of
its project in a RecursionError. `decode` is bounded (lz_string.py; PANDA_CACHE_TREE_MAX_CHARS, and the
platform's strict JSON reader, at most MAX_JSON_DEPTH levels): import refuses a file whose cache passes the
bounds, and export writes back a stored one as it was stored.
"""

import codecs
import json

from django.conf import settings
from django.utils.translation import gettext

from dataplatform.imports import JsonProblem, check_storable, load_json
from dataplatform.inference import Backend

from ..models import Node
from ..supervision import response_ids
from . import lz_string

COMPRESSED_TYPE = "lz-string-base64"
UNPACK = {"lz-string-base64": lz_string.decompress_from_base64, "lz-string": lz_string.decompress}


class CacheRefused(ValueError):
    """A cache this platform does not decode: it spells more than PANDA_CACHE_TREE_MAX_CHARS characters, or
    JSON that `load_json` refuses (nested deeper than MAX_JSON_DEPTH...). The message says which.

    Import refuses such a file (the 400 names `cache_tree`), so none is stored; a cache stored before these
    bounds existed is written back by export as it was stored, never decoded past the cap (export.py)."""


def encode(cache: dict) -> dict:
    # ASCII JSON: LZString works on UTF-16 code units, and `\\u` escapes (surrogate pairs included) make every
    # character one unit in Python as in JavaScript; JSON.parse reads them back to the same text.
    text = json.dumps(cache, ensure_ascii=True, separators=(",", ":"))
    return {"compressed_type": COMPRESSED_TYPE, "compressed": lz_string.compress_to_base64(text)}


def _too_long(limit: int) -> CacheRefused:
    return CacheRefused(gettext("the cache it holds spells more than %(limit)s characters "
                                "(PANDA_CACHE_TREE_MAX_CHARS); remove cache_tree from the file to import it without "
                                "the app's cached token probabilities") % {"limit": f"{limit:,}"})


def _load(text: str, limit: int):
    """The JSON value `text` holds, read as strictly as an upload; None if it is not JSON."""
    if len(text) > limit:
        raise _too_long(limit)
    try:
        return load_json(text)
    except json.JSONDecodeError:
        return None
    except JsonProblem as exc:
        raise CacheRefused(gettext("the cache it holds cannot be read: %(problem)s") % {"problem": exc.message}) \
            from None


def decode(value) -> dict | None:
    """The cache a file's `cache_tree` holds (either compression the app wrote, a JSON string, or the object
    itself), or None when it holds something else. Raises CacheRefused past the bounds: decompression stops
    as soon as its output passes PANDA_CACHE_TREE_MAX_CHARS, so no input costs more than the cap."""
    limit = settings.PANDA_CACHE_TREE_MAX_CHARS
    if isinstance(value, str):
        value = _load(value, limit)
    if not isinstance(value, dict):
        return None
    kind = value.get("compressed_type")
    if kind is None:  # the object itself: bounded as its JSON would be (a stored one may predate the bounds)
        try:
            check_storable(value)
        except JsonProblem as exc:
            raise CacheRefused(gettext("the cache it holds cannot be read: %(problem)s")
                               % {"problem": exc.message}) from None
        if len(json.dumps(value, ensure_ascii=True, separators=(",", ":"))) > limit:
            raise _too_long(limit)
        return value
    unpack = UNPACK.get(kind) if isinstance(kind, str) else None
    if unpack is None or not isinstance(value.get("compressed"), str):
        return None
    try:
        text = unpack(value["compressed"], limit)
    except lz_string.TooLong:
        raise _too_long(limit) from None
    cache = _load(text, limit) if text else None
    return cache if isinstance(cache, dict) else None


def _delta(channel: str, text: str, call: int, message: dict, starts_call: bool) -> dict:
    if channel in ("reasoning", "content"):
        return {channel: text}
    if channel == "tool_name":
        if not starts_call:
            return {"tool_calls": [{"index": call, "function": {"name": text}}]}
        calls = message.get("tool_calls") or []
        call_id = calls[call].get("id") if call < len(calls) else None
        return {"tool_calls": [{"index": call, **({"id": call_id} if call_id else {}), "type": "function",
                                "function": {"name": text}}]}
    if channel == "tool_arguments":
        return {"tool_calls": [{"index": call, "function": {"arguments": text}}]}
    return {}  # template text (markers), or a token still pending: a stream shows it as no text


def node_tokens(node: Node, backend: Backend, *, fork_top: list | None = None) -> list[dict]:
    """The node's answer as the app caches a streamed one; `fork_top`: the candidates at its fork (the
    correction's event records them; an export leaves the nodes' large `top` column unread)."""
    ids = list(node.token_ids)
    pieces = backend.token_pieces(ids) if ids else []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    forks = {node.fork_index} if node.fork_index is not None else set()
    stop_at = len(response_ids(node))  # the model's stop token, which a stream does not show as text
    tokens, call, previous = [], -1, None
    for index, piece in enumerate(pieces):
        channel = node.channels[index] if index < len(node.channels) else "content"
        if index >= stop_at:
            channel = "marker"
        text = decoder.decode(piece, final=index == len(ids) - 1)
        starts_call = channel == "tool_name" and previous != "tool_name"
        call += starts_call
        delta = _delta(channel, text, max(call, 0), node.message, starts_call)
        if index == 0:
            delta = {"role": "assistant", **delta}
        entry: dict = {"token": text}
        logprob = node.logprobs[index] if index < len(node.logprobs) else None
        if logprob is not None:  # a typed token has none (the app deletes it too)
            entry["logprob"] = logprob
        top = fork_top if index in forks else None
        if top:
            alternatives = [int(alt_id) for alt_id, _ in top]
            entry["top_logprobs"] = [
                {"token": alt.decode("utf-8", errors="replace"), "logprob": alt_logprob}
                for alt, (_, alt_logprob) in zip(backend.token_pieces(alternatives), top, strict=True)]
        token: dict = {"index": 0, "delta": delta, "logprobs": {"content": [entry]}, "tokenIndex": index}
        if index in forks:
            token["bifurcationPoint"] = True
        tokens.append(token)
        previous = channel if channel != "marker" else previous
    if not tokens:  # an empty answer: the app's role-only chunk
        tokens.append({"index": 0, "delta": {"role": "assistant", "content": ""}, "tokenIndex": 0})
    if node.finish_reason:
        tokens[-1]["finish_reason"] = node.finish_reason
    if node.model_id:
        tokens[0]["model"] = tokens[-1]["model"] = node.model_id
    return tokens


def cache_tree(made_here: list[Node], backend: Backend, *, kept=None, fork_tops: dict | None = None) -> dict | None:
    """The `cache_tree` of a session: an imported file's own entries (`kept`, its cache_tree as imported; its
    nodes have no logprobs of their own, a file stores text) and the tokens of the nodes made here. None when
    there is nothing to write or the kept value cannot be read (it is then written back as it came); raises
    CacheRefused for a kept value past the bounds (decode). `fork_tops`: node pk -> the candidates at its fork."""
    cache = decode(kept) if kept is not None else {}
    if cache is None:
        return None
    for node in made_here:
        cache[str(node.key)] = {"tokens": node_tokens(node, backend, fork_top=(fork_tops or {}).get(node.pk))}
    return encode(cache) if cache else None
