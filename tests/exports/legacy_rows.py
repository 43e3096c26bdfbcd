"""The old row generator of `platform.jobs` (a Python rows= kind before issue 43), kept as the oracle of its
values() kind (tests/kind_oracle.py)."""

from dataplatform.exports import exporters
from dataplatform.exports.sources import keyset_values


def jobs_rows(query):
    fields = ["id", "kind", "state", "progress_done", "progress_total", "attempts", "error", "created_by__username",
              "created_at", "started_at", "finished_at"]

    def row(values: dict) -> dict:
        values["created_by"] = values.pop("created_by__username")
        return values
    yield from keyset_values(exporters._jobs(query), fields, batch_size=query.batch_size, transform=row)
