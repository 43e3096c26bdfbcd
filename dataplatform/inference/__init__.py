"""Model backends, and the one way to get one: `backend_for(project, model=...)`.

An app asks `backend_for` for the backend serving the model its settings chose for a project (the annotation
config's, the labeler settings', an ATD run's, an AED job's; "" is the platform's default), and nothing else:
no app builds a backend or keeps its own lookup. Tests put a double in the model's place with
`override_backend`, never by patching a module's attributes. `get_backend()` is the platform's own default
(health, warm-up, the model check), which is also what `backend_for(..., model="")` answers.

One backend per process and model, built once under a lock: web requests run in threads, and a
cold-start burst (4 first requests at once) used to build 4 backends, load the model 4 times
(6.3 s) and leave two caches holding different instances of the same model.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.utils.translation import gettext

from .base import Backend, BackendError, BackendHealth, BackendUnavailable, Generation, PromptTooLong, TokenStep
from .constraints import generate_by_constraint

__all__ = ["Backend", "BackendError", "BackendHealth", "BackendUnavailable", "Generation", "PromptTooLong", "TokenStep",
           "backend_for", "override_backend", "get_backend", "build_backend", "generate_by_constraint",
           "validate_served_model_name"]

_backends: dict[str, Backend] = {}  # "" is the platform's default; other keys are model names (vLLM)
_building = threading.Lock()
_overrides: list[Backend] = []  # override_backend's, innermost last


def backend_for(project, *, model: str, base_url: str = "", api_key: str = "") -> Backend:
    """The backend that does `project`'s model work: the one serving `model` (the model the calling app's settings
    chose; "" for the platform's default), or, with `base_url`, a vLLM client of that other server (an ATD
    teacher's endpoint, which the caller has checked against its allow-list; `api_key` is its own key, never the
    platform's). Inside `override_backend`, the override, whatever the project and model.

    `model` has no default: a call that forgot the project's choice would silently use the platform's model.
    `project` (None where the work is no project's) says whose model call it is; every project of a process
    shares the backends today."""
    if _overrides:
        return _overrides[-1]
    if base_url:
        return _endpoint_backend(base_url, model, api_key)
    return _serving(model)


@contextmanager
def override_backend(backend: Backend) -> Iterator[Backend]:
    """Every `backend_for` in this process answers `backend` until the block ends: how tests put a double (or the
    session's loaded model) in the model's place (tests/conftest.py's `use_backend` fixture wraps it).

    Process-wide, not per thread: a test's live server and its streams run in other threads of this process.
    A worker or server the test starts as another process cannot see it; it builds its backend from its
    environment (MODEL_BACKEND, VLLM_BASE_URL, MODEL_NAME), as a deployment does."""
    _overrides.append(backend)
    try:
        yield backend
    finally:
        _overrides.remove(backend)


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
    """The platform's configured backend, built once per process (the local model stays in memory)."""
    from django.conf import settings

    return _the_one("", lambda: build_backend(settings.MODEL_BACKEND))


def _serving(model_name: str) -> Backend:
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


def _endpoint_backend(base_url: str, model_name: str, api_key: str) -> Backend:
    """A client of another vLLM server, built for the caller (not kept: the endpoint is the caller's setting)."""
    from django.conf import settings

    from .vllm import VllmBackend

    return VllmBackend(base_url=base_url, model=model_name, api_key=api_key, timeout=settings.VLLM_TIMEOUT_SECONDS,
                       tokenizer_dir=settings.VLLM_TOKENIZER_DIR or None)


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
