from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import QuerySet
from django.http import HttpRequest
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination

from .apiutils import MAX_ID
from .dbfunctions import RowComparison


def parse_id(value: str | None) -> int | None:
    """The object id a page's query string or form names (a `before` cursor, a chosen run), or None
    when it is absent or not an id. Not `isdigit()` and `int()`: "²" is a digit to isdigit() and not to
    int(), and int() refuses more than 4,300 digits; either was a 500."""
    if value and value.isascii() and value.isdigit() and len(value) <= len(str(MAX_ID)) and 1 <= int(value) <= MAX_ID:
        return int(value)
    return None


@dataclass(frozen=True)
class KeysetPage:
    """One page of an HTML list, taken by id (no COUNT, no OFFSET: the same cost on the thousandth page as on
    the first). The queries keep the list's other parameters (its filters)."""

    rows: list
    next_query: str | None  # the query string of the next page, None on the last
    first_query: str | None  # back to the first page, None on the first


def keyset_page(request: HttpRequest, queryset: QuerySet, *, size: int, descending: bool = True,
                param: str = "", project_id: int | None = None,
                ids: Callable[[int | None, int], list[int]] | None = None) -> KeysetPage:
    """The page of `queryset` (ordered by id, newest first unless `descending` is False) that the request's
    `before` (or `after`) id starts after; `param` names it otherwise, for a second list on the same page.

    `project_id`: the rows are that project's (the queryset says so too), and its model has a (project, id) index,
    which the page then walks (dbfunctions.RowComparison), whatever lies around the project in the table.
    `ids(start, n)`: the ids of the page's rows, found by the caller another way (in the page's order, the first n
    after `start`), or None where that way cannot tell; the page is the rows of `queryset` among them."""
    param = param or ("before" if descending else "after")
    start = parse_id(request.GET.get(param))
    found = ids(start, size + 1) if ids is not None else None
    if found is not None:
        queryset = queryset.filter(pk__in=found)
    elif project_id is not None:
        queryset = after_in_project(queryset, project_id, start, descending=descending)
    elif start:
        queryset = queryset.filter(**{"pk__lt" if descending else "pk__gt": start})
    rows = list(queryset.order_by("-pk" if descending else "pk")[: size + 1])
    query = request.GET.copy()
    query.pop(param, None)
    first_query = query.urlencode() if start else None
    next_query = None
    if len(rows) > size:
        query[param] = rows[size - 1].pk
        next_query = query.urlencode()
    return KeysetPage(rows[:size], next_query, first_query)


def after_in_project(queryset: QuerySet, project_id: int, start: int | None, *, descending: bool) -> QuerySet:
    """`queryset` (a project's rows) after id `start` in the page's order, asked so that the model's (project, id)
    index serves it: the row comparison only that index takes (dbfunctions.RowComparison), and the plain bound as a
    key of its own, so that the index's scan starts at the page rather than at the project's first row."""
    bound = start or (MAX_ID if descending else 0)
    queryset = queryset.filter(RowComparison(("project_id", "id"), "<" if descending else ">", (project_id, bound)))
    return queryset.filter(**{"pk__lt" if descending else "pk__gt": start}) if start else queryset


def capped_count(queryset: QuerySet, cap: int = 10_000) -> tuple[int, bool]:
    """(n, more): the number of rows, counting no further than `cap`; `more` when there are more than `cap`
    (a page says "more than 10,000" instead of counting a million rows on every request)."""
    n = queryset.order_by()[: cap + 1].count()
    return min(n, cap), n > cap


class CreatedCursorPagination(CursorPagination):
    """Keyset pagination on (created_at, id): stable under inserts, no OFFSET scans."""

    ordering = ("-created_at", "-id")
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        """The requested page size; a bad one is a 400 (DRF would quietly use the default instead,
        and a client asking for `page_size=abc` deserves to know)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        # DRF's field, not int(): it refuses "²" (a digit to str.isdigit) and 5,000 digits (past int()'s limit).
        field = serializers.IntegerField(min_value=1, max_value=self.max_page_size)
        try:
            return field.run_validation(raw)
        except ValidationError as exc:
            raise ValidationError({self.page_size_query_param: exc.detail}) from None

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] |= {"minimum": 1, "maximum": self.max_page_size}
        return parameters


def paginated(serializer_class) -> serializers.Serializer:
    """The OpenAPI shape of one page of `serializer_class`, for an APIView that paginates by hand
    (drf-spectacular only wraps the generic list views' responses in a page by itself)."""
    return inline_serializer(
        name=f"{serializer_class.__name__.removesuffix('Serializer')}Page",
        fields={"next": serializers.URLField(allow_null=True), "previous": serializers.URLField(allow_null=True),
                "results": serializer_class(many=True)})
