"""A tally is a project's small table of kept figures under one name: one row per key (a state, a grade, a pair of
labels), each with a count and a sum (for means)."""

from django.db import models


class Tally(models.Model):
    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)  # what is counted: "<app>.<figure>", as registry.define names it
    key = models.CharField(max_length=300)  # one bucket of it: a state, a grade, "label a|label b"
    count = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)  # a sum beside the count, for means (0 where nothing is summed)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name", "key"], name="tally_project_name_key")]

    def __str__(self) -> str:
        return f"{self.name}[{self.key}] = {self.count}"


class TallyStart(models.Model):
    """Marks a project's tally as counted: from then on the services' `add` calls keep it. Until then `add` does
    nothing, and the first read counts it."""

    project = models.ForeignKey("accounts.Project", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    counted_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="tally_start_project_name")]
