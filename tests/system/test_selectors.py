import pytest

from dataplatform.system import selectors

pytestmark = pytest.mark.django_db


def test_database_status_is_ok():
    status = selectors.database_status()
    assert status.ok and status.detail.split(",")[0] in {"SQLite", "PostgreSQL"}


def test_broker_status_reports_url_and_queue_depth():
    status = selectors.broker_status()
    assert status.ok, status.detail
    assert isinstance(status.facts["queue_depth"], int)
    assert "@" not in status.facts["url"] or ":***@" in status.facts["url"]


def test_backend_status_names_backend_and_model():
    status = selectors.backend_status()
    assert status.facts["backend"] == "local" and status.facts["model"] == "SmolLM2-135M-Instruct"


def test_workers_down_when_broker_is_down(monkeypatch):
    from dataplatform.system.selectors import ServiceStatus

    monkeypatch.setattr(selectors, "broker_status", lambda: ServiceStatus("Broker", False, "down"))
    names = {s.name: s for s in selectors.platform_status()}
    assert not names["Workers"].ok and names["Workers"].detail == "broker unreachable"
