"""Test doubles shared by several test modules (each stands in for one collaborator in a unit test)."""

from dataplatform.jobs.models import Job


class RecordingProgress:
    """What a job's ProgressReporter offers a service, minus the database: the reports are kept in a list."""

    def __init__(self):
        self.job = Job(progress_total=0)
        self.reports: list[int] = []
        self.messages: list[str | None] = []

    def set_total(self, total: int) -> None:
        self.job.progress_total = total

    def report(self, done: int, *, message: str | None = None, force: bool = False) -> None:
        self.reports.append(done)
        self.messages.append(message)
