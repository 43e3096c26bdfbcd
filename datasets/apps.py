from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    """Curated corpora: AED error cases and replays, ATD near-tie prompts (built in their own issues)."""

    name = "datasets"
