"""Deleting an export while it is being downloaded: a download answers its file or 404, never a 500, and the
export leaves neither rows without files nor files without rows."""

import threading

import pytest
from django.core.files.storage import FileSystemStorage
from django.db import connection

from dataplatform.audit.models import AuditEvent
from dataplatform.exports import api, services
from dataplatform.exports.models import Export
from dataplatform.jobs.models import Job
from tests.conftest import api_client_for

BASE = "/api/v1/projects/alpha/exports/"


def files_under(root, export) -> list[str]:
    folder = root / export.location
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def downloads(export) -> int:
    return AuditEvent.objects.filter(action="export.downloaded", target_id=str(export.pk)).count()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["shard", "README.md"])
def test_a_file_deleted_after_its_row_was_read_is_a_404(members, run_export, export_storage_in_tmp, monkeypatch,
                                                        django_capture_on_commit_callbacks, name):
    """The delete lands between the download's read of the row and its open of the file."""
    export = run_export(filters={"n": 50}, shard_rows=20)
    name = export.manifest["shards"][0]["name"] if name == "shard" else name
    read = api._export

    def read_then_deleted(request, slug, export_id, **kwargs):
        found = read(request, slug, export_id, **kwargs)
        with django_capture_on_commit_callbacks(execute=True):
            services.delete_export(export=found)
        return found

    monkeypatch.setattr(api, "_export", read_then_deleted)
    before = downloads(export)
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{name}")
    assert response.status_code == 404 and response.json() == {"detail": "No such file in this export."}
    assert not Export.objects.filter(pk=export.pk).exists() and not Job.objects.filter(pk=export.job_id).exists()
    assert files_under(export_storage_in_tmp, export) == [] and downloads(export) == before


@pytest.mark.django_db
def test_a_file_gone_between_its_size_and_its_open_is_a_410(members, run_export, export_storage_in_tmp, monkeypatch):
    export = run_export(filters={"n": 50}, shard_rows=20)
    name = export.manifest["shards"][0]["name"]
    size = FileSystemStorage.size

    def size_then_gone(storage, path):
        answer = size(storage, path)
        storage.delete(path)
        return answer

    monkeypatch.setattr(FileSystemStorage, "size", size_then_gone)
    response = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{name}")
    # The row is still there: the file was lost from its storage (logged), a 410 that says so, never a 500.
    assert response.status_code == 410
    assert response.json()["detail"].startswith(f"The file {name} of export {export.pk} is no longer on its storage")


@pytest.mark.django_db(transaction=True)
def test_downloads_racing_a_delete_never_answer_500(members, run_export, export_storage_in_tmp):
    export = run_export(filters={"n": 200}, shard_rows=20)
    names = [shard["name"] for shard in export.manifest["shards"]] + ["README.md"]
    clients = [api_client_for(members["trainer"]) for _ in range(3)]
    for client in clients:
        client.raise_request_exception = False  # a view's exception becomes the 500 a client would get
    admin = api_client_for(members["admin"])
    statuses, problems, started = [], [], threading.Barrier(len(clients) + 1)
    downloading, deleted = threading.Event(), threading.Event()

    def download(client):
        try:
            started.wait()
            for n in range(200):  # bounded; after the delete, a few more each to meet the missing files
                response = client.get(f"{BASE}{export.pk}/shards/{names[n % len(names)]}")
                if response.status_code == 200:
                    b"".join(response.streaming_content)  # an opened file streams whole even once deleted
                statuses.append(response.status_code)
                downloading.set()
                if deleted.is_set() and response.status_code == 404:
                    break
        except Exception as exc:  # noqa: BLE001 - reported below
            problems.append(repr(exc))
        finally:
            connection.close()

    def delete():
        try:
            started.wait()
            downloading.wait(timeout=60)  # the delete amid the downloads (a bound, not an assertion)
            statuses.append(("delete", admin.delete(f"{BASE}{export.pk}/").status_code))
        finally:
            deleted.set()
            connection.close()

    threads = [threading.Thread(target=download, args=(client,)) for client in clients]
    threads.append(threading.Thread(target=delete))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []
    assert ("delete", 204) in statuses
    codes = [s for s in statuses if isinstance(s, int)]
    # SQLite has one writer: a download's audit row may meet the delete's lock, which is a 503 with Retry-After
    # (the database busy, nothing saved), as it should be; PostgreSQL must answer every one.
    busy = {503} if connection.vendor == "sqlite" else set()
    assert set(codes) <= {200, 404} | busy and 200 in codes and 404 in codes, codes
    assert not Export.objects.filter(pk=export.pk).exists() and not Job.objects.filter(pk=export.job_id).exists()
    assert files_under(export_storage_in_tmp, export) == []
