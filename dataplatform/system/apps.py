from django.apps import AppConfig


class SystemConfig(AppConfig):
    """Health of the platform's services: database, broker, workers, model backend."""

    name = "dataplatform.system"
    label = "system"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the start-up checks)
