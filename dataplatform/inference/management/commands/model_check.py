"""Print the backend, model id and health, a 20-token greedy sample with top-5 alternatives and its timings, then what
the platform needs of the model server (capabilities.py: one PASS or FAIL line each, with the fix for a FAIL). Exits
non-zero when the backend is down, the sample fails or a capability fails."""

import time

from django.core.management.base import BaseCommand, CommandError

from dataplatform.inference import BackendError, backend_for
from dataplatform.inference.capabilities import LARGEST_TOP_K, capability_report

PROMPT = "Name three primary colours."


class Command(BaseCommand):
    help = ("Check the configured model backend end to end: health, a greedy sample, timings, and the capabilities "
            "the platform needs (one PASS or FAIL line each, with its fix).")
    requires_system_checks = []  # works without a database or broker

    def add_arguments(self, parser):
        parser.add_argument("--tokens", type=int, default=20)
        parser.add_argument("--quiet", action="store_true", help="only load the model and check health")
        parser.add_argument("--top-k", type=int, default=LARGEST_TOP_K,
                            help=f"the top-k logprobs to ask for: the largest your projects use (default "
                                 f"{LARGEST_TOP_K}, the most a project may set); the sample shows at most 5")

    def handle(self, *args, tokens: int, quiet: bool, top_k: int, **options):
        if top_k < 1:
            raise CommandError("--top-k must be at least 1.")
        backend = backend_for(None, model="")  # the platform's default backend
        health = backend.health()
        self.stdout.write(f"backend:  {health.backend}\nmodel:    {health.model_id}\n"
                          f"health:   {'ok' if health.ok else 'DOWN'} ({health.detail})")
        if quiet:
            if not health.ok:
                raise CommandError(f"The {health.backend} backend is not healthy: {health.detail}")
            started = time.perf_counter()
            try:
                backend.chat_prompt_ids([{"role": "user", "content": PROMPT}])
            except BackendError as exc:
                raise CommandError(f"{type(exc).__name__}: {exc}") from exc
            self.stdout.write(f"ready in {time.perf_counter() - started:.1f} s")
            return
        problems = []
        if health.ok:
            try:
                self._sample(backend, tokens, min(5, top_k))
            except BackendError as exc:
                self.stdout.write(f"sample:   failed: {type(exc).__name__}: {exc}")
                problems.append("the sample failed")
        else:
            self.stdout.write("sample:   skipped: the backend is down")
            problems.append("the backend is down")
        # Every capability is checked even when the sample failed: its lines say why, and what to change.
        whose = "the vLLM server's" if backend.name == "vllm" else "the embedded model's (the checks that apply to it)"
        self.stdout.write(f"capabilities, {whose}, with top-{top_k}:")
        report = capability_report(backend, top_k=top_k)
        for capability in report.capabilities:
            self.stdout.write(f"  {capability.line()}")
        if failures := report.failures:
            problems.append(f"{len(failures)} of {len(report.capabilities)} capabilities fail "
                            f"({', '.join(failure.name for failure in failures)}); fix them as each FAIL line says")
        if problems:
            raise CommandError(f"{'; '.join(problems)}. Run model_check again once fixed.")

    def _sample(self, backend, tokens: int, top_k: int) -> None:
        started = time.perf_counter()
        prompt_ids = backend.chat_prompt_ids([{"role": "user", "content": PROMPT}])
        load_seconds = time.perf_counter() - started
        steps, first_token_at = [], None
        started = time.perf_counter()
        for step in backend.stream(prompt_ids, max_tokens=tokens, temperature=0.0, seed=0, top_k=top_k):
            first_token_at = first_token_at or time.perf_counter() - started
            steps.append(step)
        elapsed = time.perf_counter() - started
        ids = [step.token_id for step in steps]
        self.stdout.write(f"prompt:   {PROMPT!r} ({len(prompt_ids)} tokens with the chat template)")
        self.stdout.write(f"sample:   {backend.detokenize(ids)!r}")
        self.stdout.write(f"top-{top_k} at the first position:")
        for token_id, logprob in steps[0].top[:top_k]:
            marker = "*" if token_id == steps[0].token_id else " "
            self.stdout.write(f"  {marker} {token_id:>6}  {logprob:8.4f}  {backend.detokenize([token_id])!r}")
        decode_rate = (len(steps) - 1) / (elapsed - first_token_at) if len(steps) > 1 else 0.0
        self.stdout.write(
            f"timings:  ready {load_seconds:.2f} s (load + template), first token {first_token_at:.3f} s, "
            f"decode {decode_rate:.1f} tok/s over {len(steps)} tokens"
        )
