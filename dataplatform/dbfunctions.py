"""Database functions that differ by vendor, written once for both: the embedded default runs SQLite, production
PostgreSQL, and shared code never calls one vendor's function by name (a page that works on one would be a 500
on the other)."""

from django.db.models import Func, IntegerField


class JSONArrayLength(Func):
    """The number of items of a JSON array column: PostgreSQL's jsonb_array_length, SQLite's json_array_length."""

    function = "jsonb_array_length"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, function="json_array_length", **extra_context)
