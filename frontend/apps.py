from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """Base templates, static assets and shared UI pieces (htmx comes from npm, see package.json)."""

    name = "frontend"
