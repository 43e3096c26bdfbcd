import pytest

from dataplatform.system import selectors, services

from .capability_reports import failing_report, forget_reports


@pytest.fixture(autouse=True)
def no_report_before_or_after():
    forget_reports()
    yield
    forget_reports()


def test_a_check_keeps_its_report_for_the_page(monkeypatch, use_backend):
    backend = use_backend(object())
    checked = []
    monkeypatch.setattr(services, "capability_report", lambda checked_backend: checked.append(checked_backend)
                        or failing_report())
    assert selectors.last_capability_report() is None
    report = services.run_capability_check()
    assert checked == [backend]  # the platform's default backend (backend_for), which tests can replace
    kept = selectors.last_capability_report()
    assert kept.as_json() == report.as_json() and [line.ok for line in kept.capabilities] == [True, False]


def test_one_check_at_a_time(monkeypatch, use_backend):
    use_backend(object())

    def meanwhile(backend):  # a second request while the first one's probes run
        with pytest.raises(services.CheckRunning) as refused:
            services.run_capability_check()
        assert refused.value.status == 409
        return failing_report()

    monkeypatch.setattr(services, "capability_report", meanwhile)
    services.run_capability_check()
    monkeypatch.setattr(services, "capability_report", lambda backend: failing_report())
    services.run_capability_check()  # the first run's mark went with it


def test_a_report_this_version_cannot_read_is_no_report():
    from django.core.cache import cache

    cache.set(selectors.REPORT_KEY, {"capabilities": "?"})
    assert selectors.last_capability_report() is None
