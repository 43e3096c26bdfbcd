from django.apps import AppConfig


class LabelerConfig(AppConfig):
    """SWE Labeler: taxonomy, SWE tasks, label assignments (built in its own issue)."""

    name = "labeler"
