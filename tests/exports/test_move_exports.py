"""An export records the storage it was written to and is served from there, whatever new exports use; and
`manage.py move_exports` moves exports between storages: filesystem → S3 (moto, tests/s3_store.py) → filesystem."""

import hashlib
import io

import pytest
import requests
from django.core.management import CommandError, call_command

from dataplatform.exports import api, services
from dataplatform.exports.models import Export
from tests.conftest import api_client_for
from tests.s3_store import exports_on_s3, forget_export_storages, s3_store  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db
BASE = "/api/v1/projects/alpha/exports/"


def move(**options) -> str:
    out = io.StringIO()
    call_command("move_exports", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def local_names(files, export: Export) -> list[str]:
    folder = files / export.location
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def s3_names(s3_store, prefix: str, export: Export) -> list[str]:  # noqa: F811
    under = f"{prefix}/{export.location}/"
    return sorted(key.removeprefix(under) for key in s3_store.keys(under))


def listed(export: Export) -> list[str]:
    return sorted([s["name"] for s in export.manifest["shards"]] + ["README.md", "manifest.json"])


def downloaded(client, export: Export, name: str) -> bytes:
    response = client.get(f"{BASE}{export.pk}/shards/{name}")
    if response.status_code == 302:  # on S3: the signed URL
        fetched = requests.get(response["Location"], timeout=30)
        assert fetched.status_code == 200
        return fetched.content
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def test_an_export_moves_to_s3_and_back_and_is_served_from_where_it_is(
        settings, run_export, members, export_storage_in_tmp, s3_store, exports_on_s3):  # noqa: F811
    settings.EXPORTS_STORAGE_ALIAS = "exports-files"  # written before the team moved to S3
    export = run_export(filters={"n": 120}, shard_rows=50)
    assert export.storage == "exports-files" and local_names(export_storage_in_tmp, export) == listed(export)
    trainer = api_client_for(members["trainer"])
    shard = export.manifest["shards"][0]

    settings.EXPORTS_STORAGE_ALIAS = "exports-s3"  # new exports now go to S3; the old one is still served
    assert hashlib.sha256(downloaded(trainer, export, shard["name"])).hexdigest() == shard["sha256"]

    assert move(to="exports-s3") == f"Export {export.pk}: moved\n1 moved (to exports-s3).\n"
    export.refresh_from_db()
    assert export.storage == "exports-s3"
    assert s3_names(s3_store, exports_on_s3, export) == listed(export)
    assert local_names(export_storage_in_tmp, export) == []
    assert hashlib.sha256(downloaded(trainer, export, shard["name"])).hexdigest() == shard["sha256"]
    # Run again: nothing to do, nothing changes.
    assert move(to="exports-s3") == "1 already there (to exports-s3).\n"
    assert s3_names(s3_store, exports_on_s3, export) == listed(export)

    assert move(to="exports-files", source=["exports-s3"]) == f"Export {export.pk}: moved\n1 moved (to exports-files).\n"
    export.refresh_from_db()
    assert export.storage == "exports-files" and s3_names(s3_store, exports_on_s3, export) == []
    assert local_names(export_storage_in_tmp, export) == listed(export)
    for listed_shard in export.manifest["shards"]:
        stored = (export_storage_in_tmp / export.location / listed_shard["name"]).read_bytes()
        assert hashlib.sha256(stored).hexdigest() == listed_shard["sha256"]
    assert downloaded(trainer, export, "README.md") == (export_storage_in_tmp / export.location / "README.md").read_bytes()


def test_a_move_resumes_keeping_good_copies_and_deleting_what_an_interrupted_run_left(
        settings, run_export, export_storage_in_tmp, s3_store, exports_on_s3, monkeypatch):  # noqa: F811
    settings.EXPORTS_STORAGE_ALIAS = "exports-files"
    export = run_export(filters={"n": 120}, shard_rows=50)
    s3 = s3_store.client()
    good, bad = export.manifest["shards"][0], export.manifest["shards"][1]
    folder = export_storage_in_tmp / export.location
    s3.put_object(Bucket=s3_store.bucket, Key=f"{exports_on_s3}/{export.location}/{good['name']}",
                  Body=(folder / good["name"]).read_bytes())
    s3.put_object(Bucket=s3_store.bucket, Key=f"{exports_on_s3}/{export.location}/{bad['name']}", Body=b"torn")
    copied = []
    publish = services.publish
    monkeypatch.setattr(services, "publish", lambda storage, path, name: copied.append(name.rsplit("/", 1)[1])
                        or publish(storage, path, name))
    # A run stopped after its switch, before its delete: the record is on S3, the old copies still on disk.
    real_delete = services.delete_prefix
    monkeypatch.setattr(services, "delete_prefix", lambda storage, prefix: 0)
    move(to="exports-s3")
    assert good["name"] not in copied and bad["name"] in copied  # the good copy was kept, the torn one replaced
    export.refresh_from_db()
    assert export.storage == "exports-s3" and local_names(export_storage_in_tmp, export) == listed(export)

    monkeypatch.setattr(services, "delete_prefix", real_delete)
    assert move(to="exports-s3") == "1 already there (to exports-s3).\n"
    assert local_names(export_storage_in_tmp, export) == []
    assert s3_names(s3_store, exports_on_s3, export) == listed(export)
    body = s3.get_object(Bucket=s3_store.bucket, Key=f"{exports_on_s3}/{export.location}/{bad['name']}")["Body"]
    assert hashlib.sha256(body.read()).hexdigest() == bad["sha256"]


def test_a_file_that_does_not_match_its_manifest_is_not_moved(settings, run_export, export_storage_in_tmp, s3_store,  # noqa: F811
                                                                exports_on_s3):  # noqa: F811
    settings.EXPORTS_STORAGE_ALIAS = "exports-files"
    export = run_export(filters={"n": 120}, shard_rows=50)
    shard = export.manifest["shards"][1]
    (export_storage_in_tmp / export.location / shard["name"]).write_bytes(b"bit rot")
    with pytest.raises(CommandError, match=f"1 exports were not moved \\({export.pk}\\)"):
        move(to="exports-s3")
    export.refresh_from_db()
    assert export.storage == "exports-files" and local_names(export_storage_in_tmp, export) == listed(export)
    assert s3_names(s3_store, exports_on_s3, export) == []  # no half-moved copies left on S3


def test_the_command_refuses_an_unknown_storage_or_the_same_place_twice(settings, export_storage_in_tmp):
    with pytest.raises(CommandError, match="exports-s3 is not a configured export storage"):
        move(to="exports-s3")
    settings.STORAGES = {**settings.STORAGES, "exports-s3": settings.STORAGES["exports-files"]}
    with pytest.raises(CommandError, match="are the same storage"):
        move(to="exports-s3")


def test_an_export_on_a_storage_no_longer_configured_is_a_clear_503(settings, run_export, members,
                                                                   export_storage_in_tmp):
    export = run_export(filters={"n": 20})
    Export.objects.filter(pk=export.pk).update(storage="exports-s3")  # written while EXPORTS_S3_BUCKET was set
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/README.md")
    assert response.status_code == 503 and "Retry-After" not in response
    assert "on the storage exports-s3, which this server is not configured for" in response.json()["detail"]


def test_a_file_lost_from_s3_is_a_410_not_a_redirect_to_no_such_key(run_export, members, s3_store,  # noqa: F811
                                                                    exports_on_s3):  # noqa: F811
    export = run_export(filters={"n": 20})
    name = export.manifest["shards"][0]["name"]
    s3_store.client().delete_object(Bucket=s3_store.bucket, Key=f"{exports_on_s3}/{export.location}/{name}")
    forget_export_storages()
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{name}")
    assert response.status_code == 410
    assert response.json()["detail"] == (f"The file {name} of export {export.pk} is no longer on its storage "
                                         "(exports-s3): it was removed or lost there. Export the data again to get it.")


def test_a_download_that_read_the_export_just_before_it_moved_is_told_to_try_again(
        settings, run_export, members, export_storage_in_tmp, s3_store, exports_on_s3, monkeypatch):  # noqa: F811
    settings.EXPORTS_STORAGE_ALIAS = "exports-files"
    export = run_export(filters={"n": 20})
    stale = Export.objects.select_related("job", "project").get(pk=export.pk)  # read on disk...
    move(to="exports-s3")  # ... moved before its file was opened
    monkeypatch.setattr(api, "_export", lambda *args, **kwargs: stale)
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/README.md")
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.json() == {"detail": "This export was just moved to another storage; try again in a moment."}
    monkeypatch.undo()
    assert api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/README.md").status_code == 302
