import io
import json
import os

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from dataplatform.accounts import services as account_services
from dataplatform.exports.writers import file_sha256


@pytest.mark.django_db
def test_export_command_writes_a_verified_folder(project, tmp_path):
    out = tmp_path / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("export", "test.synthetic", "--project", "alpha", "--filter", "n=40", "--shard-rows", "15",
                 "--validation-ratio", "0.2", "--out", str(out), stdout=stdout, stderr=stderr)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["totals"]["rows"] == 40 and "40 rows" in stdout.getvalue()
    for shard in manifest["shards"]:
        assert file_sha256(out / shard["name"]) == shard["sha256"]
    assert "40/40" in stderr.getvalue()  # the terminal progress bar reached the end
    assert (out / "README.md").exists()


@pytest.mark.django_db
def test_export_command_errors(project, tmp_path):
    with pytest.raises(CommandError, match="No project"):
        call_command("export", "test.synthetic", "--project", "nope", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="Unknown export kind"):
        call_command("export", "nope", "--project", "alpha", "--out", str(tmp_path))
    with pytest.raises(CommandError, match="generator broke"):
        call_command("export", "test.synthetic", "--project", "alpha", "--filter", "n=5", "--filter", "fail_at=3",
                     "--out", str(tmp_path), stderr=io.StringIO())


@pytest.fixture
def served_export(live_server, project, members, run_export):
    export = run_export(filters={"n": 3000}, shard_rows=1000, validation_ratio=0.1)
    _, secret = account_services.issue_token(user=members["trainer"], name="pull", read_only=True)
    url = f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/"
    return export, url, secret


@pytest.mark.django_db(transaction=True)
def test_pull_downloads_and_verifies(served_export, tmp_path):
    export, url, secret = served_export
    out = tmp_path / "pulled"
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("pull", url, "--token", secret, "--out", str(out), stdout=stdout, stderr=stderr)
    assert json.loads((out / "manifest.json").read_text()) == export.manifest
    assert sum(pq.read_table(out / s["name"]).num_rows for s in export.manifest["shards"]) == 3000
    assert secret not in stdout.getvalue() + stderr.getvalue()
    # A second pull finds everything complete and downloads nothing.
    again = io.StringIO()
    call_command("pull", url, "--token", secret, "--out", str(out), stdout=io.StringIO(), stderr=again)
    # The shards, and the dataset card where the manifest lists its sha256.
    assert again.getvalue().count("already complete") == len(export.manifest["shards"]) + ("card" in export.manifest)


@pytest.mark.django_db(transaction=True)
def test_pull_resumes_a_partial_file_with_range(served_export, tmp_path, export_storage_in_tmp):
    export, url, secret = served_export
    shard = export.manifest["shards"][0]
    source = (export_storage_in_tmp / export.location / shard["name"]).read_bytes()
    out = tmp_path / "pulled"
    out.mkdir()
    (out / f"{shard['name']}.part").write_bytes(source[: len(source) // 2])
    call_command("pull", url, "--token", secret, "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    assert (out / shard["name"]).read_bytes() == source
    assert not (out / f"{shard['name']}.part").exists()


@pytest.mark.django_db(transaction=True)
def test_pull_downloads_again_over_a_corrupt_partial_file(served_export, tmp_path):
    export, url, secret = served_export
    shard = export.manifest["shards"][0]
    out = tmp_path / "pulled"
    out.mkdir()
    (out / f"{shard['name']}.part").write_bytes(b"\0" * 100)  # not the start of the real file
    stderr = io.StringIO()
    call_command("pull", url, "--token", secret, "--out", str(out), stdout=io.StringIO(), stderr=stderr)
    assert file_sha256(out / shard["name"]) == shard["sha256"]
    assert f"{shard['name']}: sha256 does not match the manifest; downloading it again" in stderr.getvalue()


@pytest.mark.django_db(transaction=True)
def test_pull_rejects_a_shard_that_stays_corrupt(served_export, tmp_path, export_storage_in_tmp):
    export, url, secret = served_export
    shard = export.manifest["shards"][0]
    stored = export_storage_in_tmp / export.location / shard["name"]
    stored.write_bytes(b"\0" * shard["bytes"])  # corrupt on the server: every download fails the check
    out = tmp_path / "pulled"
    with pytest.raises(CommandError, match=f"{shard['name']}: sha256 .* does not match the manifest's"):
        call_command("pull", url, "--token", secret, "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    assert not (out / shard["name"]).exists() and not (out / "manifest.json").exists()


@pytest.mark.django_db(transaction=True)
def test_pull_with_a_bad_token_says_so(served_export, tmp_path):
    _, url, _ = served_export
    with pytest.raises(CommandError, match="HTTP 401"):
        call_command("pull", url, "--token", "dp_wrong", "--out", str(tmp_path))


def test_pull_needs_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("DATAPLATFORM_TOKEN", raising=False)
    with pytest.raises(CommandError, match="API token"):
        call_command("pull", "http://127.0.0.1:9/x/", "--token", "", "--out", str(tmp_path))
    assert os.listdir(tmp_path) == []
