from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobsConfig(AppConfig):
    name = "dataplatform.jobs"
    label = "jobs"

    def ready(self) -> None:
        # Every app may declare job kinds in a `job_kinds.py` module; importing it registers them.
        autodiscover_modules("job_kinds")
