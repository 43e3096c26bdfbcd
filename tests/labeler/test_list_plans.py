"""Every filter the labeler's lists offer (the overview's task and trajectory lists, `GET …/labeler/tasks/` and
`…/trajectories/`) is served by an index on PostgreSQL: the review-state columns by (item, taxonomy, origin,
status), a field's value by the GIN index on the labels' values, the search by trigram indexes (migration 0012).
The plan of each page query names its index and reads no table sequentially."""

import re

import pytest
from django.db import connection, transaction
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from labeler import selectors, services
from labeler.models import Label, SweTask, Trajectory

from ..conftest import api_client_for
from .conftest import STAGE_ONE, STAGE_TWO

COMPLETE = STAGE_ONE | STAGE_TWO

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the plans and the GIN and trigram indexes are "
                                                               "PostgreSQL's")]

# The labels read by item: probed per task (an index condition on task_id), or merged in task order along an index
# that begins with it; or, for a rare state, the project's labels in that state found first (by project, taxonomy,
# origin, status).
BY_TASK = re.compile(r"(on labeler_label .*\n\s+Index Cond: \(\(?task_id = )"
                     r"|(Index (Only )?Scan (Backward )?using (label_task_review_state|labeler_label_task_id\w*|"
                     r"label_project_tasks|label_project_submitted) on labeler_label)")
BY_TRAJECTORY = re.compile(r"(on labeler_label .*\n\s+Index Cond: \(\(?trajectory_id = )|(Index (Only )?Scan "
                           r"(Backward )?using (label_trajectory_review_state|labeler_label_trajectory_id\w*|"
                           r"one_human_trajectory_label_per_reviewer|label_project_trajectories) on labeler_label)"
                           r"|(Bitmap Index Scan on (label_trajectory_review_state|labeler_label_trajectory_id\w*))")
FILTERS = {  # filter -> (query string, what its plan must show: an index's name, or a pattern)
    "state": ({"state": "auto"}, [BY_TASK]),
    "error": ({"state": "error"}, [BY_TASK]),
    "unlabeled": ({"state": "unlabeled"}, [BY_TASK]),
    "field (single)": ({"field": "scope", "value": "cross-module"}, ["label_values_path"]),
    "field (tags)": ({"field": "domain_l2", "value": "graphql-api"}, ["label_values_path"]),
    "search": ({"search": "needle"}, []),  # its index: test_the_search_is_what_the_trigram_indexes_serve
}
TASKS = 3000  # enough rows, ANALYZEd, that the planner weighs the indexes as it would on a large project


def plan_of(sql: str, *, bitmaps: bool = False, params=None) -> str:
    """The plan of `sql` with sequential scans priced out, as on a project of a million rows (the test's tables
    hold a few thousand rows, where a scan is cheaper than any index). With `bitmaps`, plain index scans too: at
    this size walking the project's own index and filtering each row costs less than a trigram index, which a
    large project reverses (measured at 100,000 tasks in the pages bench); the plan shows which index serves."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        if bitmaps:
            cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def page_query(captured, pattern: str) -> str:
    pages = [query["sql"] for query in captured.captured_queries if re.search(pattern, query["sql"])]
    assert len(pages) == 1, [query["sql"] for query in captured.captured_queries]
    return pages[0]


def assert_served(plan: str, expected: list, name) -> None:
    assert "Seq Scan" not in plan, (name, plan)
    for shown in expected:
        assert (shown.search(plan) if isinstance(shown, re.Pattern) else shown in plan), (name, shown, plan)


@pytest.fixture
def pinned(project):
    """A project of TASKS tasks (a few of them findable by "needle"), each with the model's label (a few with a
    rare scope and tag), and trajectories with labels, ANALYZEd. Written in bulk: the plans are the point here."""
    taxonomy = services.update_settings(project=project, taxonomy=services.builtin_taxonomy("swe_v1")).taxonomy
    tasks = SweTask.objects.bulk_create(SweTask(
        project=project, instance_id=f"org__{'needle' if n % 997 == 0 else 'repo'}-{n}", repo=f"org/repo{n % 50}",
        problem_statement="p", source_sha256=f"{n:064x}") for n in range(TASKS))
    runs = Trajectory.objects.bulk_create(Trajectory(
        project=project, trajectory_id=f"run-{n}", instance_id=f"org__repo-{n}", messages=[],
        source_sha256=f"{n:064x}") for n in range(TASKS))
    rare = {"scope": "cross-module", "domain_l2": ["graphql-api"]}
    Label.objects.bulk_create([Label(project=project, task=task, taxonomy=taxonomy, origin="model", status="submitted",
                                     values={**COMPLETE, **(rare if n % 499 == 0 else {})})
                               for n, task in enumerate(tasks)]
                              + [Label(project=project, trajectory=run, taxonomy=taxonomy, origin="model",
                                       status="submitted", values=COMPLETE) for run in runs])
    with connection.cursor() as cursor:
        # What autovacuum does to a settled table: the GIN indexes' pending entries merged into the index proper
        # (the planner prices a long pending list as a scan of it), and fresh statistics.
        cursor.execute("SELECT gin_clean_pending_list(indexrelid) FROM pg_index JOIN pg_class ON pg_class.oid = "
                       "indexrelid JOIN pg_am ON pg_am.oid = relam WHERE amname = 'gin' AND indrelid IN "
                       "('labeler_swetask'::regclass, 'labeler_trajectory'::regclass, 'labeler_label'::regclass)")
        cursor.execute("ANALYZE labeler_swetask, labeler_trajectory, labeler_label")
    return project


# One test per list, each filter in turn: the project of TASKS rows takes seconds to write and ANALYZE, the plans
# milliseconds, so the filters share it (a failure names the filter).
def test_task_api_filters_use_their_indexes(pinned, members):
    client = api_client_for(members["admin"])
    for name, (query, indexes) in {"none": ({}, ["swe_task_project_recent"]), **FILTERS}.items():
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/api/v1/projects/{pinned.slug}/labeler/tasks/", query).status_code == 200, name
        sql = page_query(captured, r'ORDER BY "labeler_swetask"\."created_at" DESC, "labeler_swetask"\."id" DESC')
        assert_served(plan_of(sql, bitmaps="search" in query), indexes, name)
        if not query.get("state"):  # no review-state column to compute over the project's labels
            assert "SubPlan" not in plan_of(sql), (name, plan_of(sql))


def test_task_list_page_filters_use_their_indexes(client, pinned, members):
    """A review state alone is found from the project's labels in that state, in task order (the page's ids, then
    the page by them); the other filters are the page query's own."""
    client.force_login(members["admin"])
    for name, (query, indexes) in FILTERS.items():
        query = {"q" if key == "search" else key: value for key, value in query.items()}
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("labeler-overview", args=[pinned.slug]), query).status_code == 200, name
        if query.get("state") in selectors.STATE_LABELS:
            sql = page_query(captured, r'^SELECT DISTINCT "labeler_label"\."task_id"')
            assert_served(plan_of(sql), ["label_project_tasks"], name)
            continue
        sql = page_query(captured, r'FROM "labeler_swetask" .*ORDER BY "labeler_swetask"\."id" ASC LIMIT 51')
        assert_served(plan_of(sql, bitmaps="q" in query), indexes, name)


def test_unfiltered_pages_walk_the_project_s_own_index(client, pinned, members):
    """The first and a later page of each list, unfiltered, walk the (project, id) index from the page's start: not
    the primary key, which the planner takes when the project holds most of the table and walks past every row of
    the projects before it (measured at a million tasks beside 110,000 others: 48 ms against under 1)."""
    client.force_login(members["admin"])
    later = {"after": SweTask.objects.filter(project=pinned).order_by("-id")[60].pk,
             "tafter": Trajectory.objects.filter(project=pinned).order_by("-id")[60].pk}
    for query in ({}, later):
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse("labeler-overview", args=[pinned.slug]), query).status_code == 200
        for table, index, start in (("labeler_swetask", "swe_task_project_id", query.get("after")),
                                    ("labeler_trajectory", "swe_trajectory_project_id", query.get("tafter"))):
            sql = page_query(captured, rf'FROM "{table}" WHERE .*ORDER BY "{table}"\."id" ASC LIMIT 51')
            plan = plan_of(sql)
            assert f"Index Scan using {index} on {table}" in plan, (table, plan)
            assert f"ROW(project_id, id) > ROW({pinned.pk}, {start or 0})" in plan, (table, plan)
            if start:  # the scan starts at the page, not at the project's first row
                assert f"(id > {start})" in plan, (table, plan)


def test_trajectory_filters_use_their_indexes(client, pinned, members):
    """The API's state and search filters, and the overview's trajectory list by state."""
    api = api_client_for(members["admin"])
    for query, indexes in [({"state": "reviewed"}, [BY_TRAJECTORY]), ({"search": "run-1234"}, [])]:
        with CaptureQueriesContext(connection) as captured:
            assert api.get(f"/api/v1/projects/{pinned.slug}/labeler/trajectories/", query).status_code == 200
        sql = page_query(captured,
                         r'ORDER BY "labeler_trajectory"\."created_at" DESC, "labeler_trajectory"\."id" DESC')
        assert_served(plan_of(sql, bitmaps="search" in query), indexes, query)
    client.force_login(members["admin"])
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("labeler-overview", args=[pinned.slug]), {"tstate": "auto"}).status_code == 200
    sql = page_query(captured, r'^SELECT DISTINCT "labeler_label"\."trajectory_id"')
    assert_served(plan_of(sql), ["label_project_trajectories"], "tstate")


def test_the_search_is_what_the_trigram_indexes_serve(pinned):
    """The lists search with Django's icontains (UPPER(column::text) LIKE UPPER(…)), the expression the trigram
    indexes hold. Within one project of a few thousand rows the planner rightly filters the project's own rows
    instead (the page plans above); across the table, as in a large project, it reads the trigram indexes."""
    for model, fields, indexes in [
        (SweTask, ("instance_id", "repo"), ("swe_task_instance_trgm", "swe_task_repo_trgm")),
        (Trajectory, ("trajectory_id", "instance_id"), ("swe_trajectory_id_trgm", "swe_trajectory_instance_trgm")),
    ]:
        search = Q(**{f"{fields[0]}__icontains": "needle"}) | Q(**{f"{fields[1]}__icontains": "needle"})
        sql, params = model.objects.filter(search).values("id").query.sql_with_params()
        plan = plan_of(sql, bitmaps=True, params=params)
        assert "Seq Scan" not in plan and all(index in plan for index in indexes), (model, plan)
