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
