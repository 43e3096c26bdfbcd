"""HTML lists' keyset pages and capped counts (dataplatform/pagination.py)."""

import pytest
from django.test import RequestFactory

from dataplatform.audit import services as audit
from dataplatform.audit.models import Action, AuditEvent
from dataplatform.pagination import capped_count, keyset_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(project):
    for _ in range(7):
        audit.record(action=Action.EXPORT_CREATED, project=project)
    return AuditEvent.objects.filter(project=project)


def walk(queryset, *, descending, query=""):
    """Every page's ids, following the links as a browser would."""
    pages, url = [], f"/list?{query}"
    while url is not None:
        page = keyset_page(RequestFactory().get(url), queryset, size=3, descending=descending)
        pages.append([row.pk for row in page.rows])
        if len(pages) > 1:
            assert page.first_query == query
        url = f"/list?{page.next_query}" if page.next_query else None
        assert len(pages) < 10
    return pages


@pytest.mark.parametrize("descending", [True, False])
def test_pages_cover_every_row_once_and_keep_the_filters(events, descending):
    ids = sorted(events.values_list("pk", flat=True), reverse=descending)
    pages = walk(events, descending=descending, query="state=open")
    assert [len(page) for page in pages] == [3, 3, 1]
    assert sum(pages, []) == ids
    first = keyset_page(RequestFactory().get("/list?state=open"), events, size=3, descending=descending)
    assert first.first_query is None and "state=open" in first.next_query


def test_an_exact_page_has_no_next_and_a_bad_cursor_is_the_first_page(events):
    page = keyset_page(RequestFactory().get("/list?before=²"), events, size=7)
    assert len(page.rows) == 7 and page.next_query is None


def test_capped_count(events):
    assert capped_count(events, cap=10) == (7, False)
    assert capped_count(events, cap=7) == (7, False)
    assert capped_count(events, cap=5) == (5, True)


@pytest.mark.parametrize("descending", [True, False])
def test_pages_on_the_project_s_index_are_the_same_pages(events, project, other_project, descending):
    for _ in range(4):  # another project's rows, after ours in the table
        audit.record(action=Action.EXPORT_CREATED, project=other_project)
    plain = walk(events, descending=descending)
    pages, url = [], "/list?"
    while url is not None:
        page = keyset_page(RequestFactory().get(url), events, size=3, descending=descending, project_id=project.pk)
        pages.append([row.pk for row in page.rows])
        url = f"/list?{page.next_query}" if page.next_query else None
    assert pages == plain and sum(pages, []) == sorted(events.values_list("pk", flat=True), reverse=descending)


def test_a_page_of_ids_found_another_way(events):
    """`ids(start, n)`: the page is the queryset's rows among them, in the page's order; the next page starts after
    the page's last row."""
    chosen = sorted(events.values_list("pk", flat=True))[1::2]  # every other row: 3 of 7
    asked = []

    def ids(start, n):
        asked.append((start, n))
        return [pk for pk in chosen if start is None or pk > start][:n]
    first = keyset_page(RequestFactory().get("/list"), events, size=2, descending=False, ids=ids)
    assert [row.pk for row in first.rows] == chosen[:2] and first.next_query == f"after={chosen[1]}"
    last = keyset_page(RequestFactory().get(f"/list?{first.next_query}"), events, size=2, descending=False, ids=ids)
    assert [row.pk for row in last.rows] == chosen[2:] and last.next_query is None
    assert asked == [(None, 3), (chosen[1], 3)]
