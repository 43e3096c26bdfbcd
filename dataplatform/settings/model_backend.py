"""The model backend (the local CPU model or a vLLM server), and the other servers a job may call."""

import os

from django.core.exceptions import ImproperlyConfigured

from .env import env_float, env_int, env_list, env_str, env_url

MODEL_BACKEND = env_str("MODEL_BACKEND", "local")  # "local" | "vllm"
MODEL_NAME = env_str("MODEL_NAME")  # vllm: the served model; empty = first of /v1/models
VLLM_BASE_URL = env_url("VLLM_BASE_URL", "http://127.0.0.1:8001")
VLLM_API_KEY = env_str("VLLM_API_KEY")
# ATD teachers on other vLLM servers: only these base URLs may be named by a run (no open
# server-side requests to addresses a curator types), and they get their own key.
ATD_TEACHER_ENDPOINTS = env_list("ATD_TEACHER_ENDPOINTS")
ATD_TEACHER_API_KEY = env_str("ATD_TEACHER_API_KEY")
# AED replays on the `webhook` runner: only these URLs may be named (dataplatform/outbound.py).
AED_REPLAY_WEBHOOKS = env_list("AED_REPLAY_WEBHOOKS")
# What a replay may ask of such a call (corpora/aed/runners.py, webhook_call): a timeout of 0.1 s up to this,
# at most this many headers, each name and value together at most this many characters.
AED_REPLAY_WEBHOOK_MAX_TIMEOUT_SECONDS = env_float("AED_REPLAY_WEBHOOK_MAX_TIMEOUT_SECONDS", 300.0)
AED_REPLAY_WEBHOOK_MAX_HEADERS = env_int("AED_REPLAY_WEBHOOK_MAX_HEADERS", 20)
AED_REPLAY_WEBHOOK_MAX_HEADER_CHARS = env_int("AED_REPLAY_WEBHOOK_MAX_HEADER_CHARS", 8192)
VLLM_TIMEOUT_SECONDS = env_float("VLLM_TIMEOUT_SECONDS", 60.0)
# Batched rollouts (VllmBackend.rollouts): at most this many /v1/completions requests in flight from one call,
# one prompt each; vLLM schedules them together (continuous batching), so fewer leave its slots idle.
VLLM_MAX_CONCURRENCY = env_int("VLLM_MAX_CONCURRENCY", 64)
# Each of those requests is retried this many times when vLLM is unavailable (refused, timed out, 5xx),
# after 1x, 2x, 4x ... the backoff: short, for a blip amid many requests in flight. A longer outage fails the
# request, and the job's own retries (JOB_MAX_RETRIES, JOB_RETRY_BACKOFF_SECONDS) take over.
VLLM_REQUEST_RETRIES = env_int("VLLM_REQUEST_RETRIES", 3)
VLLM_RETRY_BACKOFF_SECONDS = env_float("VLLM_RETRY_BACKOFF_SECONDS", 1.0)
if VLLM_MAX_CONCURRENCY < 1 or VLLM_REQUEST_RETRIES < 0:
    raise ImproperlyConfigured("VLLM_MAX_CONCURRENCY must be at least 1 and VLLM_REQUEST_RETRIES at least 0.")
# Optional local tokenizer directory for the vllm backend: exact token bytes for display.
VLLM_TOKENIZER_DIR = env_str("VLLM_TOKENIZER_DIR")
# Every model call has a token budget (dataplatform/inference/budget.py): prompt + max_tokens must fit the model's
# context, max_position_embeddings (local) or vLLM's max_model_len, or this many tokens when set lower (0: the
# model's own). A prompt over it is refused (PromptTooLong, 400) before any forward pass.
MODEL_MAX_CONTEXT_TOKENS = env_int("MODEL_MAX_CONTEXT_TOKENS", 0)
# onPanda: at most this many tokens per stream request (annotate/streaming.py). With the local backend each token is
# a forward pass inside the web process (~24 tok/s on 2 cores): 1,024 keep one request under a minute or so; a
# response that reaches it ends with `length`, and "continue generating" goes on from there.
ANNOTATE_STREAM_MAX_TOKENS = env_int("ANNOTATE_STREAM_MAX_TOKENS", 1024)
# A streaming node whose stream showed no sign of life for this long (a killed worker) may be streamed again.
ANNOTATE_STREAM_LEASE_SECONDS = env_int("ANNOTATE_STREAM_LEASE_SECONDS", 60)
if MODEL_MAX_CONTEXT_TOKENS < 0 or ANNOTATE_STREAM_MAX_TOKENS < 1 or ANNOTATE_STREAM_LEASE_SECONDS < 1:
    raise ImproperlyConfigured("MODEL_MAX_CONTEXT_TOKENS must be at least 0, ANNOTATE_STREAM_MAX_TOKENS and "
                               "ANNOTATE_STREAM_LEASE_SECONDS at least 1.")
# How the local model's OpenMP threads (torch's CPU kernels run on libgomp) wait between the parallel regions
# of a forward pass: asleep, in every process of the platform, unless OMP_WAIT_POLICY is set. Set here since
# libgomp reads it once, when torch loads, and every process reads its settings before that.
# libgomp's own default spins ~3 ms first, but only while no more threads than cores have used OpenMP in
# the process, and under uvicorn every request thread that runs a forward pass counts: the web processes
# waited asleep while a bench, a worker or a fresh process spun, and the same first token took 30-45 ms
# longer in the web (2 cores, 50-token prefix: 214 against 171 ms; bench/continuation_bench.py). Spinning
# wins only on an idle machine: beside one other busy process a spinning pass took seconds instead of
# ~0.3 s. OMP_WAIT_POLICY=ACTIVE where the model has the machine to itself.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
