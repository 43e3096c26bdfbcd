"""The export storage's health on S3 (tests/s3_store.py): a probe object written, listed and deleted, as the system
page, its API and the start-up check show it; a store down or refusing the platform named as such, never a 500."""

import pytest
from botocore.config import Config

from dataplatform.exports import health
from dataplatform.system import selectors
from dataplatform.system.checks import export_storages_usable
from tests.conftest import api_client_for
from tests.s3_store import exports_on_s3, s3_store, start_s3_store, stop_s3_store, use_s3  # noqa: F401  (fixtures)

ONE_TRY = Config(signature_version="s3v4", retries={"max_attempts": 1})


def test_a_healthy_store_allows_the_probe_and_keeps_nothing_of_it(s3_store, exports_on_s3):  # noqa: F811
    probe = health.probe_storage("exports-s3")
    assert probe.ok and probe.step == "" and probe.ms > 0
    assert probe.where == f"s3://{s3_store.bucket}/{exports_on_s3} at {s3_store.endpoint}"
    assert s3_store.keys(f"{exports_on_s3}/") == []  # the probe object was deleted
    assert export_storages_usable() == []


# A bucket the user's policy does not name is AccessDenied (S3 answers so before saying whether it exists).
@pytest.mark.parametrize(("wrong", "code"), [({"bucket_name": "no-such-bucket"}, "AccessDenied"),
                                             ({"secret_key": "not-the-secret"}, "SignatureDoesNotMatch")])
def test_a_wrong_bucket_or_wrong_keys_are_refused_and_stop_the_start_up(settings, s3_store, exports_on_s3,  # noqa: F811
                                                                        wrong, code):
    use_s3(settings, s3_store, exports_on_s3, **wrong)
    probe = health.probe_storage("exports-s3")
    assert (probe.ok, probe.problem, probe.step, probe.code) == (False, "refused", "write", code)
    assert probe.detail.startswith(f"exports-s3 refuses to write a probe object ({code})")
    [error] = export_storages_usable()
    assert error.id == "system.E003" and error.is_serious() and code in error.msg


@pytest.mark.django_db
def test_a_store_that_is_down_is_a_warning_and_the_system_page_says_so_from_its_cache(settings, members, monkeypatch,
                                                                                      export_storage_in_tmp):
    store = start_s3_store()
    use_s3(settings, store, "health", client_config=ONE_TRY)
    stop_s3_store(store)
    [warning] = export_storages_usable()
    assert warning.id == "system.W001" and not warning.is_serious()
    assert warning.msg.startswith("exports-s3 does not answer (EndpointConnectionError) when asked to write")

    # The other services' probes (broker, workers, model) are not this test's.
    monkeypatch.setattr("dataplatform.system.api.platform_status", lambda: [selectors.export_storage_status()])
    probes = []
    real_probe = health.probe_storage
    monkeypatch.setattr(health, "probe_storage", lambda alias: probes.append(alias) or real_probe(alias))
    settings.EXPORTS_HEALTH_CACHE_SECONDS = 60
    admin = api_client_for(members["admin"])
    health.storage_health(fresh=True)  # what an earlier test cached for these settings is replaced
    probes.clear()
    for _ in range(3):  # the page polls every few seconds: the store is probed once a cache period, not each time
        answer = admin.get("/api/v1/system/status/")
        assert answer.status_code == 200
    [storage] = answer.json()["services"]
    assert storage["name"] == "Export storage" and storage["ok"] is False and not answer.json()["ok"]
    assert "exports-s3 does not answer (EndpointConnectionError)" in storage["detail"]
    assert storage["exports-files"] == str(export_storage_in_tmp) and "health at http://127.0.0.1" in storage["exports-s3"]
    assert probes == []
