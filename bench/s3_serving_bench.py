"""Benchmark of serving export files from S3 the way clients need: what a trainer's client receives through the shard
API's redirect, before and after issue 45's changes, against the S3 protocol server the tests use (moto's server mode
with IAM authentication on, behind the gate that applies S3's rules moto does not, If-Range among them:
tests/s3_store.py).

It prints a table; it is not a test and fails on nothing (it exits non-zero only when a download does not verify).
A stand-in for the shard API on a free localhost port answers each GET with a 302 to a freshly signed URL, as
`ExportShardApi` does, so the clients below follow a real redirect to the store. It measures:

- resume: a shard of SHARD_MB MiB (random bytes, uploaded as the platform writes it: a multipart upload past 8 MiB,
  so the store's ETag is "<md5 of parts>-<parts>"), cut at half as NAME.part, then continued by the pull script's
  `_download`: "before" with urllib's own redirect handling (which forwards `If-Range: "<sha256>"` to the store),
  "after" with the script as it is (Range alone after a redirect). Bytes received after the cut, and seconds; the
  raw baseline is one plain GET of the whole object in the same run.
- a `.jsonl.gz` shard fetched with `requests.get` through the redirect: "before" written by django-storages'
  S3Storage as `storage.publish` used to (it guesses `Content-Encoding: gzip` from the name, and requests then
  decompresses), "after" by the platform's ExportS3Storage (ContentType application/gzip, no Content-Encoding);
  bytes received and whether their sha256 is the file's. The raw baseline is the file's size.

Run from the project root (a few seconds; needs neither PostgreSQL nor Redis):

    .venv/bin/python bench/s3_serving_bench.py [--shard-mb 12]
"""

import argparse
import gzip
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

BENCH_DIR = ROOT / "var" / "bench-s3-serving"
os.environ["DATA_DIR"] = str(BENCH_DIR)
os.environ["DATABASE_URL"] = f"sqlite:///{BENCH_DIR / 'db.sqlite3'}"  # never opened: no export is run here
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
os.environ.pop("EXPORTS_S3_BUCKET", None)
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

shutil.rmtree(BENCH_DIR, ignore_errors=True)
BENCH_DIR.mkdir(parents=True)
django.setup()

import requests  # noqa: E402
from django.core.files.base import ContentFile  # noqa: E402
from storages.backends.s3 import S3Storage  # noqa: E402

from dataplatform.exports.pull_script import dataplatform_pull  # noqa: E402
from dataplatform.exports.s3 import ExportS3Storage  # noqa: E402
from tests.s3_store import start_s3_store, stop_s3_store  # noqa: E402


def redirector(storages: dict):
    """A stand-in for the shard API: GET /<storage>/<name> answers 302 to a URL signed just now."""

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (http.server's name)
            which, name = self.path.strip("/").split("/", 1)
            self.send_response(302)
            self.send_header("Location", storages[which].url(name))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def resume(url: str, part: Path, entry: dict, cut: int, opener) -> tuple[int, float]:
    """Bytes received and seconds to finish `part` (cut at `cut`) with the pull script's _download and `opener`."""
    said = []
    original, dataplatform_pull._OPENER = dataplatform_pull._OPENER, opener
    try:
        client = dataplatform_pull.Client("bench-token", retries=1, log=said.append)
        started = time.perf_counter()
        dataplatform_pull._download(client, url, part, entry)
        seconds = time.perf_counter() - started
    finally:
        dataplatform_pull._OPENER = original
    if dataplatform_pull.file_sha256(part) != entry["sha256"]:
        raise SystemExit(f"{part.name}: the resumed file does not verify")
    resumed = any("resuming at byte" in line for line in said)
    return part.stat().st_size - (cut if resumed else 0), seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard-mb", type=int, default=12)
    args = parser.parse_args()
    store = start_s3_store()
    try:
        options = store.storage_settings("bench")["OPTIONS"]
        platform = ExportS3Storage(**options)
        before = S3Storage(**{k: v for k, v in options.items() if k != "public_endpoint_url"})
        server = redirector({"platform": platform, "before": before})
        base = f"http://127.0.0.1:{server.server_address[1]}"
        rows = []

        data = os.urandom(args.shard_mb * 1024 * 1024)
        name = "train-00000-of-00001.parquet"
        platform.save(name, ContentFile(data))
        entry = {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        started = time.perf_counter()
        raw = len(urllib.request.urlopen(f"{base}/platform/{name}").read())
        raw_seconds = time.perf_counter() - started
        etag = store.client().head_object(Bucket=store.bucket, Key=f"bench/{name}")["ETag"]
        cut = len(data) // 2
        figures = {}
        for label, opener in (("before", urllib.request.build_opener()), ("after", dataplatform_pull._OPENER)):
            part = BENCH_DIR / f"{label}-{name}.part"
            part.write_bytes(data[:cut])
            figures[label] = resume(f"{base}/platform/{name}", part, entry, cut, opener)
        rows.append((f"resume after a cut at {cut:,} of {len(data):,} (store ETag {etag})", "", "", ""))
        rows.append(("  raw: one GET of the whole object", f"{raw:,}", f"{raw_seconds:.2f}", ""))
        for label in ("before", "after"):
            received, seconds = figures[label]
            rows.append((f"  {label}: bytes received after the cut", f"{received:,}", f"{seconds:.2f}",
                         f"{received / raw:.2f}x raw"))

        text = "".join(json.dumps({"id": i, "text": "word " * (i % 40)}) + "\n" for i in range(60)).encode()
        packed = gzip.compress(text, mtime=0)
        gz = "train-00000-of-00001.jsonl.gz"
        rows.append((f".jsonl.gz via requests.get ({len(text):,} bytes of text)", "", "", ""))
        rows.append(("  raw: the file's size", f"{len(packed):,}", "", ""))
        for label, which in (("before", "before"), ("after", "platform")):
            storage = {"before": before, "platform": platform}[which]
            storage.save(f"{label}/{gz}", ContentFile(packed))
            received = requests.get(f"{base}/{which}/{label}/{gz}", timeout=30).content
            same = hashlib.sha256(received).digest() == hashlib.sha256(packed).digest()
            rows.append((f"  {label}: bytes received", f"{len(received):,}", "",
                         "sha256 = the file's" if same else "sha256 differs"))
        server.shutdown()
        server.server_close()
    finally:
        stop_s3_store(store)
    benchlib.print_table(("figure", "bytes", "seconds", "note"), rows)
    shutil.rmtree(BENCH_DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
