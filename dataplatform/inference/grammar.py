"""Constrained decoding for the local backend, with xgrammar (the engine behind vLLM's structured outputs).

A constraint (a JSON schema, or a list of choices) is compiled once against the model's vocabulary into
an xgrammar `CompiledGrammar`; each generated row then gets its own `GrammarMatcher`, which at every
step says which tokens may come next (a bitmask over the vocabulary) and accepts the token picked.
Masked logits are -inf, so the model samples (or takes the argmax) among the allowed tokens only, and
the end token is allowed only where the grammar accepts the text so far.

Imported lazily by `local.py` (xgrammar and transformers cost ~0.7 s to import).
"""

import json
import threading
from collections import OrderedDict

import torch
import transformers
import xgrammar as xgr

from .base import BackendError

# The JSON grammar allows no free whitespace, compiled exactly as vLLM's xgrammar backend compiles a schema when
# the server runs with `disable_any_whitespace` (docker-compose.yml starts it so): no whitespace anywhere and
# "," and ":" as separators. The two backends then constrain a model to the same JSON (tests/inference/
# test_vllm_conformance.py compares the grammars). With any whitespace allowed (vLLM's default), a 135M model
# readily spends its whole budget on newlines inside an object and never closes it.
ANY_WHITESPACE = False
SEPARATORS = (",", ":")


def constraint_key(json_schema: dict | None = None, choice: list[str] | None = None) -> tuple[str, str] | None:
    """The cache key of a constraint: ("json", the schema as compact JSON) or ("choice", the list as JSON);
    None without one. BackendError for both at once or a malformed one.

    The key keeps the schema's own key order: the grammar writes an object's properties in the order the
    schema declares them, so two schemas that differ only in that order are two grammars."""
    if json_schema is not None and choice is not None:
        raise BackendError("json_schema and choice are exclusive: give one constraint, not both.")
    if json_schema is not None:
        if not isinstance(json_schema, dict):
            raise BackendError(f"json_schema must be a JSON schema (an object), not {type(json_schema).__name__}.")
        try:
            return "json", json.dumps(json_schema, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"json_schema is not JSON: {exc}") from exc
    if choice is not None:
        if (not isinstance(choice, list | tuple) or not choice
                or not all(isinstance(option, str) for option in choice)):
            raise BackendError("choice must be a non-empty list of strings.")
        return "choice", json.dumps(list(choice), ensure_ascii=False)
    return None


def choice_ebnf(choices: list[str]) -> str:
    """An EBNF grammar whose language is exactly `choices`, each as its bare text (no quotes added)."""
    return "root ::= " + " | ".join(_ebnf_literal(option) for option in choices)


def _ebnf_literal(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def tokenizer_info(tokenizer, *, vocab_size: int, stop_token_ids: list[int]) -> "xgr.TokenizerInfo":
    """xgrammar's view of the vocabulary (the model's `vocab_size`, its end tokens as the stop tokens).

    xgrammar reads an added special token (<|im_start|>, <repo_name>...) as its literal text, so a JSON
    string could contain one; decoding drops it (skip_special_tokens) and the text would no longer be the
    one the grammar checked. An empty entry makes xgrammar treat a token as special: never allowed."""
    detected = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    vocab = [""] * vocab_size
    for token, index in tokenizer.get_vocab().items():
        if index < vocab_size:
            vocab[index] = token
    for index, added in tokenizer.added_tokens_decoder.items():
        if added.special and index < vocab_size and index not in stop_token_ids:
            vocab[index] = ""
    return xgr.TokenizerInfo(vocab, detected.vocab_type, vocab_size=vocab_size, stop_token_ids=stop_token_ids,
                             add_prefix_space=detected.add_prefix_space)


class GrammarCache:
    """Compiled grammars by constraint key, least recently used dropped past `size`; thread-safe.

    xgrammar's own compiler cache is off: this one is the only cache, and it is bounded."""

    def __init__(self, info: "xgr.TokenizerInfo", *, size: int = 64):
        self.info, self.size = info, size
        self.compiles = self.hits = 0
        self._compiler = xgr.GrammarCompiler(info, cache_enabled=False)
        self._grammars: OrderedDict[tuple[str, str], xgr.CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._grammars)

    def get(self, key: tuple[str, str]) -> "xgr.CompiledGrammar":
        with self._lock:  # compiling takes milliseconds: one at a time, and never twice for one key
            compiled = self._grammars.get(key)
            if compiled is not None:
                self.hits += 1
                self._grammars.move_to_end(key)
                return compiled
            kind, text = key
            try:
                if kind == "json":
                    compiled = self._compiler.compile_json_schema(text, any_whitespace=ANY_WHITESPACE,
                                                               separators=SEPARATORS)
                else:
                    compiled = self._compiler.compile_grammar(choice_ebnf(json.loads(text)))
            except (RuntimeError, ValueError, TypeError) as exc:
                what = "JSON schema" if kind == "json" else "choice list"
                raise BackendError(f"The {what} cannot be compiled to a grammar: {exc}") from exc
            self.compiles += 1
            self._grammars[key] = compiled
            if len(self._grammars) > self.size:
                self._grammars.popitem(last=False)
            return compiled


class RowMatcher:
    """One row's grammar state: masks its logits before a pick, then accepts the token picked."""

    def __init__(self, compiled: "xgr.CompiledGrammar"):
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)

    def mask(self, logits: torch.Tensor) -> None:
        """Set the logits (one row, in place) of every token the grammar forbids next to -inf."""
        self.matcher.fill_next_token_bitmask(self.bitmask, 0)
        xgr.apply_token_bitmask_inplace(logits, self.bitmask[0])

    def accept(self, token_id: int) -> None:
        if not self.matcher.accept_token(int(token_id)):
            raise BackendError(f"The grammar refused token {token_id}, which it had allowed.")


class GrammarLogitsProcessor(transformers.LogitsProcessor):
    """Per-row grammars for one `model.generate` call (a new one each call): a row whose grammar is None
    is left unconstrained. Unlike `xgrammar.contrib.hf.LogitsProcessor`, which wants a grammar for every
    row, it masks only the constrained rows (`indices`), and a refused token is an error, not an assert."""

    def __init__(self, grammars: list["xgr.CompiledGrammar | None"], vocab_size: int):
        self.matchers = {row: xgr.GrammarMatcher(g) for row, g in enumerate(grammars) if g is not None}
        self.bitmask = xgr.allocate_token_bitmask(len(grammars), vocab_size)
        self.vocab_size = vocab_size
        self.started = False

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.started:  # the previous call's picks are the last column now
            last = input_ids[:, -1].tolist()
            for row, matcher in self.matchers.items():
                if not matcher.is_terminated() and not matcher.accept_token(last[row]):
                    raise BackendError(f"The grammar of row {row} refused token {last[row]}, which it had allowed.")
        self.started = True
        # A terminated row has produced its end token: the model only pads it from here on.
        active = [row for row, matcher in self.matchers.items() if not matcher.is_terminated()]
        for row in active:
            self.matchers[row].fill_next_token_bitmask(self.bitmask, row)
        if active:
            xgr.apply_token_bitmask_inplace(scores, self.bitmask, vocab_size=self.vocab_size, indices=active)
        return scores
