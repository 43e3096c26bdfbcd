"""The data of bench/kinds_bench.py at a tiny size: a seed filled through the services (AED's test corpus, job
history), copied in SQL into a project with every key moved to the copy's own rows, exported, and the exported rows
checked against the live derivation (a changed row is caught)."""

import sys
from pathlib import Path

import pytest

from corpora.aed.models import Case, Proposal, Replay, ReplayRun, Trace
from dataplatform.exports.registry import get_kind
from dataplatform.jobs.models import Job
from labeler.models import FinalLabel, LabelEvent

from ..exporting import export_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' helpers
import kinds_data  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the bench grows its data with PostgreSQL's SQL")]

COPIES = 3


@pytest.fixture
def user():
    return kinds_data.bench_user()


def test_every_shipped_kind_has_its_workflow_and_no_other():
    names = [kind.name for kind in kinds_data.shipped_kinds()]
    assert "platform.jobs" in names and "aed.recovery" in names and "onpanda.panda_json" in names
    assert {kinds_data.workflow_of(get_kind(name)).name for name in names} == set(kinds_data.WORKFLOWS)
    assert kinds_data.group_copies([10, 12, 40, 100]) == {10: 12, 12: 12, 40: 40, 100: 100}


def test_copies_keep_their_keys_and_export_the_rows_of_the_live_derivation(user, export_storage_in_tmp):
    workflow = kinds_data.WORKFLOWS["aed"]
    seed = kinds_data.ensure_seed(workflow, user, with_model=False)
    kind = get_kind("aed.pairs")
    per_copy = kinds_data.rows_per_copy(kind, seed)
    assert per_copy > 0
    target, _ = kinds_data.project_for("kb-aed-test", user)
    written = kinds_data.replicate(workflow, seed, target, COPIES)

    seed_cases = Case.objects.filter(trace__project=seed).count()
    assert written["corpora_case"] == COPIES * seed_cases == Case.objects.filter(trace__project=target).count()
    # Every copied run hangs from a copied replay, proposal, case and trace of the target, not from the seed's.
    runs = ReplayRun.objects.filter(replay__proposal__case__trace__project=target)
    assert runs.count() == COPIES * ReplayRun.objects.filter(replay__proposal__case__trace__project=seed).count()
    assert not Replay.objects.filter(proposal__case__trace__project=seed, runs__in=runs).exists()
    assert Proposal.objects.filter(case__trace__project=target).count() == COPIES * Proposal.objects.filter(
        case__trace__project=seed).count()
    trace_ids = list(Trace.objects.filter(project=target).values_list("trace_id", flat=True))
    assert len(set(trace_ids)) == len(trace_ids)  # unique in the project: each copy's ids carry its number

    export, rows = export_rows(target, user, export_storage_in_tmp, kind.name, format="parquet")
    assert len(rows) == COPIES * per_copy
    assert kinds_data.verify_export(kind, export, sample=50).startswith("yes")
    live = kinds_data.first_live_rows(kind, kinds_data.query_for(kind, target, data_version=export.data_version), 5)
    changed = [{**live[0], "diagnosis": live[0]["diagnosis"] + " (changed)"}]
    assert kinds_data.compare(kind, rows, changed) == [f"row id {live[0]['id']} differs from the live derivation"]


# Committed rows: platform.jobs is read through ADBC on PostgreSQL, on a connection of its own.
@pytest.mark.django_db(transaction=True)
def test_the_job_history_grows_by_copies(user, export_storage_in_tmp):
    workflow = kinds_data.WORKFLOWS["jobs"]
    seed = kinds_data.ensure_seed(workflow, user)
    kind = get_kind("platform.jobs")
    assert kinds_data.rows_per_copy(kind, seed) == 3  # two exports run, one cancelled
    target, _ = kinds_data.project_for("kb-jobs-test", user)
    kinds_data.replicate(workflow, seed, target, COPIES)
    assert Job.objects.filter(project=target).count() == COPIES * 3
    export, rows = export_rows(target, user, export_storage_in_tmp, kind.name, format="parquet")
    assert len(rows) == COPIES * 3
    # The live derivation also gives the export's own job, finished since: no difference for a kind not append-only.
    assert kinds_data.verify_export(kind, export, sample=10) == "yes (9 rows)"


# Committed rows: on PostgreSQL the engine reads stored rows through ADBC, on a connection of its own.
@pytest.mark.django_db(transaction=True)
def test_a_stored_kind_is_checked_against_the_engine_s_live_rows(user, export_storage_in_tmp):
    from dataplatform.jobs.services import enqueue_job

    from ..exports.stored_kind import STORED_JOBS

    project, _ = kinds_data.project_for("kb-stored-test", user)
    for _ in range(3):
        enqueue_job(project=project, kind="demo.seed", params={"started_at": 1.0}, user=user, publish=False)
    query = kinds_data.query_for(STORED_JOBS, project)
    assert len(list(kinds_data.live_rows(STORED_JOBS, query, sources=2))) == 2  # the first two sources' rows
    export, rows = export_rows(project, user, export_storage_in_tmp, STORED_JOBS.name, format="parquet")
    assert len(rows) == 3 and kinds_data.verify_export(STORED_JOBS, export, sample=10) == "yes (3 rows)"


def test_rows_that_share_an_id_are_each_found_among_the_exported_rows_of_that_id():
    import pyarrow as pa

    from dataplatform.exports.registry import ExportKind

    kind = ExportKind(name="bench.shared_ids", version=1, schema=pa.schema([("id", pa.string()), ("run", pa.int64())]),
                      label="", data_version=lambda project: "", group="case", group_by=("id",),
                      rows=lambda query: iter(()), append_only=True)
    exported = [{"id": "case-1", "run": 1}, {"id": "case-1", "run": 2}]
    assert kinds_data.compare(kind, exported, [{"id": "case-1", "run": 1}, {"id": "case-1", "run": 2}]) == []
    assert kinds_data.compare(kind, exported, [{"id": "case-1", "run": 3}]) == [
        "row id case-1 differs from the live derivation"]


def test_swe_copies_hold_their_final_labels_on_their_own_events(user):
    """A final label holds from a label event (an id, not a key): a copy's must name the copy's events, or a copy's
    tasks read as unlabeled at its data version."""
    workflow = kinds_data.WORKFLOWS["swe"]
    seed = kinds_data.ensure_seed(workflow, user, with_model=False)
    kind = get_kind("swe.pooled")  # the labeled tasks only
    per_copy = kinds_data.rows_per_copy(kind, seed)
    assert per_copy > 0
    target, _ = kinds_data.project_for("kb-swe-test", user)
    written = kinds_data.replicate(workflow, seed, target, COPIES)
    assert written["labeler_finallabel"] == COPIES * FinalLabel.objects.filter(task__project=seed).count()
    events = set(LabelEvent.objects.filter(label__task__project=target).values_list("id", flat=True))
    assert set(FinalLabel.objects.filter(task__project=target).values_list("since_event", flat=True)) <= events
    rows = list(kinds_data.live_rows(kind, kinds_data.query_for(kind, target)))
    assert len(rows) == COPIES * per_copy
