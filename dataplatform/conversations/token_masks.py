"""Loss masks per token, aligned to a chat template's tokens: the trainer-ready form of a conversation whose
loss falls on some assistant messages only (`input_ids` with `completion_mask`, which TRL's SFT trainer reads
from a pre-tokenized dataset), and the identity of the template the ids belong to.

A masked assistant message's tokens are those its turn adds after the template's assistant header: from the
end of the conversation before it, rendered with the generation prompt, to the end of the conversation through
it, rendered closed (its end-of-turn marker included, so the model learns to stop). That needs a template whose
rendering of a conversation's beginning is a prefix of the whole; one that rewrites earlier turns (Qwen3 drops
the reasoning of past turns) is refused with `NotPrefixStable`, and the caller leaves the token columns empty.
The conversation is tokenized once, and each bound read off its token offsets (checked on the turn's header
alone, `_Rendered`): the cost of a row is one tokenization, not one per masked message and prefix.

The identity names the tokenizer and chat template by model and hashes, and what the template renders is checked
on a probe conversation, not assumed; a row whose ids that template does not render does not name it.
"""

import bisect
import hashlib
import json
from pathlib import Path

import pyarrow as pa
from django.core.cache import cache

from .templates.chat_template import chat_template


class NotPrefixStable(ValueError):
    """The template renders a message differently once later messages follow it."""


# The columns that name the tokenizer and chat template a row's token ids belong to (null when it has none).
IDENTITY_COLUMNS = [
    pa.field("template_model", pa.string()),  # the model whose tokenizer made the ids
    pa.field("tokenizer_sha256", pa.string()),  # sha256 of the tokenizer's serialized vocabulary and rules
    pa.field("template_sha256", pa.string()),  # sha256 of the chat template the ids were rendered with
]
IDENTITY_MEANINGS = {
    "template_model": "The model whose tokenizer and chat template the row's token ids belong to; null when the "
                      "export had no tokenizer here, the row's ids are another model's, or the row has no token "
                      "ids.",
    "tokenizer_sha256": "sha256 of that tokenizer's serialized vocabulary and rules; null as template_model is.",
    "template_sha256": "sha256 of the chat template the token ids were rendered with (the manifest's tokenizer "
                       "names it); null as template_model is, or when that template does not render the row's "
                       "prompt ids (rendered by another: an older one, or another response template family).",
}

# A conversation that holds each thing a chat template may show or drop, each with a word of its own: rendered
# through the backend's chat tokenize, the words that come back say what the template renders (checked, since
# a model's own template may drop any of them, as SmolLM2's drops all four).
PROBE_WORDS = {"tools": "probe-tool-schema", "reasoning": "probe-reasoning", "tool_calls": "probe-call-argument",
               "tool_results": "probe-tool-result"}
PROBE_TOOLS = [{"type": "function", "function": {
    "name": "probe_lookup", "description": PROBE_WORDS["tools"],
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}]
PROBE_MESSAGES = [
    {"role": "system", "content": "A probe of what the chat template renders."},
    {"role": "user", "content": "Look it up."},
    {"role": "assistant", "content": "", "reasoning_content": PROBE_WORDS["reasoning"], "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "probe_lookup", "arguments": {"query": PROBE_WORDS["tool_calls"]}}}]},
    {"role": "tool", "content": PROBE_WORDS["tool_results"], "tool_call_id": "call_0", "name": "probe_lookup"},
]


def template_identity(backend) -> dict | None:
    """{model_id, tokenizer_sha256, chat_template_sha256} of the backend's tokenizer, or None when the backend has
    no tokenizer of its own here (a vLLM server without VLLM_TOKENIZER_DIR). Hashes, never a path: the folder a
    server loaded the tokenizer from says nothing to a trainer elsewhere."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {"model_id": backend.model_id, "tokenizer_sha256": _sha256(_serialized(tokenizer)),
            "chat_template_sha256": _sha256(template)}


def describe_chat_template(backend) -> dict:
    """Which chat template the backend's model renders with, and whether it shows tools, reasoning, tool calls and
    tool results: the probe conversation rendered through the backend's chat tokenize (vLLM's `/tokenize` for a
    served model, so that what the server renders is what is told)."""
    tokenizer = getattr(backend, "tokenizer", None)
    copy = getattr(tokenizer, "chat_template", None)  # the template of the tokenizer here (the server's, or a copy)
    served = getattr(backend, "name", "") != "local"
    try:
        ids = list(backend.chat_prompt_ids(PROBE_MESSAGES, tools=PROBE_TOOLS))
        text = backend.detokenize(ids)
    except Exception as exc:  # noqa: BLE001  (a template that refuses the probe is described so; the export goes on)
        return {"name": _template_name(backend, copy, served), "probe_error": str(exc)[:300]}
    # A served model's template is named by the copy's hash only when the two render the probe alike.
    same = copy is not None and (not served or _ids(tokenizer, PROBE_MESSAGES, PROBE_TOOLS, generation=True) == ids)
    described = {"name": _template_name(backend, copy if same else None, served),
                 **{f"renders_{what}": word in text for what, word in PROBE_WORDS.items()},
                 "checked_by": "rendering a probe conversation (a tool offered, reasoning, a tool call and its result) "
                               "through the backend's chat tokenize"}
    if served and copy is not None:
        described["tokenizer_copy_renders_the_same"] = same
    return described


def _template_name(backend, copy: str | None, served: bool) -> str:
    if copy == chat_template():
        return ("the platform's chatml-think template, which the embedded model's converted folder carries "
                "(chat_template.jinja; chat_template_training.jinja adds the generation markers)")
    return f"{backend.model_id}'s own chat template" + (", as the server renders it" if served else "")


# The pre-tokenized form TRL's SFT trainer reads as it is: `labels` (-100 where `completion_mask` is 0) beside
# the mask, because the trainer folds `completion_mask` into its labels only with completion_only_loss on,
# which it turns on by itself only for prompt/completion rows; a `labels` column it always uses.
TOKEN_COLUMNS = [
    pa.field("input_ids", pa.list_(pa.int64())),
    pa.field("completion_mask", pa.list_(pa.int64())),  # 1 on the tokens that get loss
    pa.field("labels", pa.list_(pa.int64())),  # input_ids, with -100 where completion_mask is 0
]
TOKEN_MEANINGS = {
    "input_ids": "The row's conversation as token ids under the chat template of template_model; null when the "
                 "row has no token ids.",
    "completion_mask": "Per token of input_ids: 1 where the loss falls, 0 elsewhere.",
    "labels": "input_ids with -100 (ignored by the loss) wherever completion_mask is 0.",
}
IGNORE_INDEX = -100  # what PyTorch's cross-entropy (and so every HF trainer) skips


def token_columns(input_ids: list[int] | None, mask: list[int] | None) -> dict:
    """The TOKEN_COLUMNS cells of a row (all null when it has no ids)."""
    if input_ids is None or mask is None:
        return {field.name: None for field in TOKEN_COLUMNS}
    return {"input_ids": input_ids, "completion_mask": mask,
            "labels": [token if bit else IGNORE_INDEX for token, bit in zip(input_ids, mask, strict=True)]}


def note_identity(notes: dict, backend) -> dict | None:
    """The backend's template identity, recorded in an export's notes under "tokenizer" (the export engine
    puts it in the manifest) with what its chat template renders, or why its rows have no token ids."""
    identity, notes["tokenizer"] = remembered_note(backend)
    return identity


# The files a tokenizer and its chat templates are read from (never the weights), and the version of the note
# made of them (bump it when describe_chat_template or template_identity says something new).
TOKENIZER_FILES = ("tokenizer", "chat_template", "special_tokens_map", "added_tokens", "vocab", "merges")
NOTE_VERSION = 1


def remembered_note(backend) -> tuple[dict | None, dict]:
    """(template_identity(backend), the manifest's "tokenizer" note), remembered in the cache by the content of
    the tokenizer's files where the backend names their folder (`tokenizer_folder`: the local backend), so that an
    export that only names the tokenizer of stored rows neither loads it (~120 MB, 0.6 s) nor renders the probe.

    Remembered only from a tokenizer loaded here for the note (one loaded before may have been changed in
    memory). A backend without such a folder (a vLLM server renders the probe itself) is asked each time."""
    folder = getattr(backend, "tokenizer_folder", None)
    fresh = folder is not None and not getattr(backend, "tokenizer_loaded", True)
    key = _files_key(backend.model_id, Path(folder)) if fresh else None
    if key is not None and (known := cache.get(key)) is not None:
        return known["identity"], known["note"]
    identity = template_identity(backend)
    note = (identity or {"model_id": backend.model_id, "note": "no tokenizer here: the token columns are null"}
            ) | {"chat_template": describe_chat_template(backend)}
    if key is not None:
        cache.set(key, {"identity": identity, "note": note}, timeout=None)
    return identity, note


def _files_key(model_id: str, folder: Path) -> str:
    digest = hashlib.sha256(model_id.encode())
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name.startswith(TOKENIZER_FILES):
            digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode())
            digest.update(path.read_bytes())
    return f"tokenizer-note:{NOTE_VERSION}:{digest.hexdigest()}"


def identity_columns(identity: dict | None, *, rendered: bool = True) -> dict:
    """The IDENTITY_COLUMNS cells of a row whose ids belong to `identity` (all null for None); `rendered` False: its
    prompt ids are not what that chat template renders, so the template is not named."""
    if identity is None:
        return {field.name: None for field in IDENTITY_COLUMNS}
    return {"template_model": identity["model_id"], "tokenizer_sha256": identity["tokenizer_sha256"],
            "template_sha256": identity["chat_template_sha256"] if rendered else None}


def renders(tokenizer, messages: list[dict], tools, prompt_ids: list[int]) -> bool:
    """The tokenizer's chat template renders `messages` (training-shape dicts), generation prompt added, into
    exactly `prompt_ids`."""
    return _ids(tokenizer, messages, tools, generation=True) == list(prompt_ids)


def _serialized(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a fast tokenizer: its whole tokenizer.json
    if backend is not None:
        return backend.to_str()
    return json.dumps(tokenizer.get_vocab(), sort_keys=True)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _ids(tokenizer, messages: list[dict], tools, *, generation: bool) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation,
                                              tokenize=True, return_dict=False))


def _text(tokenizer, messages: list[dict], tools, *, generation: bool) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation,
                                         tokenize=False)


def _tokens(tokenizer, text: str) -> list[int]:
    """`text` tokenized as `apply_chat_template` tokenizes what it renders."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class _Rendered:
    """A conversation rendered and tokenized once, and the token length of any rendering that begins it.

    The length of a prefix's tokens is read off the whole conversation's token offsets, then checked by tokenizing
    only the prefix's tail: a fast tokenizer splits its input at added tokens (`<|im_start|>`, ...) before anything
    else, and tokenizes each piece on its own, so the tokens of a text up to such a token are the same whatever
    follows it. The tail runs from the last added token before the prefix's end (one that matches its own text
    exactly: no stripping, not normalized), so each check costs a turn's header, not the conversation. Wherever
    that does not settle it (no added token to start from, a slow tokenizer without offsets, a text that is not
    a prefix), the prefix is tokenized whole and compared, as before: the result is exactly the ids of
    `apply_chat_template` on the prefix, compared with the start of the conversation's."""

    def __init__(self, tokenizer, messages: list[dict], tools):
        self.tokenizer = tokenizer
        self.text = _text(tokenizer, messages, tools, generation=False)
        offsets = bool(getattr(tokenizer, "is_fast", False))
        encoded = tokenizer(self.text, add_special_tokens=False, return_offsets_mapping=offsets)
        self.ids = list(encoded["input_ids"])
        self.starts = [start for start, _ in encoded["offset_mapping"]] if offsets else None
        self.ends = [end for _, end in encoded["offset_mapping"]] if offsets else None
        self.anchors = _clean_splits(tokenizer) if offsets else {}

    def length(self, prefix: str) -> int:
        """How many tokens `prefix` (a rendering of the conversation's beginning) tokenizes to, when those tokens
        begin the conversation's; NotPrefixStable when they do not."""
        if self.starts is not None and self.text.startswith(prefix):
            end = bisect.bisect_left(self.starts, len(prefix))  # the tokens that start inside the prefix
            anchor = next((index for index in range(end - 1, -1, -1) if self.ids[index] in self.anchors), None)
            if anchor is not None and self.text[self.starts[anchor]:self.ends[anchor]] == self.anchors[
                    self.ids[anchor]] and _tokens(self.tokenizer, prefix[self.starts[anchor]:]) == self.ids[anchor:end]:
                return end
        ids = _tokens(self.tokenizer, prefix)
        if self.ids[:len(ids)] != ids:
            raise NotPrefixStable("the chat template's rendering of the conversation's beginning does not tokenize to "
                                  "the start of the whole")
        return len(ids)


def _clean_splits(tokenizer) -> dict[int, str]:
    """{id: text} of the tokenizer's added tokens that split its input exactly where their text is."""
    return {token_id: token.content for token_id, token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()
            if not (token.lstrip or token.rstrip or token.single_word or token.normalized)}


def completion_mask(tokenizer, messages: list[dict], tools, message_mask: list[int]) -> tuple[list[int], list[int]]:
    """(input_ids, completion_mask) of `messages` (training-shape dicts) under the tokenizer's chat template:
    1 on the tokens of every assistant message whose `message_mask` entry is 1, 0 elsewhere.

    The conversation is tokenized once; a masked message's bounds come from renderings of the conversation up to
    it (`_Rendered.length`), not from tokenizing them again."""
    if len(message_mask) != len(messages):
        raise ValueError(f"{len(message_mask)} mask entries for {len(messages)} messages")
    rendered = _Rendered(tokenizer, messages, tools)
    mask = [0] * len(rendered.ids)
    for index, (message, masked) in enumerate(zip(messages, message_mask, strict=True)):
        if not masked:
            continue
        if message.get("role") != "assistant":
            raise ValueError(f"message {index} is a {message.get('role')} message: only assistant messages "
                             "carry loss")
        try:
            start = rendered.length(_text(tokenizer, messages[:index], tools, generation=True)) if index else 0
            end = rendered.length(_text(tokenizer, messages[:index + 1], tools, generation=False))
        except NotPrefixStable:
            raise NotPrefixStable(f"the chat template renders message {index} differently once later messages "
                                  "follow it") from None
        mask[start:end] = [1] * (end - start)
    return rendered.ids, mask
