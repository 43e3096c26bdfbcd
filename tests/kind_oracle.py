"""The old row generators as the oracle of the kinds that now read their rows in SQL (issue 43): a kind's rows
through the engine's own read path (Arrow on PostgreSQL, values() through the ORM elsewhere) must be exactly the
rows the old derivation (kept in the tests as the reference: tests/*/legacy_rows.py) gives on the same data."""

from dataplatform.exports.registry import ExportQuery, get_kind
from dataplatform.exports.sources import as_record_batch, read_batches


def query_for(kind_name: str, project, filters: dict | None = None, *, batch_size: int = 3,
              data_version: str | None = None) -> ExportQuery:
    """The query an export of the kind would run now (small batches, so that the keyset crosses pages)."""
    kind = get_kind(kind_name)
    form = kind.filters(data=filters or {})
    form.is_valid(raise_exception=True)
    return ExportQuery(project=project, filters=form.validated_data, batch_size=batch_size,
                       data_version=kind.data_version(project) if data_version is None else data_version)


def engine_rows(kind_name: str, query: ExportQuery) -> tuple[str, list[dict]]:
    """(read path, the kind's rows in its schema) as an export reads them."""
    path, batches = read_batches(get_kind(kind_name), query)
    return path, [row for batch in batches for row in batch.to_pylist()]


def schema_rows(kind_name: str, batches) -> list[dict]:
    """The rows of an old generator's batches, through the kind's schema as the engine writes them."""
    kind = get_kind(kind_name)
    return [row for batch in batches for row in as_record_batch(batch, kind).to_pylist()]


def assert_same_rows(kind_name: str, project, legacy, filters: dict | None = None, *,
                     expect_path: str | None = None, data_version: str | None = None) -> list[dict]:
    """The kind's rows equal `legacy(query)`'s (the old generator's), row for row and in order, with the same
    notes for the manifest; returns the rows (for the caller's own checks that the data are not trivial)."""
    query, reference_query = (query_for(kind_name, project, filters, data_version=data_version) for _ in range(2))
    path, rows = engine_rows(kind_name, query)
    expected = schema_rows(kind_name, legacy(reference_query))
    if expect_path is not None:
        assert path == expect_path
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        assert got == want, _difference(got, want)
    assert query.notes == reference_query.notes
    return rows


def _difference(got: dict, want: dict) -> str:
    return "; ".join(f"{name}: {got.get(name)!r} != {want.get(name)!r}" for name in want if got.get(name) != want[name])

