from django.apps import AppConfig


class AuditConfig(AppConfig):
    """An append-only log of admin actions, exports and API token use."""

    name = "dataplatform.audit"
    label = "audit"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (records Django admin changes)
