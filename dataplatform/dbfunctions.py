"""Database functions that differ by vendor, written once for both: the embedded default runs SQLite, production
PostgreSQL, and shared code never calls one vendor's function by name (a page that works on one would be a 500
on the other)."""

import json

from django.db import NotSupportedError
from django.db.models import (
    BigIntegerField,
    BooleanField,
    CharField,
    Expression,
    F,
    Func,
    IntegerField,
    JSONField,
    Value,
)
from django.db.models.fields.json import compile_json_path


class JSONArrayLength(Func):
    """The number of items of a JSON array column: PostgreSQL's jsonb_array_length, SQLite's json_array_length."""

    function = "jsonb_array_length"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, function="json_array_length", **extra_context)


class JSONValue(Func):
    """A JSON value (a key's value, a COALESCE of one) as JSON inside a JSON object built in SQL (JSONObject): as it
    is on PostgreSQL (jsonb); wrapped in json() on SQLite, whose json_object embeds text as a JSON string unless it
    comes straight from a JSON function (a list would become the text of a list)."""

    template = "%(expressions)s"
    output_field = JSONField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="json(%(expressions)s)", **extra_context)


class JSONArrayContains(Expression):
    """True where the JSON column's `key` is an array holding the string `item` as one of its own items.

    PostgreSQL: jsonb containment (`column -> key @> '["item"]'`, what `column__key__contains=[item]` does).
    SQLite has no containment operator (Django refuses `__contains` on a JSONField there), so the array's
    items are read with json_each: exactly the same rows, since the value must itself be an array (json_each
    would also walk a bare string or an object) and the item a string, not a number or a nested array. A
    missing key or a NULL column is never a match on either."""

    output_field = BooleanField()

    def __init__(self, column: str, key: str, item: str):
        super().__init__()
        self.column = F(column)
        self.key = key
        self.item = item

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def as_sql(self, compiler, connection):
        raise NotSupportedError(f"JSONArrayContains has no SQL for {connection.vendor}")

    def as_postgresql(self, compiler, connection):
        column, params = compiler.compile(self.column)
        # COALESCE: never NULL (a missing key), so that NOT of it (an exclude) keeps those rows.
        return f"COALESCE(({column} -> %s) @> %s::jsonb, false)", (*params, self.key, json.dumps([self.item]))

    def as_sqlite(self, compiler, connection):
        column, params = compiler.compile(self.column)
        path = compile_json_path([self.key])
        # IS, SQLite's NULL-safe equality: false, never NULL, for a missing key (as above).
        return (f"(json_type({column}, %s) IS 'array' AND EXISTS (SELECT 1 FROM json_each({column}, %s) AS item"
                " WHERE item.type = 'text' AND item.value = %s))",
                (*params, path, *params, path, self.item))


class ChatTurns(Func):
    """A JSON array of chat messages cut to their role and content, "" where a message has no role or no content
    (null or absent): the prompt of a preference or scoring row. In array order, on both vendors."""

    output_field = JSONField()

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError(f"ChatTurns has no SQL for {connection.vendor}")

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        return (f"(SELECT coalesce(jsonb_agg(jsonb_build_object('role', coalesce(m.value ->> 'role', ''), 'content', "
                f"coalesce(m.value ->> 'content', '')) ORDER BY m.n), '[]'::jsonb) "
                f"FROM jsonb_array_elements({column}) WITH ORDINALITY AS m (value, n))", params)

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        return (f"(SELECT json_group_array(json_object('role', coalesce(json_extract(m.value, '$.role'), ''), "
                f"'content', coalesce(json_extract(m.value, '$.content'), ''))) FROM json_each({column}) AS m)",
                params)


class _JSONKeyFunc(Func):
    """Reads the key `key` of a JSON column (F or name), the same on both vendors."""

    def __init__(self, column, key: str, **extra):
        super().__init__(F(column) if isinstance(column, str) else column, **extra)
        self.key = key

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError(f"{type(self).__name__} has no SQL for {connection.vendor}")


class JSONStringOrNull(_JSONKeyFunc):
    """The JSON column's `key` where it is a string, as text; null where it is absent or anything else (a number,
    a list: what `value if isinstance(value, str) else None` gives)."""

    output_field = CharField()

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        return (f"(CASE WHEN jsonb_typeof({column} -> %s) = 'string' THEN {column} ->> %s END)",
                (*params, self.key, *params, self.key))

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        path = compile_json_path([self.key])
        return (f"(CASE WHEN json_type({column}, %s) = 'text' THEN json_extract({column}, %s) END)",
                (*params, path, *params, path))


class JSONTextList(_JSONKeyFunc):
    """The JSON column's `key` where it is an array, as a JSON array of its items as text, as Python's str() spells
    them (a string as it is, true "True", null "None", a number as written; a nested array or object as its JSON
    text, where str() would give Python's repr); null where it is absent or not an array."""

    output_field = JSONField()

    def as_postgresql(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        return (f"(CASE WHEN jsonb_typeof({column} -> %s) = 'array' THEN (SELECT coalesce(jsonb_agg(CASE "
                f"jsonb_typeof(item.value) WHEN 'string' THEN item.value WHEN 'null' THEN to_jsonb('None'::text) "
                f"WHEN 'boolean' THEN to_jsonb(CASE WHEN item.value = 'true'::jsonb THEN 'True' ELSE 'False' END) "
                f"ELSE to_jsonb(item.value::text) END ORDER BY item.n), '[]'::jsonb) "
                f"FROM jsonb_array_elements({column} -> %s) WITH ORDINALITY AS item (value, n)) END)",
                (*params, self.key, *params, self.key))

    def as_sqlite(self, compiler, connection, **extra_context):
        column, params = compiler.compile(self.source_expressions[0])
        path = compile_json_path([self.key])
        return (f"(CASE WHEN json_type({column}, %s) = 'array' THEN (SELECT json_group_array(CASE WHEN "
                f"item.type = 'text' THEN item.value WHEN item.type = 'true' THEN 'True' WHEN item.type = 'false' "
                f"THEN 'False' WHEN item.type = 'null' THEN 'None' ELSE CAST(item.value AS TEXT) END) "
                f"FROM json_each({column}, %s) AS item) END)",
                (*params, path, *params, path))


class TextHash(Func):
    """A hash of a text as an integer, for sums that tell whether a set of rows changed (a fingerprint, not a
    secret): PostgreSQL's hashtextextended (64 bits); on SQLite `text_hash`, a 32-bit blake2b that the backend
    registers (dataplatform/sqlite3), 32 bits so that SQLite's integer sum() of a billion of them cannot
    overflow. The two differ: compare a fingerprint only with one taken on the same database."""

    output_field = BigIntegerField()

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError(f"TextHash has no SQL for {connection.vendor}")

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="hashtextextended(%(expressions)s, 0)")

    def as_sqlite(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="text_hash(%(expressions)s)")


class RowComparison(Expression):
    """SQL's row comparison, `(a, b) > (x, y)`: true where a > x, or a = x and b > y (both databases have it; SQLite
    since 3.15). Beside `project_id = P`, `(project_id, id) > (P, after)` narrows nothing more than `id > after`, but
    only an index that begins with (project_id, id) takes it as its condition: a page of the project's rows then walks
    that index, where the planner would otherwise walk the primary key from one end and pass every newer (or older)
    row of the other projects, pricing it as if the project's rows were spread evenly over the table."""

    output_field = BooleanField()
    OPERATORS = ("<", ">")

    def __init__(self, columns: tuple[str, ...], operator: str, values: tuple):
        if operator not in self.OPERATORS or len(columns) != len(values):
            raise ValueError(f"RowComparison: {columns} {operator} {values}")
        super().__init__()
        self.operator = operator
        self.columns = [F(column) for column in columns]
        self.values = [Value(value) for value in values]

    def get_source_expressions(self):
        return [*self.columns, *self.values]

    def set_source_expressions(self, exprs):
        half = len(exprs) // 2
        self.columns, self.values = list(exprs[:half]), list(exprs[half:])

    def as_sql(self, compiler, connection):
        sides, params = [], []
        for expressions in (self.columns, self.values):
            parts = [compiler.compile(expression) for expression in expressions]
            sides.append(f"({', '.join(sql for sql, _ in parts)})")
            params.extend(param for _, part_params in parts for param in part_params)
        return f"{sides[0]} {self.operator} {sides[1]}", params
