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
