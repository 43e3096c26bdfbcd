"""The export storages the settings configure: each export's own storage stays configured whichever new exports use."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SHOW = ("import json, dataplatform.settings as s; print(json.dumps([s.EXPORTS_STORAGE_ALIAS, "
        "sorted(a for a in s.STORAGES if a.startswith('exports')), s.STORAGES['exports'] == s.STORAGES[s.EXPORTS_STORAGE_ALIAS],"
        " (s.EXPORTS_S3_STORAGE or {}).get('OPTIONS', {}).get('signature_version')]))")


def settings_with(**env: str):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTS_")}
    return subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, env=clean | env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, ["exports-files", ["exports", "exports-files"], True, None]),
    ({"EXPORTS_S3_BUCKET": "b"}, ["exports-s3", ["exports", "exports-files", "exports-s3"], True, "s3v4"]),
    # The bucket stays configured (its exports served, moved back) while new exports go to disk.
    ({"EXPORTS_S3_BUCKET": "b", "EXPORTS_WRITE_TO": "files"},
     ["exports-files", ["exports", "exports-files", "exports-s3"], True, "s3v4"]),
])
def test_new_exports_go_to_one_storage_and_every_configured_one_is_served(env, expected):
    result = settings_with(**env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_writing_to_s3_without_a_bucket_stops_the_settings():
    result = settings_with(EXPORTS_WRITE_TO="s3")
    assert result.returncode != 0
    assert "EXPORTS_WRITE_TO is files or s3 (s3 needs EXPORTS_S3_BUCKET)." in result.stderr


def test_the_s3_storage_signs_at_the_public_endpoint_in_the_addressing_style_named():
    show = ("import json, dataplatform.settings as s; o = s.STORAGES['exports-s3']; print(json.dumps([o['BACKEND'], "
            "o['OPTIONS']['endpoint_url'], o['OPTIONS']['public_endpoint_url'], o['OPTIONS']['addressing_style']]))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTS_")}
    env = clean | {"EXPORTS_S3_BUCKET": "b", "EXPORTS_S3_ENDPOINT_URL": "http://minio:9000",
                   "EXPORTS_S3_PUBLIC_ENDPOINT_URL": "https://s3.example.org", "EXPORTS_S3_ADDRESSING_STYLE": "path"}
    result = subprocess.run([sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [
        "dataplatform.exports.s3.ExportS3Storage", "http://minio:9000", "https://s3.example.org", "path"]
    wrong = settings_with(EXPORTS_S3_BUCKET="b", EXPORTS_S3_ADDRESSING_STYLE="host")
    assert wrong.returncode != 0 and "EXPORTS_S3_ADDRESSING_STYLE is auto, path or virtual." in wrong.stderr
