"""The API's cursor pages (dataplatform/pagination.py) read one page of rows through an index that serves their
order, (project, -created_at, -id), whatever the project's size: the plan PostgreSQL makes for each list's page query
walks that index instead of reading and sorting the whole project."""

import re

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from .conftest import api_client_for

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the plans are PostgreSQL's")]

LISTS = {  # the list API -> the index its page query must walk
    "labeler/tasks/": "swe_task_project_recent",
    "labeler/trajectories/": "swe_trajectory_recent",
    "aed/traces/": "trace_project_recent",
    "atd/prompts/": "atd_prompt_project_recent",
    "atd/runs/": "atd_run_project_recent",
    "atd/selections/": "atd_selection_project_recent",
    "jobs/": "job_project_recent",
    "exports/": "export_project_recent",
}


def page_query(captured) -> str:
    pages = [query["sql"] for query in captured.captured_queries
             if re.search(r'ORDER BY "\w+"\."created_at" DESC, "\w+"\."id" DESC LIMIT \d+$', query["sql"])]
    assert len(pages) == 1, [query["sql"] for query in captured.captured_queries]
    return pages[0]


@pytest.mark.parametrize("path, index", LISTS.items(), ids=list(LISTS))
def test_each_cursor_page_walks_its_index(project, members, path, index):
    client = api_client_for(members["admin"])
    with CaptureQueriesContext(connection) as captured:
        assert client.get(f"/api/v1/projects/{project.slug}/{path}").status_code == 200
    # The test's tables hold a few rows, where a scan is cheaper than any index: forbid it, as a project of a
    # million rows would (a plan that needs a sort of the project still sorts, whatever the setting).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {page_query(captured)}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"using {index}" in plan, plan
    top = plan.split("SubPlan")[0]  # the page itself, not the subqueries of its columns
    assert "Sort" not in top and "Seq Scan" not in top, plan
