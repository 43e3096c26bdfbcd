"""Print the backend, model id, health and a 20-token greedy sample with top-5 alternatives."""

import time

from django.core.management.base import BaseCommand, CommandError

from dataplatform.inference import BackendError, get_backend

PROMPT = "Name three primary colours."


class Command(BaseCommand):
    help = "Check the configured model backend end to end: health, a greedy sample, timings."
    requires_system_checks = []  # works without a database or broker

    def add_arguments(self, parser):
        parser.add_argument("--tokens", type=int, default=20)
        parser.add_argument("--quiet", action="store_true", help="only load the model and check health")

    def handle(self, *args, tokens: int, quiet: bool, **options):
        backend = get_backend()
        health = backend.health()
        self.stdout.write(f"backend:  {health.backend}\nmodel:    {health.model_id}\n"
                          f"health:   {'ok' if health.ok else 'DOWN'} ({health.detail})")
        if not health.ok:
            raise CommandError(f"The {health.backend} backend is not healthy: {health.detail}")
        started = time.perf_counter()
        try:
            prompt_ids = backend.chat_prompt_ids([{"role": "user", "content": PROMPT}])
            load_seconds = time.perf_counter() - started
            if quiet:
                self.stdout.write(f"ready in {load_seconds:.1f} s")
                return
            steps, first_token_at = [], None
            started = time.perf_counter()
            for step in backend.stream(prompt_ids, max_tokens=tokens, temperature=0.0, seed=0, top_k=5):
                first_token_at = first_token_at or time.perf_counter() - started
                steps.append(step)
            elapsed = time.perf_counter() - started
        except BackendError as exc:
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        ids = [step.token_id for step in steps]
        self.stdout.write(f"prompt:   {PROMPT!r} ({len(prompt_ids)} tokens with the chat template)")
        self.stdout.write(f"sample:   {backend.detokenize(ids)!r}")
        self.stdout.write("top-5 at the first position:")
        for token_id, logprob in steps[0].top[:5]:
            marker = "*" if token_id == steps[0].token_id else " "
            self.stdout.write(f"  {marker} {token_id:>6}  {logprob:8.4f}  {backend.detokenize([token_id])!r}")
        decode_rate = (len(steps) - 1) / (elapsed - first_token_at) if len(steps) > 1 else 0.0
        self.stdout.write(
            f"timings:  ready {load_seconds:.2f} s (load + template), first token {first_token_at:.3f} s, "
            f"decode {decode_rate:.1f} tok/s over {len(steps)} tokens"
        )
