from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination


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
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            raise ValidationError({self.page_size_query_param: [f"A whole number from 1 to {self.max_page_size}."]})
        return int(raw)


def paginated(serializer_class) -> serializers.Serializer:
    """The OpenAPI shape of one page of `serializer_class`, for an APIView that paginates by hand
    (drf-spectacular only wraps the generic list views' responses in a page by itself)."""
    return inline_serializer(
        name=f"{serializer_class.__name__.removesuffix('Serializer')}Page",
        fields={"next": serializers.URLField(allow_null=True), "previous": serializers.URLField(allow_null=True),
                "results": serializer_class(many=True)})
