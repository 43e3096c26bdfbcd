"""Running an export end to end inside a test, as the `export` command does, and reading its shards back."""

import json

import pyarrow.parquet as pq

from dataplatform.exports import services as export_services
from dataplatform.exports.registry import get_kind
from dataplatform.jobs.models import JobState
from dataplatform.jobs.services import execute_job


def export_rows(project, user, storage_root, kind: str, **options) -> tuple:
    """Export `project` with the engine and run the job inline; returns (export, rows read back from its shards)."""
    # publish=False: nothing is sent to a worker; this test runs the job itself, as the `export` command does.
    export = export_services.create_export(project=project, user=user, options={"kind": kind, **options},
                                           publish=False)
    execute_job(job_id=export.job_id)
    export.refresh_from_db()
    export.job.refresh_from_db()
    assert export.job.state == JobState.SUCCEEDED, export.job.error
    tables = [pq.read_table(storage_root / export.location / shard["name"]) for shard in export.manifest["shards"]]
    for table in tables:
        assert table.schema.equals(get_kind(kind).schema)
    return export, [row for table in tables for row in table.to_pylist()]


def chat_cell(messages: list[dict]) -> list[dict]:
    """A chat cell as a trainer loads it (`datasets`, then TRL's `remove_none_values`): each message without the
    struct's null fields, its tool calls parsed from their JSON."""
    return [{key: [json.loads(call) for call in value] if key == "tool_calls" else value
             for key, value in message.items() if value is not None} for message in messages]


def rows_by_split(export, storage_root) -> dict[str, list[dict]]:
    """The rows of a succeeded export's Parquet shards, by the split the manifest names for each shard."""
    by_split: dict[str, list[dict]] = {"train": [], "validation": []}
    for shard in export.manifest["shards"]:
        by_split[shard["split"]] += pq.read_table(storage_root / export.location / shard["name"]).to_pylist()
    return by_split


def groups_by_split(export, storage_root, group_by: tuple[str, ...]) -> dict[str, set[str]]:
    """The group keys (the first of `group_by` that is neither null nor empty, as text) each split holds."""
    def key(row):
        return next((str(row[name]) for name in group_by if row[name] not in (None, "")), "")
    return {split: {key(row) for row in rows} for split, rows in rows_by_split(export, storage_root).items()}
