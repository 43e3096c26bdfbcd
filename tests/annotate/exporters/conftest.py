"""The onPanda record kinds run through the export engine, on hand-made trees (a one-token-per-character
backend)."""

import pytest

from ...doubles import CharBackend
from ...exporting import export_rows
from ..trees import build_agentic_session, build_trees


@pytest.fixture(autouse=True)
def _exports_in_tmp(export_storage_in_tmp):
    """Every export test writes under its own temporary DATA_DIR."""


@pytest.fixture
def chars(use_backend):
    """The one-token-per-character backend everywhere: generation continues with " sat." then stops."""
    backend = CharBackend(script=" sat.")
    use_backend(backend)
    return backend


@pytest.fixture
def run_export(project, members, export_storage_in_tmp):
    def run(kind: str, **options):
        return export_rows(project, members["curator"], export_storage_in_tmp, kind, **options)

    return run


@pytest.fixture
def trees(project, members, chars):
    return build_trees(project, members, chars)


@pytest.fixture
def agentic_session(project, members, chars):
    return build_agentic_session(project, members)
