from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class ExportsConfig(AppConfig):
    """The export engine: record kinds, export jobs writing shards, and the trainer pull API."""

    name = "dataplatform.exports"
    label = "exports"

    def ready(self) -> None:
        # Every app declares its record kinds in an `exporters.py` module; importing it registers them.
        autodiscover_modules("exporters")
