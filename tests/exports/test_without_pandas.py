"""An export's process never imports pandas (exports/without_pandas.py): pyarrow would, at its first conversion of
Python values, for ~55 MB and a second of every worker. Checked in a fresh process, as a worker runs the job."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from dataplatform.exports import services
from dataplatform.jobs.models import Job, JobState

from ..worker import worker_database_url

# The child's own connection reads what the test wrote: committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]

# The worker's side: run the export jobs (none: convert a batch of rows as the ORM path does, outside an export),
# then say whether pandas was imported, and that a conversion to pandas still works afterwards.
CHILD = """
import json, sys
import django
django.setup()
import pyarrow as pa
import tests.exports.stored_kind  # registers test.stored_jobs
from dataplatform.jobs.services import execute_job
for job_id in sys.argv[1:]:
    execute_job(job_id=int(job_id))
if not sys.argv[1:]:
    pa.RecordBatch.from_pylist([{"id": 1, "kind": "k0"}])
imported = "pandas" in sys.modules
frame = pa.table({"a": [1, 2]}).to_pandas()
print(json.dumps({"pandas_imported": imported, "to_pandas": int(frame["a"].sum())}))
"""


def _child(*job_ids: int) -> dict:
    env = os.environ | {"DATABASE_URL": worker_database_url(), "DATA_DIR": str(settings.DATA_DIR),
                        "DJANGO_SETTINGS_MODULE": "dataplatform.settings"}
    result = subprocess.run([sys.executable, "-c", CHILD, *map(str, job_ids)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_values_and_a_stored_export_leave_pandas_unimported(project, members):
    for i in range(12):
        Job.objects.create(project=project, kind=f"k{i % 3}", params={"copies": 1 + i % 2},
                           state=JobState.SUCCEEDED if i % 4 else JobState.FAILED, created_by=members["admin"])
    exports = [services.create_export(project=project, user=members["curator"], publish=False,
                                      options={"kind": kind, "validation_ratio": 0.2})
               for kind in ("platform.jobs", "test.stored_jobs")]
    assert _child(*(export.job_id for export in exports)) == {"pandas_imported": False, "to_pandas": 3}
    for export in exports:
        export.refresh_from_db()
        assert export.job.state == JobState.SUCCEEDED, export.job.error
    assert [export.rows_total for export in exports] == [12, 18]


def test_outside_an_export_pyarrow_imports_pandas_at_its_first_conversion(db):
    """What the export keeps out: the same conversion, in the same kind of process, with no export running."""
    assert _child() == {"pandas_imported": True, "to_pandas": 3}
