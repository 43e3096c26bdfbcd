from django.apps import AppConfig
from django.db.models.signals import post_migrate

from dataplatform.accounts.signals import project_created


class TalliesConfig(AppConfig):
    """Kept counts and sums per project, read by dashboards instead of recounts."""

    name = "dataplatform.tallies"
    label = "tallies"

    def ready(self):
        post_migrate.connect(_queue_counts_after_migrate, sender=self)
        project_created.connect(_count_from_birth)


def _count_from_birth(project, **kwargs):
    """A project just made by the service keeps its figures from its first change (services.start_new_project)."""
    from .services import start_new_project

    start_new_project(project.pk)


def _queue_counts_after_migrate(using, **kwargs):
    """After migrate, a worker counts the kept figures of the projects made before a tally existed (an upgrade),
    instead of the first page that reads them (a web request, under its statement timeout)."""
    from .job_kinds import queue_counts

    if using == "default":
        queue_counts()
