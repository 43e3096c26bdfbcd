"""Exports leave audit events: created, downloaded (manifest, shard; not resumed ranges), deleted."""

import pytest

from dataplatform.audit.models import Action, AuditEvent
from tests.conftest import api_client_for
from tests.exports.conftest import _exports_in_tmp, run_export  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


def test_export_lifecycle_is_audited(members, run_export, django_capture_on_commit_callbacks):  # noqa: F811
    curator = api_client_for(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        response = curator.post("/api/v1/projects/alpha/exports/", {"kind": "test.synthetic", "filters": {"n": 5}},
                                format="json")
    assert response.status_code == 202
    created = AuditEvent.objects.get(action=Action.EXPORT_CREATED)
    assert (created.actor_name, created.project.slug, created.target_id) == ("curator", "alpha",
                                                                             str(response.json()["id"]))

    export = run_export(filters={"n": 30})
    trainer = api_client_for(members["trainer"])
    base = f"/api/v1/projects/alpha/exports/{export.pk}"
    shard = export.manifest["shards"][0]["name"]
    assert trainer.get(f"{base}/manifest").status_code == 200
    assert trainer.get(f"{base}/shards/{shard}").status_code == 200
    assert trainer.get(f"{base}/shards/{shard}", HTTP_RANGE="bytes=10-").status_code == 206  # a resume
    downloads = AuditEvent.objects.filter(action=Action.EXPORT_DOWNLOADED).order_by("id")
    assert [(e.actor_name, e.detail["file"]) for e in downloads] == [("trainer", "manifest.json"), ("trainer", shard)]

    assert api_client_for(members["admin"]).delete(f"{base}/").status_code == 204
    deleted = AuditEvent.objects.get(action=Action.EXPORT_DELETED)
    assert (deleted.actor_name, deleted.target_id, deleted.detail["rows"]) == ("admin", str(export.pk), 30)


def test_export_created_on_the_page_is_audited(client, members, django_capture_on_commit_callbacks):
    client.force_login(members["curator"])
    with django_capture_on_commit_callbacks(execute=False):
        client.post("/projects/alpha/exports/new", {"kind": "test.synthetic", "format": "jsonl", "filters": "n=3"})
    event = AuditEvent.objects.get(action=Action.EXPORT_CREATED)
    assert event.detail["format"] == "jsonl" and event.client_ip == "127.0.0.1"
