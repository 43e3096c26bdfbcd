from django.apps import AppConfig


class TalliesConfig(AppConfig):
    """Kept counts and sums per project, read by dashboards instead of recounts."""

    name = "dataplatform.tallies"
    label = "tallies"
