"""An S3 protocol server for the tests that run exports on object storage: moto's server mode on 127.0.0.1, with
its IAM authentication on, as an operator's bucket is (every request SigV4-checked against a user's policy).

moto checks header signatures only: a presigned URL (the shard API's redirect) reaches its IAM check without an
Authorization header and fails there. So the server runs behind a gate (`presigned_gate`) that applies S3's
documented rules for query-string authentication (SigV4 only, the signature over method, path, query and signed
headers, the expiry, one auth mechanism per request), and If-Range, which moto ignores, and hands a request that
passes them on to moto signed in the header with the same user's key: the policy is then checked by moto as for any
other request.

`s3_store` starts one server per test session (per test process) with one bucket and one IAM user whose policy
allows that bucket only; `exports_on_s3` points the platform's exports storage at it for one test, under a key
prefix of its own, so tests never see each other's objects. Test modules import the fixtures they use.
"""

import datetime
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode

import boto3
import pytest
import requests
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

BUCKET = "dataplatform-exports"
REGION = "us-east-1"


def forget_export_storages() -> None:
    """Django's storage handler caches each backend it built: drop the exports' so the next use reads the settings."""
    from django.core.files.storage import storages

    for alias in ("exports", "exports-files", "exports-s3"):
        storages._storages.pop(alias, None)


@dataclass
class S3Store:
    server: object  # moto's ThreadedMotoServer
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str

    def client(self, *, access_key: str | None = None, secret_key: str | None = None):
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=access_key or self.access_key,
                            aws_secret_access_key=secret_key or self.secret_key,
                            config=Config(retries={"max_attempts": 1}))

    def keys(self, prefix: str = "") -> list[str]:
        listed = self.client().list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def storage_settings(self, location: str, **options) -> dict:
        """A STORAGES entry for this store, as settings/storage.py makes one from EXPORTS_S3_*, with this user's
        keys (in production they come from AWS_* or the machine's role)."""
        return {"BACKEND": "dataplatform.exports.s3.ExportS3Storage", "OPTIONS": {
            "bucket_name": self.bucket, "location": location, "endpoint_url": self.endpoint, "region_name": REGION,
            "access_key": self.access_key, "secret_key": self.secret_key, "file_overwrite": True,
            "querystring_expire": 3600, "signature_version": "s3v4", **options}}


def _s3_error(start_response, status: str, code: str, message: str):
    start_response(status, [("Content-Type", "application/xml")])
    return [f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message>"
            f"</Error>".encode()]


def _signing_key(secret: str, day: str, region: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _presigned_problem(environ, query: list[tuple[str, str]], secrets: dict[str, str]) -> tuple[str, str] | None:
    """Why S3 would refuse this query-signed request (its code and message), or None. The rules of S3's "Authenticating
    Requests: Using Query Parameters (AWS Signature Version 4)"; SigV2 (`Signature=`, `AWSAccessKeyId=`) is refused,
    as regions opened since 2014 do and as AWS is retiring it everywhere."""
    params = dict(query)
    if "X-Amz-Signature" not in params:
        return "AccessDenied", "Only AWS4-HMAC-SHA256 query authentication is accepted here (SigV2 is retired)."
    if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
        return "AuthorizationQueryParametersError", "X-Amz-Algorithm only supports AWS4-HMAC-SHA256"
    access_key, day, region, service, terminator = params.get("X-Amz-Credential", "////").split("/")[:5]
    if access_key not in secrets:
        return "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
    signed_at = datetime.datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    if datetime.datetime.now(datetime.UTC) > signed_at + datetime.timedelta(seconds=int(params["X-Amz-Expires"])):
        return "AccessDenied", "Request has expired"
    signed_headers = params["X-Amz-SignedHeaders"].split(";")
    if "host" not in signed_headers:
        return "AuthorizationQueryParametersError", "Query-string authentication requires the host header signed."
    path = environ.get("RAW_URI", environ["PATH_INFO"]).split("?", 1)[0]
    canonical_query = "&".join(sorted(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in query
                                      if k != "X-Amz-Signature"))
    headers = "".join(f"{name}:{environ.get('HTTP_' + name.upper().replace('-', '_'), '').strip()}\n"
                      for name in signed_headers)
    canonical = "\n".join([environ["REQUEST_METHOD"], path, canonical_query, headers, ";".join(signed_headers),
                           "UNSIGNED-PAYLOAD"])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", params["X-Amz-Date"], f"{day}/{region}/{service}/{terminator}",
                         hashlib.sha256(canonical.encode()).hexdigest()])
    expected = hmac.new(_signing_key(secrets[access_key], day, region), to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, params["X-Amz-Signature"]):
        # Also what a URL signed for GET and sent as HEAD gets: the method is part of what is signed.
        return "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
    return None


def _sign_in_header(environ, method: str, credentials: Credentials, region: str) -> None:
    host = environ["HTTP_HOST"]
    request = AWSRequest(method=method, url=f"http://{host}{environ['RAW_URI']}", headers={"Host": host})
    S3SigV4Auth(credentials, "s3", region).add_auth(request)
    for name, value in request.headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value


def _apply_if_range(app, environ, credentials: Credentials, region: str) -> None:
    """S3 honours If-Range (RFC 9110 13.1.5), moto ignores it: a Range whose If-Range is not the object's own ETag
    (S3's, an MD5 or "<md5 of parts>-<parts>") gets the whole object. So the Range is dropped here in that case."""
    head = {**environ, "REQUEST_METHOD": "HEAD"}
    head.pop("HTTP_RANGE", None)
    head.pop("HTTP_IF_RANGE", None)
    _sign_in_header(head, "HEAD", credentials, region)
    answered = {}
    body = app(head, lambda status, headers, exc_info=None: answered.update(headers))
    try:
        for _ in body:
            pass
    finally:
        getattr(body, "close", lambda: None)()
    if environ["HTTP_IF_RANGE"].strip() != answered.get("ETag", answered.get("etag")):
        del environ["HTTP_RANGE"]


def presigned_gate(app, secrets: dict[str, str], region: str = REGION):
    """WSGI middleware in front of moto: checks query-signed requests as S3 does, then passes them on signed in the
    header (what moto checks) with the same key. Records each query-signed request's method and headers."""
    seen: list[dict] = []

    def gate(environ, start_response):
        query = parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        if not any(k in ("X-Amz-Signature", "Signature", "X-Amz-Credential", "AWSAccessKeyId") for k, _ in query):
            return app(environ, start_response)
        seen.append({"method": environ["REQUEST_METHOD"], "authorization": environ.get("HTTP_AUTHORIZATION")})
        if environ.get("HTTP_AUTHORIZATION"):
            return _s3_error(start_response, "400 Bad Request", "InvalidArgument",
                             "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature "
                             "query string parameter or the Authorization header should be specified")
        if problem := _presigned_problem(environ, query, secrets):
            return _s3_error(start_response, "403 Forbidden", *problem)
        access_key = dict(query)["X-Amz-Credential"].split("/")[0]
        rest = [(k, v) for k, v in query if not k.startswith("X-Amz-")]
        environ["QUERY_STRING"] = urlencode(rest)
        path = environ.get("RAW_URI", environ["PATH_INFO"]).split("?", 1)[0]
        environ["RAW_URI"] = environ["REQUEST_URI"] = f"{path}?{environ['QUERY_STRING']}" if rest else path
        credentials = Credentials(access_key, secrets[access_key])
        if environ.get("HTTP_IF_RANGE") and environ.get("HTTP_RANGE"):
            _apply_if_range(app, environ, credentials, region)
        _sign_in_header(environ, environ["REQUEST_METHOD"], credentials, region)
        return app(environ, start_response)

    gate.seen = seen
    return gate


def _bucket_policy(bucket: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": "s3:*",
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]})


def _gated_moto_server():
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class GatedMotoServer(ThreadedMotoServer):
        """ThreadedMotoServer with `presigned_gate` in front of its application."""

        secrets: dict[str, str]

        def _server_entry(self) -> None:
            self.secrets = {}
            self.gate = presigned_gate(DomainDispatcherApplication(create_backend_app), self.secrets)
            self._server = make_server(self._ip_address, self._port, self.gate, True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return GatedMotoServer


def start_s3_store() -> S3Store:
    """Start the server on a free port, make the bucket and a user allowed that bucket only, then switch
    authentication on: from then on a request must be signed with that user's key and allowed by its policy."""
    server = _gated_moto_server()(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    setup = {"endpoint_url": endpoint, "region_name": REGION, "aws_access_key_id": "setup",
             "aws_secret_access_key": "setup"}
    # moto's INITIAL_NO_AUTH_ACTION_COUNT, set on the running server (its state is the process's, shared by every
    # server a test starts): no authentication while the bucket and user are made, then none without it.
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()
    bucket, user = f"{BUCKET}-{uuid.uuid4().hex[:8]}", f"exports-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", **setup).create_bucket(Bucket=bucket)
    iam = boto3.client("iam", **setup)
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="exports-bucket", PolicyDocument=_bucket_policy(bucket))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    server.secrets[key["AccessKeyId"]] = key["SecretAccessKey"]
    return S3Store(server=server, endpoint=endpoint, bucket=bucket, access_key=key["AccessKeyId"],
                   secret_key=key["SecretAccessKey"])


@pytest.fixture(scope="session")
def s3_store():
    store = start_s3_store()
    yield store
    stop_s3_store(store)


@pytest.fixture
def exports_on_s3(settings, s3_store, export_storage_in_tmp):
    """New exports go to the S3 store (alias "exports-s3"), under a key prefix of this test's; the filesystem
    storage stays configured (in a temporary folder) for exports written there. Yields the prefix."""
    location = f"t-{uuid.uuid4().hex[:12]}"
    use_s3(settings, s3_store, location)
    yield location
    forget_export_storages()


def use_s3(settings, store: S3Store, location: str, **options) -> None:
    """Point "exports-s3" (and new exports) at `store`, with `options` over its usual ones (a wrong bucket, keys...)."""
    s3 = store.storage_settings(location, **options)
    settings.STORAGES = {**settings.STORAGES, "exports": s3, "exports-s3": s3}
    settings.EXPORTS_STORAGE_ALIAS = "exports-s3"
    forget_export_storages()


def stop_s3_store(store: S3Store) -> None:
    """Stop the server and close its socket: connections to it are refused, as to a store that is down."""
    store.server.stop()
    store.server._server.server_close()


def restart_s3_store(store: S3Store) -> None:
    """Start a stopped store again on its port. moto's state (the bucket, its objects, the user) is the process's, so
    the store comes back as it was, as a real one does after an outage."""
    secrets = dict(store.server.secrets)
    store.server._port = int(store.endpoint.rsplit(":", 1)[1])
    store.server.start()
    store.server.secrets.update(secrets)
