"""The stand-alone pull script, run as a trainer's machine runs it: a Python without Django, against a live server.

The server side is watched (and, where a test needs it, made to fail) by wrapping the shard view's
file_response in the live server's thread: every request's Range header, status and length is recorded.
"""

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import datasets
import pytest
from datasets import load_dataset
from django.http import HttpResponse
from werkzeug import Response

from dataplatform.accounts import services as account_services
from dataplatform.exports import api as exports_api
from dataplatform.exports import cards
from dataplatform.exports.pull_script import dataplatform_pull
from dataplatform.jobs.models import Job, JobState

from .kinds import SCHEMA
from .snippets import load_section_blocks, run_blocks

SCRIPT = Path(dataplatform_pull.__file__)
LIVE = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory) -> str:
    """A venv with the standard library only (not even pip), created once per session."""
    folder = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = str(folder / "bin" / "python")
    probe = subprocess.run([python, "-c", "import django"], capture_output=True, text=True, env=_clean_env(),
                           cwd=folder)
    assert probe.returncode != 0 and "No module named 'django'" in probe.stderr
    return python


def _clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "DATAPLATFORM_TOKEN"}
    return env | extra


def run_script(python: str, *args: str, token: str | None, cwd: Path, script: Path = SCRIPT):
    env = _clean_env(**({"DATAPLATFORM_TOKEN": token} if token is not None else {}))
    result = subprocess.run([python, str(script), *args, "--backoff", "0.01"], env=env, cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    if token:
        assert token not in result.stdout + result.stderr
    return result


@dataclass
class Served:
    name: str
    range: str | None
    status: int
    length: int


@pytest.fixture
def server(monkeypatch):
    """What the live server sent for each file request, and faults to answer the next requests of a file with:
    an HTTP status (sent with Retry-After: 0) or "cut" (the connection drops after half the body)."""
    seen: list[Served] = []
    faults: dict[str, list] = {}
    real = exports_api.file_response

    def cut(chunks, limit: int):
        sent = 0
        for chunk in chunks:
            yield chunk[: limit - sent]
            sent += len(chunk)
            if sent >= limit:
                raise ConnectionAbortedError("the test cuts this download")

    def spy(request, **kwargs):
        name = kwargs["filename"].split("-", 2)[2]  # export-<id>-<name>
        fault = faults.get(name, []).pop(0) if faults.get(name) else None
        if isinstance(fault, int):
            response = HttpResponse(status=fault, headers={"Retry-After": "0"})
        else:
            response = real(request, **kwargs)
            if fault == "cut":
                response.streaming_content = cut(response.streaming_content, kwargs["size"] // 2)
        seen.append(Served(name, request.headers.get("Range"), response.status_code,
                           int(response.get("Content-Length") or 0)))
        return response

    monkeypatch.setattr(exports_api, "file_response", spy)
    return SimpleNamespace(seen=seen, faults=faults, of=lambda name: [s for s in seen if s.name == name])


@pytest.fixture
def pullable(live_server, members, run_export, export_storage_in_tmp):
    """A finished export of 4 shards (3 train, 1 validation), its URL, a trainer's token and its stored files."""
    export = run_export(filters={"n": 300}, shard_rows=100, validation_ratio=0.1)
    assert len(export.manifest["shards"]) == 4
    _, secret = account_services.issue_token(user=members["trainer"], name="pull-script", read_only=True)
    url = f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/"
    return export, url, secret, export_storage_in_tmp / export.location


def assert_verified(out: Path, manifest: dict) -> None:
    for shard in manifest["shards"]:
        assert hashlib.sha256((out / shard["name"]).read_bytes()).hexdigest() == shard["sha256"]
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert (out / "README.md").exists() and not list(out.glob("*.part"))


@pytest.mark.django_db
def test_the_script_is_served_as_the_file_in_the_repo_to_anyone(client):
    for accept in ("*/*", "text/x-python", "application/json"):
        response = client.get("/api/v1/exports/pull-script", HTTP_ACCEPT=accept)
        assert response.status_code == 200
        assert response["Content-Type"] == "text/x-python; charset=utf-8"
        assert response["Content-Disposition"] == 'attachment; filename="dataplatform_pull.py"'
        assert response.content == SCRIPT.read_bytes()
    # A token is not needed, and a wrong one changes nothing (the endpoint authenticates nobody).
    assert client.get("/api/v1/exports/pull-script", HTTP_AUTHORIZATION="Bearer dp_wrong").status_code == 200


def test_the_script_imports_nothing_but_the_standard_library():
    imported = {line.split()[1].split(".")[0] for line in SCRIPT.read_text().splitlines()
                if line.startswith(("import ", "from "))}
    assert imported <= set(sys.stdlib_module_names)


@LIVE
def test_a_machine_without_django_downloads_the_script_and_pulls_an_export(bare_python, pullable, server, tmp_path,
                                                                           live_server):
    export, url, secret, _ = pullable
    fetched = tmp_path / "dataplatform_pull.py"
    subprocess.run([bare_python, "-c", "import sys, urllib.request; "
                    "open(sys.argv[2], 'wb').write(urllib.request.urlopen(sys.argv[1]).read())",
                    f"{live_server.url}/api/v1/exports/pull-script", str(fetched)], check=True, env=_clean_env())
    assert fetched.read_bytes() == SCRIPT.read_bytes()

    out = tmp_path / "pulled"
    result = run_script(bare_python, url, "--out", str(out), "--workers", "3", token=secret, cwd=tmp_path,
                        script=fetched)
    assert result.returncode == 0, result.stderr
    assert_verified(out, export.manifest)
    assert "sha256 verified" in result.stderr and "300 rows" in result.stderr and result.stdout == ""
    assert sorted(s.name for s in server.seen) == sorted([s["name"] for s in export.manifest["shards"]] + ["README.md"])

    # Again, from the manifest's URL: every shard is found complete and none is requested; so is the card
    # where the manifest lists its sha256 (without one it is fetched again, having nothing to be checked against).
    server.seen.clear()
    again = run_script(bare_python, url + "manifest", "--out", str(out), token=secret, cwd=tmp_path, script=fetched)
    assert again.returncode == 0, again.stderr
    card_listed = "card" in export.manifest
    assert again.stderr.count("already complete") == 4 + card_listed
    assert [s.name for s in server.seen] == ([] if card_listed else ["README.md"])


@LIVE
def test_a_partial_file_is_resumed_with_a_range_request(bare_python, pullable, server, tmp_path):
    export, url, secret, stored = pullable
    shard = export.manifest["shards"][1]
    source = (stored / shard["name"]).read_bytes()
    half = len(source) // 2
    out = tmp_path / "pulled"
    out.mkdir()
    (out / f"{shard['name']}.part").write_bytes(source[:half])
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_verified(out, export.manifest)
    # One request for that shard, for the bytes it lacked only.
    assert server.of(shard["name"]) == [Served(shard["name"], f"bytes={half}-", 206, len(source) - half)]
    assert f"resuming at byte {half:,}" in result.stderr


@LIVE
def test_a_download_cut_mid_file_is_retried_from_where_it_stopped(bare_python, pullable, server, tmp_path):
    export, url, secret, stored = pullable
    shard = export.manifest["shards"][0]
    size = len((stored / shard["name"]).read_bytes())
    server.faults[shard["name"]] = ["cut"]
    server.faults["README.md"] = ["cut"]  # its Content-Length (and its size in the manifest) tell it was cut
    out = tmp_path / "pulled"
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_verified(out, export.manifest)
    assert server.of(shard["name"]) == [Served(shard["name"], None, 200, size),
                                        Served(shard["name"], f"bytes={size // 2}-", 206, size - size // 2)]
    assert (out / "README.md").read_bytes() == (stored / "README.md").read_bytes()
    # The card's ETag is its sha256 from the manifest, so it is resumed like a shard.
    assert [s.status for s in server.of("README.md")] == [200, 206]


@LIVE
def test_server_errors_and_rate_limits_are_retried(bare_python, pullable, server, tmp_path):
    export, url, secret, _ = pullable
    first, second = (s["name"] for s in export.manifest["shards"][:2])
    server.faults[first] = [503, 503]
    server.faults[second] = [429]
    out = tmp_path / "pulled"
    result = run_script(bare_python, url, "--out", str(out), "--retries", "3", token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_verified(out, export.manifest)
    assert [s.status for s in server.of(first)] == [503, 503, 200]
    assert [s.status for s in server.of(second)] == [429, 200]
    assert f"{first}: HTTP 503" in result.stderr and f"{second}: HTTP 429" in result.stderr


@LIVE
def test_a_shard_corrupt_on_the_server_is_downloaded_twice_then_refused_by_name(bare_python, pullable, server,
                                                                                tmp_path):
    export, url, secret, stored = pullable
    bad = export.manifest["shards"][2]
    data = bytearray((stored / bad["name"]).read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, another sha256
    (stored / bad["name"]).write_bytes(bytes(data))
    out = tmp_path / "pulled"
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: {bad['name']}: sha256 {hashlib.sha256(data).hexdigest()} does not match" in result.stderr
    assert [s.range for s in server.of(bad["name"])] == [None, None]  # fetched whole twice
    assert not (out / bad["name"]).exists() and not (out / f"{bad['name']}.part").exists()
    assert not (out / "manifest.json").exists()  # the folder does not claim to be complete
    for shard in export.manifest["shards"]:  # the others are kept: a second run has only the bad one left
        if shard is not bad:
            assert hashlib.sha256((out / shard["name"]).read_bytes()).hexdigest() == shard["sha256"]


@LIVE
def test_the_card_is_verified_once_the_manifest_lists_it(bare_python, pullable, tmp_path):
    export, url, secret, stored = pullable
    card = (stored / "README.md").read_bytes()
    export.manifest = export.manifest | {"card": {"name": "README.md", "bytes": len(card),
                                                  "sha256": hashlib.sha256(card).hexdigest()}}
    export.save(update_fields=["manifest"])
    out = tmp_path / "pulled"
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (out / "README.md").read_bytes() == card and f"README.md: {len(card):,} bytes, sha256 ok" in result.stderr

    (stored / "README.md").write_bytes(card.replace(b"#", b"=", 1))
    (out / "README.md").unlink()
    (out / "manifest.json").unlink()
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 1 and "error: README.md: sha256" in result.stderr


@LIVE
def test_a_folder_that_held_another_export_ends_up_holding_this_one_only(bare_python, pullable, run_export, members,
                                                                          tmp_path):
    earlier, url, secret, _ = pullable
    out = tmp_path / "pulled"
    assert run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path).returncode == 0
    (out / "validation-00007.parquet.part").write_bytes(b"cut")  # an interrupted download of another file
    (out / ".DS_Store").write_bytes(b"a dot-file: no loader reads it")
    export = run_export(filters={"n": 50}, shard_rows=30, validation_ratio=0.2)
    result = run_script(bare_python, url.replace(f"/{earlier.pk}/", f"/{export.pk}/"), "--out", str(out),
                        token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_verified(out, export.manifest)
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [shard["name"] for shard in export.manifest["shards"]] + ["README.md", "manifest.json", ".DS_Store"])
    gone = {s["name"] for s in earlier.manifest["shards"]} - {s["name"] for s in export.manifest["shards"]}
    assert gone and all(f"{name}: removed" in result.stderr for name in gone)
    dataset = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))  # its card's globs find this export's files
    assert {split: len(rows) for split, rows in dataset.items()} == {
        split: totals["rows"] for split, totals in export.manifest["totals"]["by_split"].items() if totals["rows"]}


@LIVE
def test_files_no_pull_left_are_refused_and_kept(bare_python, pullable, tmp_path):
    export, url, secret, _ = pullable
    out = tmp_path / "pulled"
    out.mkdir()
    mine = {"notes.txt": b"mine", "train-00042.parquet": b"not this export's"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    result = run_script(bare_python, url, "--out", str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 1
    assert f"error: {out} holds files that are not in export {export.pk}: notes.txt, train-00042.parquet." \
        in result.stderr
    assert {path.name: path.read_bytes() for path in out.iterdir()} == mine  # nothing downloaded, nothing removed


@LIVE
def test_an_export_of_no_rows_pulls_into_a_folder_load_dataset_reads(bare_python, live_server, members, run_export,
                                                                    tmp_path):
    export = run_export(filters={"n": 0}, validation_ratio=0.1)
    assert [(s["name"], s["rows"]) for s in export.manifest["shards"]] == [("train-00000.parquet", 0)]
    _, secret = account_services.issue_token(user=members["trainer"], name="pull-script", read_only=True)
    out = tmp_path / "pulled"
    result = run_script(bare_python, f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/", "--out",
                        str(out), token=secret, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    dataset = load_dataset(str(out), streaming=True)  # as its card says
    assert list(dataset) == ["train"] and list(dataset["train"]) == []
    assert list(dataset["train"].features) == [field.name for field in SCHEMA]
    # Not streamed, datasets 5 refuses any split of no rows; when it stops (huggingface/datasets pull request 8401),
    # this fails, and the card's snippet can drop streaming=True.
    with pytest.raises(ValueError, match='Instruction "train" corresponds to no data'):
        load_dataset(str(out), cache_dir=str(tmp_path / "cache"))


@LIVE
def test_the_token_comes_from_the_environment_only_and_is_never_printed(bare_python, pullable, tmp_path):
    _, url, secret, _ = pullable
    out = tmp_path / "pulled"
    missing = run_script(bare_python, url, "--out", str(out), token=None, cwd=tmp_path)
    assert missing.returncode == 2 and "set DATAPLATFORM_TOKEN" in missing.stderr
    as_argument = run_script(bare_python, url, "--out", str(out), "--token", secret, token=None, cwd=tmp_path)
    assert as_argument.returncode == 2 and "unrecognized arguments" in as_argument.stderr
    wrong = "dp_" + "W" * 43
    refused = run_script(bare_python, url, "--out", str(out), token=wrong, cwd=tmp_path)
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr
    assert not (out / "manifest.json").exists()


def test_the_token_is_not_sent_on_to_where_a_download_is_redirected(httpserver, tmp_path):
    """An object store's signed URL gets the Range header but never the platform's token."""
    data = os.urandom(5000)
    entry = {"name": "train-00000.parquet", "split": "train", "rows": 1, "bytes": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"export_id": 1, "shards": [entry], "totals": {"shards": 1, "rows": 1, "bytes": len(data)}}
    httpserver.expect_request("/e/manifest").respond_with_json(manifest)
    for name in ("train-00000.parquet", "README.md"):
        httpserver.expect_request(f"/e/shards/{name}").respond_with_response(
            Response(status=302, headers={"Location": httpserver.url_for(f"/store/{name}?signature=x")}))
    httpserver.expect_request("/store/README.md").respond_with_data("# card")

    def store(request):
        start = int(request.headers["Range"].removeprefix("bytes=").rstrip("-"))
        return Response(data[start:], status=206, headers={"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})

    httpserver.expect_request("/store/train-00000.parquet").respond_with_handler(store)
    out = tmp_path / "pulled"
    out.mkdir()
    (out / "train-00000.parquet.part").write_bytes(data[:1000])
    dataplatform_pull.pull(httpserver.url_for("/e/"), out, token="dp_secret", backoff=0)
    assert (out / "train-00000.parquet").read_bytes() == data
    requests = {request.path: request.headers for request, _ in httpserver.log}
    assert requests["/e/manifest"]["Authorization"] == "Bearer dp_secret"
    assert "Authorization" not in requests["/store/train-00000.parquet"]
    assert "Authorization" not in requests["/store/README.md"]
    assert requests["/store/train-00000.parquet"]["Range"] == "bytes=1000-"
    # If-Range holds the platform's ETag (the sha256): a store compares it with its own and would send the whole file.
    assert requests["/e/shards/train-00000.parquet"]["If-Range"] == f'"{entry["sha256"]}"'
    assert "If-Range" not in requests["/store/train-00000.parquet"]


# After the export page's own load_dataset-over-HTTP snippet (run as a trainer runs it: in a fresh Python
# process, with its own caches): the same files without the token, then what was loaded.
CHECKS = '''
try:
    load_dataset("parquet", data_files=data_files["train"], download_mode="force_redownload")
    print(json.dumps({"without_token": "loaded"}))
except FileNotFoundError as exc:
    print(json.dumps({"without_token": type(exc).__name__}))
print(json.dumps({split: sorted([row["id"], row["error"]] for row in dataset[split]) for split in dataset}))
'''


@LIVE
def test_load_dataset_reads_the_shards_straight_from_the_pull_api(live_server, project, members, run_export,
                                                                  tmp_path):
    for i in range(30):
        Job.objects.create(project=project, kind="demo.sample_continuations", params={"i": i}, created_by=members["admin"],
                           state=JobState.FAILED if i % 3 else JobState.SUCCEEDED, error=f"boom {i} ünï")
    export = run_export(kind="platform.jobs", filters={"status": ["failed"]}, shard_rows=6, validation_ratio=0.25)
    assert len(export.manifest["shards"]) >= 3
    _, secret = account_services.issue_token(user=members["trainer"], name="trainer-node", read_only=True)
    export_url = f"{live_server.url}/api/v1/projects/alpha/exports/{export.pk}/"
    snippet = cards.load_snippets(export, export_url, f"{live_server.url}/api/v1/exports/pull-script")
    script = tmp_path / "load.py"
    script.write_text(snippet["datasets_http"] + "\n" + CHECKS)
    result = subprocess.run(
        [sys.executable, str(script)],
        env=_clean_env(DATAPLATFORM_TOKEN=secret, HF_HOME=str(tmp_path / "hf"),
                       HF_DATASETS_CACHE=str(tmp_path / "hf-datasets"), HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0",
                       HF_HUB_DISABLE_TELEMETRY="1"),
        cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    without_token, loaded = (json.loads(line) for line in result.stdout.strip().splitlines()[-2:])
    assert without_token == {"without_token": "FileNotFoundError"}
    by_split = export.manifest["totals"]["by_split"]
    assert {split: len(rows) for split, rows in loaded.items()} == {
        split: by_split[split]["rows"] for split in ("train", "validation") if by_split[split]["rows"]}
    expected = sorted([job.pk, job.error] for job in Job.objects.filter(state=JobState.FAILED, project=project))
    assert sorted(row for rows in loaded.values() for row in rows) == expected
    assert secret not in result.stdout + result.stderr


@LIVE
def test_every_snippet_of_the_card_runs_as_written_against_the_export_it_pulls(bare_python, live_server, members,
                                                                               run_export, export_storage_in_tmp,
                                                                               tmp_path, monkeypatch):
    """A partitioned JSONL export (the hardest case: a config per partition, types a JSON reader would guess per
    shard), pulled by the card's own shell lines on a machine without Django, then every Python block of the card
    run as it stands, `datasets` over HTTP included; only the server's address and the token are filled in."""
    export = run_export(kind="test.parted", format="jsonl", shard_rows=7, validation_ratio=0.2)
    _, secret = account_services.issue_token(user=members["trainer"], name="trainer-node", read_only=True)
    card = (export_storage_in_tmp / export.location / "README.md").read_text().replace("<server>", live_server.url)
    [shell] = load_section_blocks(card, "bash")
    pulled = subprocess.run(["bash", "-euc", shell.replace("DATAPLATFORM_TOKEN=...", f"DATAPLATFORM_TOKEN={secret}")],
                            env=_clean_env(PATH=f"{Path(bare_python).parent}:{os.environ['PATH']}"), cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert pulled.returncode == 0, pulled.stderr
    assert_verified(tmp_path / f"export-{export.pk}", export.manifest)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATAPLATFORM_TOKEN", secret)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", tmp_path / "hf-cache" / "downloads")
    by_split = {split: totals["rows"] for split, totals in export.manifest["totals"]["by_split"].items()}
    in_a = {split: sum(s["rows"] for s in export.manifest["shards"] if (s["split"], s["partition"]) == (split, "A"))
            for split in by_split}
    assert run_blocks(load_section_blocks(card)) == [
        {"dataset": by_split, "one": in_a},  # from the folder: every partition, then one
        {"df": by_split["train"], "table": by_split["train"]},  # pandas (through pyarrow, with the schema)
        {"table": by_split["train"]},  # pyarrow
        {"dataset": by_split},  # over HTTP
    ]
    assert sum(in_a.values()) == 20 and sum(by_split.values()) == 40
