"""Files: static files, export shards (the filesystem or S3), and the largest upload an import takes."""

import os

from django.core.exceptions import ImproperlyConfigured

from .core import BASE_DIR, DATA_DIR
from .env import env_bool, env_float, env_int, env_path, env_str, env_url

STATIC_URL = "static/"
# The Docker image collects static files into the image (STATIC_ROOT=/app/staticfiles). Only
# collectstatic writes here, and it makes the folder.
STATIC_ROOT = env_path("STATIC_ROOT", DATA_DIR / "static")
# htmx comes from the npm registry (frontend/package.json); `npm ci` puts it here.
STATICFILES_DIRS = [("vendor/htmx", BASE_DIR / "frontend" / "node_modules" / "htmx.org" / "dist")]

# --- Storage: export shards go to the "exports" storage --------------------------
# The filesystem under DATA_DIR by default; S3 (or any S3-compatible store) through
# django-storages when EXPORTS_S3_BUCKET is set. Credentials come from the usual AWS_*
# variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or the machine's role.
EXPORTS_S3_BUCKET = env_str("EXPORTS_S3_BUCKET")
# Each export records the storage it was written to (one of these aliases) and is served and deleted from there,
# whichever storage new exports go to: switching EXPORTS_S3_BUCKET on or off strands none of them, and
# `manage.py move_exports` moves them from one to the other (docs/operations.md).
EXPORTS_FILES_STORAGE = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": str(DATA_DIR / "files"), "base_url": None},
}
# The endpoint signed download URLs name, when trainers reach the store at another address than the platform does
# (a store inside compose, `http://minio:9000`, published as `https://s3.example.org`); only signing uses it.
EXPORTS_S3_PUBLIC_ENDPOINT_URL = env_url("EXPORTS_S3_PUBLIC_ENDPOINT_URL", None)
# "path" (https://host/bucket/key: MinIO, Ceph RGW, SeaweedFS, a store behind one host name), "virtual"
# (https://bucket.host/key) or "auto" (botocore's choice: virtual where the bucket name allows it, on AWS).
EXPORTS_S3_ADDRESSING_STYLE = env_str("EXPORTS_S3_ADDRESSING_STYLE", "auto")
if EXPORTS_S3_ADDRESSING_STYLE not in ("auto", "path", "virtual"):
    raise ImproperlyConfigured("EXPORTS_S3_ADDRESSING_STYLE is auto, path or virtual.")
EXPORTS_S3_STORAGE = {
    # django-storages' S3Storage that writes each object's content type (and no Content-Encoding) and signs with
    # the public endpoint.
    "BACKEND": "dataplatform.exports.s3.ExportS3Storage",
    "OPTIONS": {
        "bucket_name": EXPORTS_S3_BUCKET,
        "location": env_str("EXPORTS_S3_PREFIX"),
        "endpoint_url": env_url("EXPORTS_S3_ENDPOINT_URL", None),
        "public_endpoint_url": EXPORTS_S3_PUBLIC_ENDPOINT_URL,
        "addressing_style": None if EXPORTS_S3_ADDRESSING_STYLE == "auto" else EXPORTS_S3_ADDRESSING_STYLE,
        "region_name": env_str("EXPORTS_S3_REGION") or None,
        "file_overwrite": True,
        "querystring_expire": 3600,  # shard downloads redirect to URLs signed for an hour
        # SigV4 always: without it botocore signs URLs with SigV2 in us-east-1 or without a region, which AWS is
        # retiring and regions opened since 2014 refuse.
        "signature_version": "s3v4",
    },
} if EXPORTS_S3_BUCKET else None
# Where new exports are written: "s3" when a bucket is set, else "files". EXPORTS_WRITE_TO=files with the bucket
# still set writes to the filesystem while the exports on S3 are still served (e.g. to move them back).
EXPORTS_WRITE_TO = env_str("EXPORTS_WRITE_TO") or ("s3" if EXPORTS_S3_BUCKET else "files")
if EXPORTS_WRITE_TO not in ("files", "s3") or (EXPORTS_WRITE_TO == "s3" and not EXPORTS_S3_BUCKET):
    raise ImproperlyConfigured("EXPORTS_WRITE_TO is files or s3 (s3 needs EXPORTS_S3_BUCKET).")
# The alias new exports are written to; "exports" is that storage too (what older code and tools open).
EXPORTS_STORAGE_ALIAS = f"exports-{EXPORTS_WRITE_TO}"
EXPORTS_STORAGE = EXPORTS_S3_STORAGE if EXPORTS_WRITE_TO == "s3" else EXPORTS_FILES_STORAGE
# A FileSystemStorage makes its folders as it saves files.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(DATA_DIR / "media")}},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "exports": EXPORTS_STORAGE,
    "exports-files": EXPORTS_FILES_STORAGE,
    **({"exports-s3": EXPORTS_S3_STORAGE} if EXPORTS_S3_STORAGE else {}),
}
# The system page and its API probe each export storage (write, list and delete a tiny object: exports/health.py) at
# most this often; the page polls every few seconds, and a probe is a few requests to the store.
EXPORTS_HEALTH_CACHE_SECONDS = env_float("EXPORTS_HEALTH_CACHE_SECONDS", 30.0)
EXPORT_DEFAULT_SHARD_ROWS = env_int("EXPORT_DEFAULT_SHARD_ROWS", 100000)
EXPORT_BATCH_ROWS = env_int("EXPORT_BATCH_ROWS", 10000)
# Parquet row groups: at most this many rows (pyarrow's write_table default), and an export's shards hold back at most
# about this many bytes of Arrow data together before the fullest writes a row group (exports.writers.RowGroups):
# what a worker holds in memory besides its batches.
EXPORT_PARQUET_ROW_GROUP_ROWS = env_int("EXPORT_PARQUET_ROW_GROUP_ROWS", 1024 * 1024)
EXPORT_PARQUET_ROW_GROUP_BYTES = env_int("EXPORT_PARQUET_ROW_GROUP_BYTES", 16 * 1024 * 1024)
# Stored kinds (exports/stored.py) derive a source's rows when it settles: a worker builds them this many seconds after
# the first of a burst of settles (EXPORTS_BUILD_AHEAD off: only exports and the sweep derive them), and every worker's
# beat builds what was missed, and drops the rows no export can read, at this interval.
EXPORTS_BUILD_AHEAD = env_bool("EXPORTS_BUILD_AHEAD", True)
EXPORTS_BUILD_DEBOUNCE_SECONDS = env_float("EXPORTS_BUILD_DEBOUNCE_SECONDS", 5.0)
EXPORTS_BUILD_INTERVAL_SECONDS = env_float("EXPORTS_BUILD_INTERVAL_SECONDS", 300.0)
# A stored kind's export reads about this many bytes of JSON documents a batch (fewer rows than EXPORT_BATCH_ROWS
# where its rows are large). The reader holds two batches at once (it reads the next while this one is parsed):
# swe.trajectories at 100k rows, 8 MB: 2.1 s, 255 MB (185 at 10k); 4 MB: 2.0 s, 223 MB (186); 2 MB: 2.2 s, 203 MB.
EXPORT_STORED_BATCH_BYTES = env_int("EXPORT_STORED_BATCH_BYTES", 4 * 1024 * 1024)
# pyarrow's allocator, read when pyarrow is first imported (after the settings). An export worker's
# reader, parser and writer threads each allocate a batch's worth at a time: mimalloc, pyarrow's default,
# keeps ~60 MB more of them resident than jemalloc does (bench/export_bench.py), at the same speed.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")

# --- Imports: the largest file one upload may carry (JSONL, .panda.json, taxonomy YAML) ---
# Checked from the upload's size before a byte of it is read (dataplatform/imports/). Lines are
# read in chunks, but an import is one transaction and holds the file's parsed records in memory
# until it writes, so a web process needs a few times this much RAM per concurrent import. 2 GiB
# is well above any single dataset file we import (a SWE-bench split is tens of MB) while bounding
# that memory, the temporary file Django spools the upload to, and how long one request can run.
# Split bigger files: each part imports on its own, and re-importing a part adds nothing.
# The proxy's body limit (client_max_body_size) should be a little above this: docs/operations.md.
IMPORT_MAX_FILE_BYTES = env_int("IMPORT_MAX_FILE_BYTES", 2 * 1024**3)

# --- .panda.json files: bounded by what they expand to (annotate/panda_json/) ----------------------------------
# A .panda.json upload is at most 50 MiB (MAX_FILE_BYTES in annotate/panda_json/parser.py). Its hash_map references
# may add as much as the largest file holds, so reading them costs about what reading the largest file does.
# hash_map: each reference is put back, stored and tokenized in full; what they add (each value named, as UTF-8
# JSON, once per reference) is counted before anything is expanded, and a file past this is refused.
PANDA_JSON_MAX_EXPANDED_BYTES = env_int("PANDA_JSON_MAX_EXPANDED_BYTES", 50 * 1024**2)
# cache_tree: the JSON its lz-string spells, in UTF-16 code units (as lz-string counts). Decompression stops as soon
# as it passes this (about 2 bytes per character, plus 8 per code read), and a file past it is refused at import.
# Reaching the cap costs a web worker about 35 MB and 0.05 s at 16 Mi characters (a 30 KB bomb that spells 10^8
# characters included), ~100 MB at 50 Mi. A file whose cache is larger is refused with a message that says to drop
# cache_tree (only the app's cached probabilities are lost); raise this for such files.
PANDA_CACHE_TREE_MAX_CHARS = env_int("PANDA_CACHE_TREE_MAX_CHARS", 16 * 1024**2)

# --- Taxonomy files (YAML, a zip of the published definition files): bounded by what they expand to ---
# An alias in YAML is a copy of the node it names (dataplatform/yamlfile.py counts it so). A real taxonomy is a
# few thousand nodes (the shipped swe_v1.yaml 3,060 for 274 families and tags; the published domain_l2.yaml about
# 2,000); 50,000 is some 4,500 entries. PyYAML reads about 40,000 nodes a second, so this also bounds the time
# one file takes to read. An alias of a long text is one node but a long walk each time it is read (a regex, a
# copy, the stored JSON): text is bounded at twice the largest taxonomy upload (2,000,000 bytes).
YAML_MAX_EXPANDED_NODES = env_int("YAML_MAX_EXPANDED_NODES", 50_000)
YAML_MAX_EXPANDED_CHARS = env_int("YAML_MAX_EXPANDED_CHARS", 4_000_000)
# A zip of the published folder (labeler/upstream.py): its files, and the bytes they unpack to, all told (the
# folder is well under 1 MB). Each definition file read from it is also at most 2,000,000 bytes, as uploaded loose.
TAXONOMY_ZIP_MAX_MEMBERS = env_int("TAXONOMY_ZIP_MAX_MEMBERS", 200)
TAXONOMY_ZIP_MAX_UNPACKED_BYTES = env_int("TAXONOMY_ZIP_MAX_UNPACKED_BYTES", 20 * 1024**2)
