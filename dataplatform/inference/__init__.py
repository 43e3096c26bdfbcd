"""Model backends. `get_backend()` returns this process's backend, built once from settings;
`backend_for_model(name)` the one serving a project's chosen model.

One backend per process and model, built once under a lock: web requests run in threads, and a
cold-start burst (4 first requests at once) used to build 4 backends, load the model 4 times
(6.3 s) and leave two caches holding different instances of the same model.
"""

import threading

from django.utils.translation import gettext

from .base import Backend, BackendError, BackendHealth, BackendUnavailable, Generation, PromptTooLong, TokenStep

__all__ = ["Backend", "BackendError", "BackendHealth", "BackendUnavailable", "Generation", "PromptTooLong", "TokenStep",
           "get_backend", "build_backend", "backend_for_model", "validate_served_model_name"]

_backends: dict[str, Backend] = {}  # "" is the platform's default; other keys are model names (vLLM)
_building = threading.Lock()


def build_backend(name: str, model: str | None = None) -> Backend:
    """A new backend of kind `name` ("local" or "vllm"); `model` overrides MODEL_NAME for vLLM."""
    from django.conf import settings

    if name == "local":
        from .local import LocalBackend

        return LocalBackend(settings.DATA_DIR)
    if name == "vllm":
        from .vllm import VllmBackend

        return VllmBackend(
            base_url=settings.VLLM_BASE_URL,
            model=settings.MODEL_NAME if model is None else model,
            api_key=settings.VLLM_API_KEY,
            timeout=settings.VLLM_TIMEOUT_SECONDS,
            tokenizer_dir=settings.VLLM_TOKENIZER_DIR or None,
        )
    raise BackendError(gettext("MODEL_BACKEND must be 'local' or 'vllm', not %(name)s.") % {"name": repr(name)})


def _the_one(key: str, build) -> Backend:
    backend = _backends.get(key)  # no lock once it exists: the hot path of every model call
    if backend is None:
        with _building:
            backend = _backends.get(key)
            if backend is None:
                backend = _backends[key] = build()
    return backend


def get_backend() -> Backend:
    """The configured backend, built once per process (the local model stays in memory)."""
    from django.conf import settings

    return _the_one("", lambda: build_backend(settings.MODEL_BACKEND))


def backend_for_model(model_name: str) -> Backend:
    """The backend serving `model_name` (a project's choice); empty means the platform's default.

    vLLM can serve several models behind one URL, so each name gets its own client. The
    local backend has exactly one model: asking it for another one is a clear error.
    """
    from django.conf import settings

    default = get_backend()
    if not model_name:
        return default
    if settings.MODEL_BACKEND != "vllm":
        if model_name == default.model_id:
            return default
        raise BackendError(gettext("The local backend serves only %(model)s, not %(name)s. Clear the project's "
                                   "model setting, or run the platform with MODEL_BACKEND=vllm.")
                           % {"model": default.model_id, "name": repr(model_name)})
    if model_name == settings.MODEL_NAME:  # the default's own model: the same client
        return default
    return _the_one(model_name, lambda: build_backend("vllm", model=model_name))


def validate_served_model_name(model_name: str) -> None:
    """A project's model setting must name a model the backend serves, or be empty (the default): saved
    unchecked, a wrong name broke every later model call of the project. Asks the backend now (vLLM:
    GET /v1/models); an unreachable one raises BackendUnavailable, which answers 503."""
    from django.core.exceptions import ValidationError

    if not model_name:
        return
    served = get_backend().served_models()
    if model_name not in served:
        raise ValidationError(gettext("%(name)s is not served by the model backend, which serves: %(served)s. "
                                      "Leave it empty for the platform's default.")
                              % {"name": repr(model_name), "served": ", ".join(served)})
