"""The onPanda queue's reads walk an index of the project's rows, never a scan of every claim or session (issue 46):
the curator's table of latest claims, the active claims' leases, the range of kept active times the metrics' median
reads, and the latest accepted sessions the review page and the metrics list. PostgreSQL's plans, with sequential
scans and sorts priced out so that an empty test table cannot hide a missing index."""

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotate import figures, metrics, selectors
from dataplatform.tallies.models import Tally

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the plans are PostgreSQL's")]


def plan_of(query) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        return query.explain()


def test_the_curators_table_of_claims_walks_the_projects_latest(project):
    plan = plan_of(selectors.project_claims(project)[:50])
    assert "claim_project_recent" in plan and "Sort" not in plan, plan


def test_the_active_claims_are_found_by_the_one_active_claim_index(project):
    plan = plan_of(figures.active_claims(project.pk).filter(lease_expires_at__gt=timezone.now()))
    assert "one_active_claim_per_annotator" in plan, plan


def test_the_median_reads_one_minute_of_kept_times(project):
    times = Tally.objects.filter(project_id=project.pk, name=figures.ACTIVE_TIMES, key__gte=figures.time_key(0),
                                 key__lt=figures.time_key(figures.MINUTE_MICROSECONDS)).order_by("key")
    plan = plan_of(times)
    assert "tally_project_name_key" in plan and "Index Cond" in plan and "key" in plan.split("Index Cond")[1], plan


@pytest.mark.parametrize("pending", [False, True], ids=["all", "pending"])
def test_the_review_page_walks_the_projects_accepted_sessions(project, pending):
    plan = plan_of(selectors.sessions_to_review(project, pending=pending)[:26])
    assert "session_project_status" in plan and "Sort" not in plan, plan


def test_the_metrics_latest_sessions_walk_the_same_index(project):
    plan = plan_of(metrics.latest_origin_sessions(project))
    assert "session_project_status" in plan and "Sort" not in plan, plan
