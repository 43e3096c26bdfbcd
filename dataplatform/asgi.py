import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")
application = get_asgi_application()


def _warm_up() -> None:
    """Pay each server process's one-off costs at start, not in some user's request: with several uvicorn
    workers, every process would otherwise make its first users wait (the load bench saw seconds)."""
    from django.conf import settings
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  imports the URLconf, and with it every view and DRF
    if settings.MODEL_BACKEND == "vllm":
        from dataplatform.inference import get_backend

        get_backend().load_tokenizer()  # the copy of the served model's tokenizer, if VLLM_TOKENIZER_DIR is set


_warm_up()
