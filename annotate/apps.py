from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    """onPanda locate-correct-continue annotation (built in its own issue)."""

    name = "annotate"
