"""The model backend (the local CPU model or a vLLM server), and the other servers a job may call."""

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
