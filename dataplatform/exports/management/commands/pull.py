"""Download an export over the pull API: resumable (HTTP Range) and verified (sha256).

    manage.py pull https://host/api/v1/projects/demo/exports/12/ --out ./export-12

The token comes from --token or the DATAPLATFORM_TOKEN environment variable (which keeps
it out of shell history). It is sent only in the Authorization header and never printed.
"""

import os
import time
from pathlib import Path

import httpx
from django.core.management.base import BaseCommand, CommandError

from dataplatform.exports.writers import file_sha256

CHUNK = 1 << 20


class Command(BaseCommand):
    help = "Download an export's shards, resuming partial files, and verify their sha256."
    requires_system_checks = []  # a client: needs no database or broker

    def add_arguments(self, parser):
        parser.add_argument("export_url", help="the export's API URL, e.g. .../api/v1/projects/P/exports/ID/")
        parser.add_argument("--token", default=os.environ.get("DATAPLATFORM_TOKEN", ""))
        parser.add_argument("--out", required=True)
        parser.add_argument("--retries", type=int, default=5, help="attempts per file on network errors")

    def handle(self, *args, export_url: str, token: str, out: str, retries: int, **options):
        if not token:
            raise CommandError("Give an API token with --token or DATAPLATFORM_TOKEN.")
        base = export_url.rstrip("/")
        destination = Path(out)
        destination.mkdir(parents=True, exist_ok=True)
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(headers=headers, timeout=httpx.Timeout(60, connect=10), follow_redirects=True) as client:
            manifest_response = _get(client, f"{base}/manifest")
            manifest = manifest_response.json()
            for shard in manifest["shards"]:
                self._fetch(client, f"{base}/shards/{shard['name']}", destination / shard["name"], shard, retries)
            self._fetch(client, f"{base}/shards/README.md", destination / "README.md", None, retries)
            # The manifest goes last: its presence says the folder is complete and verified.
            (destination / "manifest.json").write_bytes(manifest_response.content)
        totals = manifest["totals"]
        self.stdout.write(self.style.SUCCESS(
            f"Pulled export {manifest['export_id']}: {totals['shards']} shards, {totals['rows']:,} rows, "
            f"sha256 verified -> {destination}"
        ))

    def _fetch(self, client: httpx.Client, url: str, path: Path, shard: dict | None, retries: int) -> None:
        if shard and path.exists() and path.stat().st_size == shard["bytes"] and file_sha256(path) == shard["sha256"]:
            self.stderr.write(f"{path.name}: already complete")
            return
        partial = path.with_name(path.name + ".part")
        for attempt in range(1, retries + 1):
            try:
                self._download(client, url, partial, shard)
                break
            except (httpx.TransportError, _Incomplete) as exc:
                if attempt == retries:
                    raise CommandError(f"{path.name}: gave up after {retries} attempts: {exc}") from exc
                self.stderr.write(f"{path.name}: {exc}; resuming (attempt {attempt + 1} of {retries})")
                time.sleep(min(2 ** attempt, 10))
        if shard:
            digest = file_sha256(partial)
            if digest != shard["sha256"]:
                partial.unlink()
                raise CommandError(f"{path.name}: sha256 {digest} does not match the manifest's {shard['sha256']}.")
        os.replace(partial, path)
        self.stderr.write(f"{path.name}: {path.stat().st_size:,} bytes" + (", sha256 ok" if shard else ""))

    def _download(self, client: httpx.Client, url: str, partial: Path, shard: dict | None) -> None:
        have = partial.stat().st_size if partial.exists() else 0
        headers = {}
        if have and shard:
            headers = {"Range": f"bytes={have}-", "If-Range": f'"{shard["sha256"]}"'}
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 416:  # the partial file is already whole (or longer than the shard)
                partial.unlink()
                raise _Incomplete("local partial file did not match; starting over")
            _raise_for_status(response)
            mode = "ab" if response.status_code == 206 else "wb"
            with open(partial, mode) as handle:
                for chunk in response.iter_bytes(CHUNK):
                    handle.write(chunk)
        if shard and partial.stat().st_size < shard["bytes"]:
            raise _Incomplete(f"connection closed at {partial.stat().st_size:,} of {shard['bytes']:,} bytes")


class _Incomplete(Exception):
    pass


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        response = client.get(url)
    except httpx.TransportError as exc:
        raise CommandError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
    _raise_for_status(response)
    return response


def _raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    if not response.is_stream_consumed:
        response.read()
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text[:200]
    raise CommandError(f"GET {response.request.url}: HTTP {response.status_code}: {detail}")
