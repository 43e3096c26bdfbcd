"""The model backend (the local CPU model or a vLLM server), and the other servers a job may call."""

import os

from .env import env_float, env_list, env_str, env_url

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
VLLM_TIMEOUT_SECONDS = env_float("VLLM_TIMEOUT_SECONDS", 60.0)
# Optional local tokenizer directory for the vllm backend: exact token bytes for display.
VLLM_TOKENIZER_DIR = env_str("VLLM_TOKENIZER_DIR")
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
