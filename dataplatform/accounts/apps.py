from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "dataplatform.accounts"
    label = "accounts"
