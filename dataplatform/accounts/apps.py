from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "dataplatform.accounts"
    label = "accounts"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the token scheme with drf-spectacular)
