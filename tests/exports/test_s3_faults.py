"""Store faults answer the platform's errors, never a 500, and lose nothing: a DELETE while the S3 store is down is a
503 with Retry-After, with a wrong bucket or wrong credentials a 503 that names the problem; the export stays whole;
a pull the store's outage cut finishes when it is run again."""

import hashlib
import time

import pytest
from botocore.config import Config
from rest_framework.test import APIClient

from dataplatform.accounts import services as account_services
from dataplatform.exports.models import Export
from dataplatform.exports.pull_script import dataplatform_pull
from tests.conftest import api_client_for
from tests.s3_store import (  # noqa: F401  (fixtures)
    exports_on_s3,
    restart_s3_store,
    s3_store,
    start_s3_store,
    stop_s3_store,
    use_s3,
)

pytestmark = pytest.mark.django_db
BASE = "/api/v1/projects/alpha/exports/"


def test_a_delete_or_a_download_while_the_store_is_down_is_a_503_with_retry_after(settings, run_export, members,
                                                                                  export_storage_in_tmp):
    store = start_s3_store()  # its own server, to stop
    try:
        use_s3(settings, store, "down")
        export = run_export(filters={"n": 20})
        assert export.storage == "exports-s3"
        keys = store.keys("down/")
    finally:
        stop_s3_store(store)
    admin = api_client_for(members["admin"])
    deleted = admin.delete(f"{BASE}{export.pk}/")
    assert deleted.status_code == 503 and deleted["Retry-After"] == "30"
    assert deleted.json()["detail"].startswith("The export storage exports-s3 is unavailable (")
    assert Export.objects.filter(pk=export.pk).exists() and len(keys) == len(export.manifest["shards"]) + 2
    shard = export.manifest["shards"][0]["name"]
    download = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{shard}")
    assert download.status_code == 503 and download["Retry-After"] == "30"


@pytest.mark.parametrize("wrong", [{"bucket_name": "no-such-bucket"}, {"secret_key": "not-the-secret"},
                                   {"access_key": "AKIAUNKNOWNUNKNOWN12"}])
def test_a_delete_with_a_wrong_bucket_or_wrong_keys_is_a_503_that_says_so(settings, run_export, members, s3_store,  # noqa: F811
                                                                          exports_on_s3, wrong,  # noqa: F811
                                                                          django_capture_on_commit_callbacks):
    export = run_export(filters={"n": 20})
    use_s3(settings, s3_store, exports_on_s3, **wrong)  # the settings changed under the export
    deleted = api_client_for(members["admin"]).delete(f"{BASE}{export.pk}/")
    assert deleted.status_code == 503 and "Retry-After" not in deleted
    assert "refuses the platform's requests" in deleted.json()["detail"]
    assert Export.objects.filter(pk=export.pk).exists()
    assert len(s3_store.keys(f"{exports_on_s3}/{export.location}/")) == len(export.manifest["shards"]) + 2

    use_s3(settings, s3_store, exports_on_s3)  # fixed: the delete goes through and removes every object
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client_for(members["admin"]).delete(f"{BASE}{export.pk}/").status_code == 204
    assert s3_store.keys(f"{exports_on_s3}/{export.location}/") == []


def test_roles_are_checked_before_the_store_is_asked(settings, run_export, members, s3_store,  # noqa: F811
                                                     exports_on_s3):  # noqa: F811
    """The shard and delete endpoints on S3, by role: readers are redirected to the store; while it refuses the
    platform, those allowed get the 503, the others the same 403/404/401 as ever (the store's state is not theirs
    to learn)."""
    export = run_export(filters={"n": 20})
    shard = f"{BASE}{export.pk}/shards/{export.manifest['shards'][0]['name']}"
    clients = {role: api_client_for(members[role]) for role in ("admin", "curator", "annotator", "trainer", "outsider")}
    clients["anonymous"] = APIClient()
    readable = {"admin": 302, "curator": 302, "annotator": 403, "trainer": 302, "outsider": 404, "anonymous": 401}
    assert {role: client.get(shard).status_code for role, client in clients.items()} == readable
    use_s3(settings, s3_store, exports_on_s3, secret_key="not-the-secret")
    assert {role: client.get(shard).status_code for role, client in clients.items()} == {
        role: 503 if status == 302 else status for role, status in readable.items()}
    assert {role: client.delete(f"{BASE}{export.pk}/").status_code for role, client in clients.items()} == {
        "admin": 503, "curator": 403, "annotator": 403, "trainer": 403, "outsider": 404, "anonymous": 401}
    assert Export.objects.filter(pk=export.pk).exists()


class _WaitsRecorded:
    """The pull script's `time`, whose sleep only records how long the script meant to wait (the platform's
    Retry-After is 30 s a retry: the waits are asserted, not spent)."""

    def __init__(self):
        self.waits: list[float] = []

    def __getattr__(self, name):
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_a_store_that_stops_during_a_pull_costs_a_rerun_only_the_files_not_yet_verified(
        settings, run_export, members, live_server, export_storage_in_tmp, tmp_path, monkeypatch):
    """The store stops after the pull script verified the first shard: it retries, then gives up naming the file it
    could not get, with nothing unverified under a final name and no manifest.json (written last). Once the store is
    back, the same command finishes, keeping what it had."""
    store = start_s3_store()  # its own server, to stop
    try:
        use_s3(settings, store, "pull", client_config=Config(signature_version="s3v4", retries={"max_attempts": 1}))
        export = run_export(filters={"n": 40}, shard_rows=10, validation_ratio=0)
        shards = {shard["name"]: shard["sha256"] for shard in export.manifest["shards"]}
        first = next(iter(shards))
        _, secret = account_services.issue_token(user=members["trainer"], name="pull", read_only=True)
        url, out, said = f"{live_server.url}{BASE}{export.pk}/", tmp_path / "pulled", []

        def log(line: str) -> None:
            said.append(line)
            if line.startswith(f"{first}: ") and line.endswith("sha256 ok"):
                stop_s3_store(store)

        monkeypatch.setattr(dataplatform_pull, "time", clock := _WaitsRecorded())
        with pytest.raises(dataplatform_pull.PullError, match=r"gave up after 2 attempts"):
            dataplatform_pull.pull(url, out, token=secret, workers=1, retries=2, backoff=0, log=log)
        assert clock.waits and all(wait == 30 for wait in clock.waits)  # the platform's Retry-After, not backoff=0
        finals = {path.name for path in out.iterdir() if not path.name.endswith(".part")}
        assert first in finals and "manifest.json" not in finals
        assert all(hashlib.sha256((out / name).read_bytes()).hexdigest() == shards[name] for name in finals & set(shards))
        assert finals & set(shards) != set(shards)  # the outage left files to get
        restart_s3_store(store)
        again = []
        dataplatform_pull.pull(url, out, token=secret, workers=1, retries=2, backoff=0, log=again.append)
    finally:
        stop_s3_store(store)
    assert f"{first}: already complete" in again
    assert all(hashlib.sha256((out / name).read_bytes()).hexdigest() == sha for name, sha in shards.items())
    assert (out / "manifest.json").exists()
