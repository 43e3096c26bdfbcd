"""Serve the embedded CPU model over vLLM's HTTP API, in this process (see dataplatform/inference/server.py).

    manage.py serve_model                      # 127.0.0.1:8001, what VLLM_BASE_URL points at by default
    manage.py serve_model --max-logprobs 2     # as `vllm serve --max-logprobs 2` (model_check then fails top-k)
    MODEL_BACKEND=vllm VLLM_TOKENIZER_DIR=var/models/SmolLM2-135M-Instruct python -m dataplatform.webserver

The key, if any, is read from VLLM_API_KEY (the same setting the client sends), never from the command line
where `ps` would show it.
"""

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dataplatform.inference.local import LocalBackend, converted_dir
from dataplatform.inference.server import MAX_LOGPROBS, build_app

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve the embedded model over vLLM's OpenAI-compatible HTTP API (the subset the platform uses)."
    requires_system_checks = []  # needs neither the database nor the broker

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument("--threads", type=int, default=0,
                            help="torch threads for the forward passes (default: torch's choice, one per core)")
        parser.add_argument("--served-model-name", default="", help="the model name clients ask for "
                            "(default: the model's own id, SmolLM2-135M-Instruct)")
        parser.add_argument("--max-logprobs", type=int, default=MAX_LOGPROBS,
                            help=f"the most `logprobs` / `prompt_logprobs` a request may ask for, as vLLM's flag "
                                 f"(default {MAX_LOGPROBS}, what docker-compose.yml starts vLLM with)")

    def handle(self, *args, host: str, port: int, threads: int, served_model_name: str, max_logprobs: int,
               **options):
        import torch
        import uvicorn

        if max_logprobs < 0:
            raise CommandError("--max-logprobs must be 0 or more.")
        if threads:
            torch.set_num_threads(threads)
        backend = LocalBackend(settings.DATA_DIR)
        backend.model  # noqa: B018  (load now: the first request should not wait for it)
        name = served_model_name or backend.model_id
        self.stdout.write(f"Serving {name} on http://{host}:{port} ({torch.get_num_threads()} torch threads). "
                          f"For exact token bytes, clients set VLLM_TOKENIZER_DIR={converted_dir(settings.DATA_DIR)}")
        app = build_app(backend, served_model_name=name, api_key=settings.VLLM_API_KEY, max_logprobs=max_logprobs)
        uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
