from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo project `make run` fills. An app so that its job kind is found like every app's (job_kinds.py),
    its command lives with it, and its home-page fragment has a template tag library: nothing below it imports it."""

    name = "dataplatform.demo"
    label = "demo"
