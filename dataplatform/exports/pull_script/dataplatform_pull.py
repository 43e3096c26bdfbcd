#!/usr/bin/env python3
"""Download a data platform export: in parallel, resumable, every file verified. Python 3.10+, standard library only.

    export DATAPLATFORM_TOKEN=dp_...
    python dataplatform_pull.py https://host/api/v1/projects/demo/exports/7/ --out ./export-7 [--workers 4]

The URL is the export's (.../exports/7/) or its manifest's (.../exports/7/manifest). The token is read from
DATAPLATFORM_TOKEN only, sent only in the Authorization header (never to another host a download is
redirected to, such as an object store's signed URL), and never printed.

Each file is downloaded to NAME.part, resumed with an HTTP Range request when a .part is already there
(also from an object store a download is redirected to: see _ResumingRedirects), checked against the
manifest's sha256 and only then renamed to NAME; a file that fails the check is downloaded again, once.
Files already present with the right checksum are skipped. Connection errors, timeouts, 5xx and 429
(honouring Retry-After) are retried with exponential backoff. manifest.json is written last: its presence
says the folder is complete and verified. Progress goes to stderr; the exit status is 0 on success, 1 on
failure (the message names the file), 2 on a usage error.

The folder holds one export, the one pulled last, and nothing else a loader could read with it (`train-*`
globs and `load_dataset(folder)` read every file whose name fits). Before downloading, the script removes
what an earlier pull left there: the manifest.json of another export (so the folder no longer claims to be
complete), the files that manifest lists and this export does not, and `.part` files of names this export
does not have. Any other file is refused, never deleted: it could be the user's; the script names them and
exits 1 without touching the folder. Files and folders whose names start with a dot are left alone.
"""

import argparse
import concurrent.futures
import email.utils
import hashlib
import http.client
import json
import logging
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

TOKEN_VARIABLE = "DATAPLATFORM_TOKEN"
MANIFEST_NAME = "manifest.json"
CHUNK = 1 << 20
MAX_RETRY_AFTER = 300  # seconds: a longer Retry-After is waited for this long, then retried
logger = logging.getLogger("dataplatform_pull")  # each request's method, URL and status, at DEBUG; no headers


class PullError(Exception):
    """A failure that retrying will not fix; the message says which file and why."""


class Transient(Exception):
    """A failure worth retrying: a lost connection, a timeout, a 5xx, a 429."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class RangeRefused(Transient):
    """A 416: the partial file does not fit the server's file; start it over."""


def export_base(url: str) -> str:
    """The export's API URL without a trailing slash, from its own URL or its manifest's."""
    base = url.strip().rstrip("/")
    return base[: -len("/manifest")] if base.endswith("/manifest") else base


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


class _ResumingRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, but without If-Range. Its value is the platform's ETag (the file's sha256);
    an object store a download is redirected to compares it with an ETag of its own (an MD5, or "...-3" for a
    multipart upload) and, finding them different, answers the resumed download with the whole file again. Range
    alone is safe there: an export's files never change under its id, and every file is checked against the
    manifest's sha256 before it is kept (a copy that does not match is downloaded again)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        redirected = super().redirect_request(req, fp, code, msg, headers, newurl)
        if redirected is not None:
            redirected.remove_header("If-range")  # urllib keeps header names str.capitalize()d
        return redirected


_OPENER = urllib.request.build_opener(_ResumingRedirects)


class Client:
    """GET requests with the token, a timeout, and retries with exponential backoff."""

    def __init__(self, token: str, *, retries: int = 5, backoff: float = 1.0, timeout: float = 60.0, log=None):
        self.token, self.retries, self.backoff, self.timeout = token, max(1, retries), backoff, timeout
        self.log = log or (lambda message: None)

    def open(self, url: str, headers: dict | None = None):
        """The response to GET `url`; raises Transient or PullError for anything but a 2xx."""
        headers = headers or {}
        request = urllib.request.Request(url, headers=headers)
        request.add_unredirected_header("Authorization", f"Bearer {self.token}")  # not sent on after a redirect
        try:
            response = _OPENER.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            logger.debug("GET %s -> %s", url, exc.code)
            detail = _detail(exc)
            if exc.code == 416:
                raise RangeRefused(f"HTTP 416: the server refused the range {headers.get('Range')}") from None
            if exc.code in (408, 429) or exc.code >= 500:
                raise Transient(f"HTTP {exc.code}: {detail}", _retry_after(exc.headers.get("Retry-After"))) from None
            raise PullError(f"GET {url}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):  # not a network hiccup: retrying will not help
                raise PullError(f"GET {url}: {reason}") from None
            raise Transient(f"{type(exc).__name__}: {reason}") from None
        logger.debug("GET %s -> %s", url, response.status)
        return response

    def retrying(self, what: str, action):
        """Call `action` until it succeeds, at most `retries` times, backing off after each Transient."""
        for attempt in range(1, self.retries + 1):
            try:
                return action()
            except Transient as exc:
                if attempt == self.retries:
                    raise PullError(f"{what}: gave up after {self.retries} attempts: {exc}") from None
                delay = exc.retry_after if exc.retry_after is not None else self.backoff * 2 ** (attempt - 1)
                self.log(f"{what}: {exc}; retrying in {delay:.1f} s (attempt {attempt + 1} of {self.retries})")
                time.sleep(delay)
        raise AssertionError("unreachable")

    def read(self, what: str, url: str) -> bytes:
        def once() -> bytes:
            with self.open(url) as response:
                return _read(response, None)
        return self.retrying(what, once)


def _read(response, size: int | None) -> bytes:
    """The next `size` bytes of a response (all of them for None); a lost connection is a Transient."""
    try:
        return response.read(size)
    except (OSError, http.client.HTTPException) as exc:
        raise Transient(f"connection lost: {type(exc).__name__}: {exc}") from None


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read(2000).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return error.reason or ""
    try:
        return str(json.loads(body).get("detail", body))
    except (ValueError, AttributeError):
        return body[:200]


def _download(client: Client, url: str, part: Path, entry: dict | None) -> None:
    """GET `url` into `part`, continuing from where `part` ends when its expected size and sha256 are known."""
    have = part.stat().st_size if part.exists() else 0
    if entry and have == entry["bytes"]:
        return  # whole already: the checksum decides
    headers = {}
    if entry and 0 < have < entry["bytes"]:
        # If-Range: a partial copy of another version of the file gets the whole file (200), not a range. The
        # platform answers it; where it redirects to a store, Range goes on alone (_ResumingRedirects).
        headers = {"Range": f"bytes={have}-", "If-Range": f'"{entry["sha256"]}"'}
    try:
        response = client.open(url, headers)
    except RangeRefused:
        part.unlink(missing_ok=True)
        raise
    with response:
        resumed = response.status == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
            part.unlink(missing_ok=True)
            raise Transient(f"the server sent another range than bytes {have}-: {response.headers['Content-Range']}")
        if resumed:
            client.log(f"{part.name.removesuffix('.part')}: resuming at byte {have:,}")
        written = 0
        with open(part, "ab" if resumed else "wb") as handle:
            for chunk in iter(lambda: _read(response, CHUNK), b""):
                handle.write(chunk)  # a full disk is an OSError here, not retried
                written += len(chunk)
        declared = response.headers.get("Content-Length")
    # A connection that closes early ends the body without an error: count what came.
    if (declared and written < int(declared)) or (entry and part.stat().st_size < entry["bytes"]):
        raise Transient(f"connection closed at byte {part.stat().st_size:,}"
                        + (f" of {entry['bytes']:,}" if entry else ""))


def pull_file(client: Client, url: str, path: Path, entry: dict | None) -> str:
    """Download one file to `path`, verified against `entry` (name, bytes, sha256) when there is one.

    Returns "skipped" when `path` is already there with the right checksum, else "downloaded".
    """
    if entry and path.exists() and path.stat().st_size == entry["bytes"] and file_sha256(path) == entry["sha256"]:
        client.log(f"{path.name}: already complete")
        return "skipped"
    part = path.with_name(path.name + ".part")
    if not entry:
        part.unlink(missing_ok=True)  # nothing to check a partial copy against: start over
    for check in (1, 2):
        client.retrying(path.name, lambda: _download(client, url, part, entry))
        if not entry:
            break
        digest = file_sha256(part)
        if digest == entry["sha256"]:
            break
        part.unlink()
        if check == 2:
            raise PullError(f"{path.name}: sha256 {digest} does not match the manifest's {entry['sha256']}, "
                            "downloaded twice; the file on the server may be corrupt.")
        client.log(f"{path.name}: sha256 does not match the manifest; downloading it again")
    os.replace(part, path)
    client.log(f"{path.name}: {path.stat().st_size:,} bytes" + (", sha256 ok" if entry else " (no checksum)"))
    return "downloaded"


def _safe_name(name: str) -> str:
    """A manifest's file name, refused unless it is a plain name inside the output folder."""
    if not name or name != os.path.basename(name) or name.startswith(".") or "\\" in name or "\0" in name:
        raise PullError(f"The manifest names an unsafe file name: {name!r}")
    return name


def _previous_files(manifest_path: Path) -> set[str]:
    """The files an earlier pull's manifest.json lists (none if it cannot be read as one)."""
    try:
        previous = json.loads(manifest_path.read_bytes())
        card = previous.get("card") or {"name": "README.md"}
        return {shard["name"] for shard in previous["shards"]} | {card["name"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def make_room(destination: Path, manifest: dict, raw: bytes, names: set[str], log) -> None:
    """Leave in `destination` only files of this export (`names`, complete or `.part`) and dot-files: remove what
    an earlier pull of another export left (see the module's docstring), or raise PullError naming the files that
    no pull left, before anything is removed."""
    names = names | {MANIFEST_NAME}
    manifest_path = destination / MANIFEST_NAME
    another = manifest_path.is_file() and manifest_path.read_bytes() != raw
    previous = _previous_files(manifest_path) if another else set()
    stale, foreign = [], []
    for path in sorted(destination.iterdir()):
        name = path.name
        if name.startswith(".") or name in names or (name.endswith(".part") and name[: -len(".part")] in names):
            continue
        ours = path.is_file() and not path.is_symlink() and (name in previous or name.endswith(".part"))
        (stale if ours else foreign).append(path)
    if foreign:
        shown = ", ".join(path.name for path in foreign[:10]) + (f" and {len(foreign) - 10} more"
                                                                 if len(foreign) > 10 else "")
        raise PullError(f"{destination} holds files that are not in export {manifest.get('export_id')}: {shown}. "
                        "A loader would read them with the export; pull into an empty folder, or remove them.")
    if another:
        manifest_path.unlink()  # first: the folder must not claim to be a complete copy of the earlier export
        log(f"{MANIFEST_NAME}: removed (another export's: this folder held an earlier pull)")
    for path in stale:
        path.unlink()
        log(f"{path.name}: removed (an earlier pull's, not in export {manifest.get('export_id')})")


def pull(url: str, out, *, token: str, workers: int = 4, retries: int = 5, backoff: float = 1.0,
         timeout: float = 60.0, log=None) -> dict:
    """Download the export at `url` into the folder `out`; returns its manifest. Raises PullError."""
    if not token:
        raise PullError(f"Set {TOKEN_VARIABLE} to an API token.")
    log = log or (lambda message: None)
    lock = threading.Lock()

    def say(message: str) -> None:
        with lock:
            log(message)

    client = Client(token, retries=retries, backoff=backoff, timeout=timeout, log=say)
    base = export_base(url)
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise PullError(f"Not an http(s) URL: {base}")
    destination = Path(out)
    destination.mkdir(parents=True, exist_ok=True)
    raw = client.read("manifest", f"{base}/manifest")
    try:
        manifest = json.loads(raw)
        files = [(shard["name"], shard) for shard in manifest["shards"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise PullError(f"{base}/manifest is not an export manifest: {exc}") from None
    card = manifest.get("card")
    # Until the manifest names the card with its sha256, the card is fetched whole and is not checksummed.
    files.append((card["name"], card) if card else ("README.md", None))
    make_room(destination, manifest, raw, {_safe_name(name) for name, _ in files}, say)
    done, failures = 0, []
    say(f"export {manifest.get('export_id')}: {len(manifest['shards'])} shards, "
        f"{manifest.get('totals', {}).get('bytes', 0):,} bytes, {max(1, workers)} at a time")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(pull_file, client, f"{base}/shards/{urllib.parse.quote(_safe_name(name))}",
                               destination / name, entry): name for name, entry in files}
        for future in concurrent.futures.as_completed(futures):
            try:  # a file that fails does not stop the others: a second run has only it left to fetch
                future.result()
                done += 1
                say(f"[{done}/{len(files)}] {futures[future]}")
            except PullError as exc:
                failures.append(str(exc))
            except OSError as exc:  # the local disk: full, not writable
                failures.append(f"{futures[future]}: {exc}")
    if failures:
        raise PullError("\n".join(sorted(failures)))
    # The manifest goes last, as the server sent it: its presence says the folder is complete and verified.
    partial = destination / f"{MANIFEST_NAME}.part"
    partial.write_bytes(raw)
    os.replace(partial, destination / MANIFEST_NAME)
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=f"The API token is read from the {TOKEN_VARIABLE} environment variable.")
    parser.add_argument("url", help="the export's API URL (.../api/v1/projects/P/exports/ID/) or its manifest URL")
    parser.add_argument("--out", required=True, help="the folder to download into (created if missing)")
    parser.add_argument("--workers", type=int, default=4, help="files downloaded at once (default 4)")
    parser.add_argument("--retries", type=int, default=5, help="attempts per request on transient errors (default 5)")
    parser.add_argument("--backoff", type=float, default=1.0, help="seconds before the first retry, doubled after "
                                                                   "each (default 1)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds without data before a retry (default 60)")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        parser.error(f"set {TOKEN_VARIABLE} to an API token (it is not taken on the command line)")
    host = urllib.parse.urlsplit(args.url).hostname or ""
    if urllib.parse.urlsplit(args.url).scheme == "http" and host not in ("localhost", "127.0.0.1", "::1"):
        print(f"warning: {host} is plain http: the token and the data cross the network unencrypted", file=sys.stderr)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.monotonic()
    try:
        manifest = pull(args.url, args.out, token=token, workers=args.workers, retries=args.retries,
                        backoff=args.backoff, timeout=args.timeout, log=log)
    except PullError as exc:
        log(f"error: {str(exc).replace(token, '***')}")
        return 1
    except KeyboardInterrupt:
        log("interrupted: run the same command again to resume")
        return 130
    totals = manifest.get("totals", {})
    log(f"pulled export {manifest.get('export_id')}: {totals.get('shards')} shards, {totals.get('rows', 0):,} rows, "
        f"sha256 verified, in {time.monotonic() - started:.1f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
