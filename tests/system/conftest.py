"""Fixtures of the system page's and API's tests."""

import pytest

from .capability_reports import failing_report, forget_reports


@pytest.fixture
def reports(monkeypatch):
    """The capability check's runs, without the model: each run reports failing_report() (and is counted); the
    page's service checks report nothing."""
    forget_reports()
    runs = []
    monkeypatch.setattr("dataplatform.system.services.capability_report",
                        lambda backend: runs.append(backend) or failing_report())
    monkeypatch.setattr("dataplatform.system.views.platform_status", lambda: [])
    yield runs
    forget_reports()
