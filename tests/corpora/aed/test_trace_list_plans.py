"""Each filter of the AED traces list, on the page (keyset by id) and on the API (cursor by created_at, id), reads one
page of rows through an index of its own, not a scan or a sort of the project's traces; the grade filter finds a
trace's cases through an index."""

import json
import re

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from corpora.aed import importers
from corpora.aed.models import Trace
from tests.calc_traces import make_demo_trace
from tests.conftest import api_client_for

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only("the plans are PostgreSQL's")]

FILTERS = {"environment": "env", "harness": "harness", "policy_model": "model"}


@pytest.fixture
def listed_traces(project):
    records = [make_demo_trace("1 + 1", ["answer 2"], trace_id=f"t-{i}", policy_model=f"m{i % 2}") | {"harness": "h"}
               for i in range(4)]
    assert importers.import_traces(project=project, lines=[json.dumps(r) for r in records]).ok
    # Statistics as a real project's: many traces, few with each filter's value (else the planner may walk the
    # project's traces by id with the filter as a filter, which costs the same on four rows).
    fields = [field.column for field in Trace._meta.concrete_fields if field.column not in ("id", "trace_id", *FILTERS)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO corpora_trace ({', '.join(fields)}, trace_id, {', '.join(FILTERS)}) "
            f"SELECT {', '.join(fields)}, trace_id || '-copy-' || n, {', '.join(f'{name} || n' for name in FILTERS)} "
            "FROM corpora_trace, generate_series(1, 100) AS n WHERE project_id = %s", [project.pk])
        cursor.execute("ANALYZE corpora_trace")


def plan_of(captured, pattern: str) -> str:
    pages = [query["sql"] for query in captured.captured_queries if re.search(pattern, query["sql"])]
    assert len(pages) == 1, [query["sql"] for query in captured.captured_queries]
    # A few rows, where a scan is cheaper than any index: forbid it, as a project of a million traces would.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {pages[0]}")
        return "\n".join(row[0] for row in cursor.fetchall())


def values(field: str) -> str:
    return {"environment": "calc-v1", "harness": "h", "policy_model": "m1"}[field]


@pytest.mark.parametrize("field", FILTERS)
def test_the_api_filters_walk_their_index(project, members, listed_traces, field):
    client = api_client_for(members["curator"])
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/api/v1/projects/{project.slug}/aed/traces/", {field: values(field)})
    assert response.status_code == 200 and response.json()["results"]
    plan = plan_of(captured, r'ORDER BY "\w+"\."created_at" DESC, "\w+"\."id" DESC LIMIT \d+$')
    assert f"using trace_project_{FILTERS[field]}_recent" in plan, plan
    assert "Sort" not in plan and "Seq Scan" not in plan, plan


@pytest.mark.parametrize("field", FILTERS)
def test_the_page_filters_walk_their_index(client, project, members, listed_traces, field):
    client.force_login(members["curator"])
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("aed-overview", args=[project.slug]), {field: values(field)})
    assert response.status_code == 200 and b"t-1" in response.content
    plan = plan_of(captured, r'FROM "corpora_trace" .*ORDER BY "corpora_trace"\."id" ASC LIMIT \d+$')
    assert f"using trace_project_{FILTERS[field]}_id" in plan, plan
    assert "Sort" not in plan and "Seq Scan" not in plan, plan


def test_the_grade_filter_finds_cases_by_trace_and_grade(client, project, members, listed_traces):
    client.force_login(members["curator"])
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("aed-overview", args=[project.slug]), {"grade": "A"}).status_code == 200
    plan = plan_of(captured, r'FROM "corpora_trace" .*ORDER BY "corpora_trace"\."id" ASC LIMIT \d+$')
    # The cases through an index: (trace, grade), or the trace's own index with the grade as a filter (a trace has
    # a case or two). Which one, and how it is joined, follows the table's statistics, which on a few rows the other
    # tests leave as they happen to.
    assert "case_trace_grade" in plan or "corpora_case_trace_id" in plan, plan
    assert "Seq Scan" not in plan, plan


def test_the_unfiltered_page_walks_the_projects_traces_by_id(client, project, other_project, members, listed_traces):
    fields = [field.column for field in Trace._meta.concrete_fields if field.column not in ("id", "project_id",
                                                                                             "trace_id")]
    with connection.cursor() as cursor:  # a larger project beside it, as most traces of the table
        cursor.execute(f"INSERT INTO corpora_trace (project_id, trace_id, {', '.join(fields)}) SELECT %s, "
                       f"trace_id || '-' || n, {', '.join(fields)} FROM corpora_trace, generate_series(1, 10) AS n "
                       "WHERE project_id = %s", [other_project.pk, project.pk])
        cursor.execute("ANALYZE corpora_trace")
    client.force_login(members["curator"])
    with CaptureQueriesContext(connection) as captured:
        assert client.get(reverse("aed-overview", args=[project.slug])).status_code == 200
    plan = plan_of(captured, r'FROM "corpora_trace" .*ORDER BY "corpora_trace"\."id" ASC LIMIT \d+$')
    # Not the primary key with the project as a filter: that walks every older project's traces first.
    assert "using trace_project_id" in plan, plan
    assert "Sort" not in plan and "Seq Scan" not in plan, plan
