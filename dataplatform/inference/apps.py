from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "dataplatform.inference"
    label = "inference"
