"""Exports on object storage, end to end against an S3 protocol server with IAM authentication on (tests/s3_store.py):
the engine writes the shards there, the shard API redirects to them, a trainer's clients follow the redirect without
taking their token along, the pull script verifies them, `datasets` loads the pulled folder, and a delete removes
every object."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from botocore.exceptions import ClientError
from datasets import load_dataset
from django.core.files.base import ContentFile
from storages.backends.s3 import S3Storage

from dataplatform.accounts import services as account_services
from dataplatform.exports.models import Export
from dataplatform.exports.pull_script import dataplatform_pull
from dataplatform.exports.storage import storage_named
from tests.conftest import api_client_for
from tests.s3_store import exports_on_s3, s3_store  # noqa: F401  (fixtures)

SCRIPT = Path(dataplatform_pull.__file__)


def stored_names(s3_store, location: str, export: Export) -> list[str]:  # noqa: F811
    prefix = f"{location}/{export.location}/"
    return sorted(key.removeprefix(prefix) for key in s3_store.keys(prefix))


def listed_names(export: Export) -> list[str]:
    return sorted([shard["name"] for shard in export.manifest["shards"]] + ["README.md", "manifest.json"])


def test_the_store_refuses_requests_without_the_user_s_key(s3_store):  # noqa: F811
    """Authentication is on: what passes below passes SigV4 and the user's policy, not an open server."""
    for access_key, secret_key in (("AKIAWRONGWRONGWRONG1", "wrong"), (s3_store.access_key, "not-the-secret")):
        with pytest.raises(ClientError) as refused:
            s3_store.client(access_key=access_key, secret_key=secret_key).list_objects_v2(Bucket=s3_store.bucket)
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # The user's policy allows its bucket only.
    with pytest.raises(ClientError) as refused:
        s3_store.client().create_bucket(Bucket="another-bucket")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert isinstance(s3_store.keys(), list)


@pytest.mark.django_db(transaction=True)
def test_an_export_on_s3_is_listed_downloaded_pulled_and_deleted(run_export, members, live_server, s3_store,  # noqa: F811
                                                                 exports_on_s3, tmp_path):  # noqa: F811
    export = run_export(filters={"n": 300}, shard_rows=100, validation_ratio=0.1)
    s3_store.server.gate.seen.clear()
    assert export.job.state == "succeeded" and export.storage == "exports-s3"
    # Every file the manifest lists is an object in the bucket, and nothing else is.
    assert len(export.manifest["shards"]) == 4
    assert stored_names(s3_store, exports_on_s3, export) == listed_names(export)

    # The shard API redirects to the store; requests follows it and does not take the token along (another
    # origin): S3 refuses a request that carries a second authentication ("Only one auth mechanism allowed").
    _, secret = account_services.issue_token(user=members["trainer"], name="pull", read_only=True)
    api = f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/"
    shard = export.manifest["shards"][1]
    response = requests.get(f"{api}shards/{shard['name']}", headers={"Authorization": f"Bearer {secret}"},
                            timeout=30)
    assert [r.status_code for r in response.history] == [302] and response.status_code == 200
    assert urlsplit(response.url).netloc == urlsplit(s3_store.endpoint).netloc
    assert "Authorization" not in response.request.headers
    assert s3_store.server.gate.seen[-1] == {"method": "GET", "authorization": None}
    assert hashlib.sha256(response.content).hexdigest() == shard["sha256"] and len(response.content) == shard["bytes"]

    # The pull script, as a trainer runs it: every shard fetched through the redirect and checked against its sha256.
    out = tmp_path / "pulled"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"DATAPLATFORM_TOKEN": secret}
    pulled = subprocess.run([sys.executable, str(SCRIPT), api, "--out", str(out), "--backoff", "0.01"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert pulled.returncode == 0, pulled.stderr
    assert "sha256 verified" in pulled.stderr and secret not in pulled.stdout + pulled.stderr
    for listed in export.manifest["shards"]:
        assert hashlib.sha256((out / listed["name"]).read_bytes()).hexdigest() == listed["sha256"]
    # Every file came from the store through a signed URL, none of them with the token.
    assert len(s3_store.server.gate.seen) >= len(export.manifest["shards"]) + 2
    assert {seen["authorization"] for seen in s3_store.server.gate.seen} == {None}
    # The pulled folder loads as its card says: every row of each split, from the files the manifest lists.
    dataset = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    by_split = export.manifest["totals"]["by_split"]
    assert {split: rows.num_rows for split, rows in dataset.items()} == {
        split: totals["rows"] for split, totals in by_split.items() if totals["shards"]}

    # The README's clients, as a trainer runs them: `curl -L` drops the token at the redirect (another port is another
    # origin), `curl --location-trusted` and `wget --header` send it on, and S3 refuses the request ("Only one auth
    # mechanism allowed", applied by the gate) after the token has left.
    url, header = f"{api}shards/{shard['name']}", f"Authorization: Bearer {secret}"
    s3_store.server.gate.seen.clear()
    curl = subprocess.run(["curl", "-sSL", "-o", str(tmp_path / "curl.bin"), "-w", "%{http_code}", "-H", header, url],
                          capture_output=True, text=True, timeout=60)
    assert curl.stdout == "200" and hashlib.sha256((tmp_path / "curl.bin").read_bytes()).hexdigest() == shard["sha256"]
    trusted = subprocess.run(["curl", "-sSL", "--location-trusted", "-o", os.devnull, "-w", "%{http_code}", "-H",
                              header, url], capture_output=True, text=True, timeout=60)
    wget = subprocess.run(["wget", "-q", "-O", os.devnull, "--header", header, url], capture_output=True, timeout=60)
    assert trusted.stdout == "400" and wget.returncode == 8  # wget: "the server issued an error response"
    assert [bool(seen["authorization"]) for seen in s3_store.server.gate.seen] == [False, True, True]

    # A delete removes the rows, then every object under the export's prefix.
    deleted = api_client_for(members["admin"]).delete(f"/api/v1/projects/alpha/exports/{export.pk}/")
    assert deleted.status_code == 204
    assert not Export.objects.filter(pk=export.pk).exists()
    assert stored_names(s3_store, exports_on_s3, export) == []


def test_the_gate_applies_s3_s_rules_for_signed_urls(s3_store, exports_on_s3):  # noqa: F811
    """moto does not check query-signed requests; the gate in front of it does (tests/s3_store.py). Each assertion
    is one of S3's rules, so a passing download above means the platform's signed URL obeys it."""
    storage = storage_named("exports-s3")
    storage.save("probe/one.txt", ContentFile(b"probe"))
    url = storage.url("probe/one.txt")
    query = dict(parse_qsl(urlsplit(url).query))
    # SigV4 (AWS4-HMAC-SHA256), signed for an hour (querystring_expire).
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and query["X-Amz-Expires"] == "3600"
    assert requests.get(url, timeout=10).content == b"probe"
    # The signature covers the method: a URL signed for GET is refused for HEAD.
    assert requests.head(url, timeout=10).status_code == 403
    # ... and the path: the same signature for another object is refused.
    other = url.replace("one.txt", "two.txt")
    assert "SignatureDoesNotMatch" in requests.get(other, timeout=10).text
    # One auth mechanism per request: a client that forwards its token to the store is refused.
    forwarded = requests.get(url, headers={"Authorization": "Bearer dp_token"}, timeout=10)
    assert forwarded.status_code == 400 and "Only one auth mechanism allowed" in forwarded.text
    # SigV2 is refused.
    sigv2 = s3_store.storage_settings(exports_on_s3, signature_version="s3")["OPTIONS"]
    assert requests.get(S3Storage(**sigv2).url("probe/one.txt"), timeout=10).status_code == 403
    storage.delete("probe/one.txt")
