"""Serving export files from S3 the way clients need, against the S3 protocol server of tests/s3_store.py: signed URLs
that obey S3's rules and name the public endpoint, objects a client receives byte for byte as written, resume through
the redirect, and HEAD answered by the platform. Where moto does not check a rule of S3's, the test says which rule
an assertion stands for."""

import hashlib
from urllib.parse import parse_qsl, urlsplit

import fsspec
import pytest
import requests
from django.core.files.base import ContentFile
from rest_framework.test import APIClient

from dataplatform.accounts import services as account_services
from dataplatform.exports.file_types import attachment, content_type_of
from dataplatform.exports.pull_script import dataplatform_pull
from dataplatform.exports.storage import storage_named
from tests.conftest import api_client_for
from tests.s3_store import exports_on_s3, s3_store, use_s3  # noqa: F401  (fixtures)

BASE = "/api/v1/projects/alpha/exports/"
# The name trainers reach the store by (a proxy in front of it, keeping the Host header, which is signed). Without a
# dot: moto reads a dotted host as "<bucket>.<domain>", a path-style one as well.
PUBLIC_HOST = "s3-public:9443"
ROLES = ["admin", "curator", "annotator", "trainer", "outsider", "anonymous"]
# What each role gets from a shard (GET and HEAD alike), as for the rest of the pull API (tests/exports/test_api.py).
EXPECTED = {"admin": 200, "curator": 200, "annotator": 403, "trainer": 200, "outsider": 404, "anonymous": 401}


def client_as(members, who):
    return APIClient() if who == "anonymous" else api_client_for(members[who])


def object_key(location: str, export, name: str) -> str:
    return f"{location}/{export.location}/{name}"


@pytest.mark.django_db
@pytest.mark.parametrize("style, host, path_prefix", [("path", PUBLIC_HOST, "/{bucket}/"),
                                                      ("virtual", "{bucket}." + PUBLIC_HOST, "/")])
def test_a_shard_redirects_to_a_sigv4_url_for_get_at_the_public_endpoint(
        settings, run_export, members, s3_store, exports_on_s3, style, host, path_prefix):  # noqa: F811
    use_s3(settings, s3_store, exports_on_s3, public_endpoint_url=f"http://{PUBLIC_HOST}", addressing_style=style)
    export = run_export(filters={"n": 30})
    shard = export.manifest["shards"][0]
    redirect = api_client_for(members["trainer"]).get(f"{BASE}{export.pk}/shards/{shard['name']}")
    assert redirect.status_code == 302
    url = urlsplit(redirect["Location"])
    query = dict(parse_qsl(url.query))
    # The URL names the endpoint trainers reach, not the one the platform writes to, in the addressing style asked.
    assert url.netloc == host.format(bucket=s3_store.bucket)
    assert url.path == path_prefix.format(bucket=s3_store.bucket) + object_key(exports_on_s3, export, shard["name"])
    # S3 "Authenticating Requests: Using Query Parameters (SigV4)": the algorithm is AWS4-HMAC-SHA256 (SigV2's
    # AWSAccessKeyId/Signature are retired), the credential scope is <key>/<day>/<region>/s3/aws4_request, the host
    # header is signed, and X-Amz-Expires is at most 604800 s (here an hour).
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and "Signature" not in query
    assert query["X-Amz-Credential"].endswith("/us-east-1/s3/aws4_request")
    assert "host" in query["X-Amz-SignedHeaders"].split(";") and int(query["X-Amz-Expires"]) == 3600
    # S3 "GetObject: response header overrides" (only for signed requests): the store answers with the disposition
    # and type a local download has.
    assert query["response-content-disposition"] == attachment(export.pk, shard["name"])
    assert query["response-content-type"] == content_type_of(shard["name"]) == "application/vnd.apache.parquet"
    # The signature is S3's: the same request, sent to the store as a proxy for the public name would (Host kept),
    # passes the gate's SigV4 check and moto's IAM policy. The method is signed: it is a URL for GET only.
    to_store = f"{s3_store.endpoint}{url.path}?{url.query}"
    fetched = requests.get(to_store, headers={"Host": url.netloc}, timeout=10)
    assert fetched.status_code == 200 and hashlib.sha256(fetched.content).hexdigest() == shard["sha256"]
    assert fetched.headers["Content-Disposition"] == attachment(export.pk, shard["name"])
    assert requests.head(to_store, headers={"Host": url.netloc}, timeout=10).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_a_jsonl_gz_shard_reaches_requests_as_the_gzip_file_the_manifest_lists(run_export, members, live_server,
                                                                               s3_store, exports_on_s3):  # noqa: F811
    export = run_export(filters={"n": 60}, shard_rows=30, format="jsonl.gz")
    names = [shard["name"] for shard in export.manifest["shards"]] + ["README.md", "manifest.json"]
    assert all(name.endswith(".jsonl.gz") for name in names[:-2])
    # Every object carries the content type a local download sends, and no Content-Encoding (which would make
    # clients decompress a .jsonl.gz on the way).
    for name in names:
        stored = s3_store.client().head_object(Bucket=s3_store.bucket, Key=object_key(exports_on_s3, export, name))
        assert (stored["ContentType"], stored.get("ContentEncoding")) == (content_type_of(name), None)
    # requests (which decompresses a gzip Content-Encoding) follows the redirect and gets the file's own bytes.
    _, secret = account_services.issue_token(user=members["trainer"], name="pull", read_only=True)
    shard = export.manifest["shards"][0]
    response = requests.get(f"{live_server.url}{BASE}{export.pk}/shards/{shard['name']}",
                            headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    assert [r.status_code for r in response.history] == [302] and response.status_code == 200
    assert "Content-Encoding" not in response.headers and response.headers["Content-Type"] == "application/gzip"
    assert len(response.content) == shard["bytes"]
    assert hashlib.sha256(response.content).hexdigest() == shard["sha256"]
    # fsspec (what load_dataset reads URLs with) learns the size from HEAD, answered by the platform, then reads a
    # range through the redirect, with the token kept from the store (aiohttp drops it for another host).
    http = fsspec.filesystem("http", client_kwargs={"headers": {"Authorization": f"Bearer {secret}"}})
    url = f"{live_server.url}{BASE}{export.pk}/shards/{shard['name']}"
    assert http.info(url)["size"] == shard["bytes"]
    assert http.cat_file(url, start=10, end=110) == response.content[10:110]
    assert s3_store.server.gate.seen[-1] == {"method": "GET", "authorization": None}


def test_the_gate_applies_s3_s_if_range_rule(s3_store, exports_on_s3):  # noqa: F811
    """S3 honours If-Range against its own ETag (RFC 9110 13.1.5); moto ignores it, the gate applies it. So resuming
    with the platform's ETag (a sha256) gets the whole object from the store, and with the store's a range."""
    storage, data = storage_named("exports-s3"), bytes(range(256)) * 4
    storage.save("probe.bin", ContentFile(data))
    store_etag = s3_store.client().head_object(Bucket=s3_store.bucket, Key=f"{exports_on_s3}/probe.bin")["ETag"]
    url = storage.url("probe.bin")
    sha256 = f'"{hashlib.sha256(data).hexdigest()}"'
    whole = requests.get(url, headers={"Range": "bytes=1000-", "If-Range": sha256}, timeout=10)
    assert whole.status_code == 200 and whole.content == data
    ranged = requests.get(url, headers={"Range": "bytes=1000-", "If-Range": store_etag}, timeout=10)
    assert ranged.status_code == 206 and ranged.content == data[1000:]
    storage.delete("probe.bin")


@pytest.mark.django_db(transaction=True)
def test_the_pull_script_resumes_a_cut_shard_from_the_store_with_only_the_missing_bytes(
        run_export, members, live_server, s3_store, exports_on_s3, tmp_path):  # noqa: F811
    export = run_export(filters={"n": 200}, shard_rows=200, validation_ratio=0)
    shard = export.manifest["shards"][0]
    whole = s3_store.client().get_object(Bucket=s3_store.bucket,
                                         Key=object_key(exports_on_s3, export, shard["name"]))["Body"].read()
    out = tmp_path / "pulled"
    out.mkdir()
    cut = len(whole) // 2
    (out / f"{shard['name']}.part").write_bytes(whole[:cut])  # a pull cut at half of the shard
    _, secret = account_services.issue_token(user=members["trainer"], name="pull", read_only=True)
    said = []
    dataplatform_pull.pull(f"{live_server.url}{BASE}{export.pk}/", out, token=secret, backoff=0, log=said.append)
    assert hashlib.sha256((out / shard["name"]).read_bytes()).hexdigest() == shard["sha256"]
    # The script writes "resuming" only for a 206 whose Content-Range starts at the cut (else it starts over): the
    # store sent the missing bytes only, though the redirect went to an object whose ETag is not the sha256.
    assert f"{shard['name']}: resuming at byte {cut:,}" in said
    assert not any("sha256 does not match" in line for line in said)


@pytest.mark.django_db
def test_head_on_a_shard_on_s3_is_answered_by_the_platform_for_each_role(run_export, members, s3_store,  # noqa: F811
                                                                         exports_on_s3):  # noqa: F811
    export = run_export(filters={"n": 30})
    shard = export.manifest["shards"][0]
    url = f"{BASE}{export.pk}/shards/{shard['name']}"
    seen_before = len(s3_store.server.gate.seen)
    for who in ROLES:
        response = client_as(members, who).head(url)
        assert response.status_code == EXPECTED[who], who
        if response.status_code == 200:
            # No redirect (a URL signed for GET refuses HEAD): size and ETag from the manifest, as a local file's.
            assert "Location" not in response and response["ETag"] == f'"{shard["sha256"]}"'
            assert int(response["Content-Length"]) == shard["bytes"] and response["Accept-Ranges"] == "bytes"
            assert response["Content-Type"] == content_type_of(shard["name"])
            assert response["Content-Disposition"] == attachment(export.pk, shard["name"])
    assert len(s3_store.server.gate.seen) == seen_before  # nothing signed, nothing sent on to the store
    # The manifest is not listed in itself: its size comes from the store.
    manifest = api_client_for(members["trainer"]).head(f"{BASE}{export.pk}/shards/manifest.json")
    stored = s3_store.client().head_object(Bucket=s3_store.bucket,
                                           Key=object_key(exports_on_s3, export, "manifest.json"))
    assert manifest.status_code == 200 and int(manifest["Content-Length"]) == stored["ContentLength"]
    # An object gone from the store is a 410 that says so, for HEAD as for GET.
    s3_store.client().delete_object(Bucket=s3_store.bucket, Key=object_key(exports_on_s3, export, shard["name"]))
    gone = api_client_for(members["trainer"]).head(url)
    assert gone.status_code == 410
