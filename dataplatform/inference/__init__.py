"""Model backends. `get_backend()` returns this process's backend, built once from settings."""

from functools import lru_cache

from .base import Backend, BackendError, BackendHealth, BackendUnavailable, Generation, TokenStep

__all__ = ["Backend", "BackendError", "BackendHealth", "BackendUnavailable", "Generation", "TokenStep", "get_backend", "build_backend",
           "backend_for_model"]


def build_backend(name: str) -> Backend:
    from django.conf import settings

    if name == "local":
        from .local import LocalBackend

        return LocalBackend(settings.DATA_DIR)
    if name == "vllm":
        from .vllm import VllmBackend

        return VllmBackend(
            base_url=settings.VLLM_BASE_URL,
            model=settings.MODEL_NAME,
            api_key=settings.VLLM_API_KEY,
            timeout=settings.VLLM_TIMEOUT_SECONDS,
            tokenizer_dir=settings.VLLM_TOKENIZER_DIR or None,
        )
    raise BackendError(f"MODEL_BACKEND must be 'local' or 'vllm', not {name!r}.")


@lru_cache(maxsize=1)
def get_backend() -> Backend:
    """The configured backend, loaded once per process (the local model stays in memory)."""
    from django.conf import settings

    return build_backend(settings.MODEL_BACKEND)


@lru_cache(maxsize=16)
def backend_for_model(model_name: str) -> Backend:
    """The backend serving `model_name` (a project's choice); empty means the platform's default.

    vLLM can serve several models behind one URL, so each name gets its own client. The
    local backend has exactly one model: asking it for another one is a clear error.
    """
    from django.conf import settings

    default = get_backend()
    if not model_name or model_name == default.model_id:
        return default
    if settings.MODEL_BACKEND != "vllm":
        raise BackendError(f"The local backend serves only {default.model_id}, not {model_name!r}. "
                           "Clear the project's model setting, or run the platform with MODEL_BACKEND=vllm.")
    from .vllm import VllmBackend

    return VllmBackend(base_url=settings.VLLM_BASE_URL, model=model_name, api_key=settings.VLLM_API_KEY,
                       timeout=settings.VLLM_TIMEOUT_SECONDS, tokenizer_dir=settings.VLLM_TOKENIZER_DIR or None)
