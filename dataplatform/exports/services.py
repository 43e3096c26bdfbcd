"""Every write of the export engine: create an export, write its shards, delete it."""

import base64
import hashlib
import json
import logging
import shutil
import tempfile
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext, gettext_noop

from dataplatform.accounts.models import Project
from dataplatform.accounts.permissions import require_export_creator, role_in
from dataplatform.audit import services as audit
from dataplatform.conversations.training import text_schema
from dataplatform.errors import Conflict, Missing
from dataplatform.jobs import services as job_services
from dataplatform.jobs.models import JobState
from dataplatform.status import Status

from . import cards
from .models import Export
from .options import validate_options
from .query_log import forget_logged_queries
from .registry import ExportKind, ExportQuery, get_kind
from .sources import read_batches
from .storage import delete_prefix, publish, storage_named, storage_of, store_errors
from .without_pandas import pandas_kept_out
from .writers import SPLITS, Deduplicator, RowGroups, SplitWriter, partition_batch, split_batch

logger = logging.getLogger(__name__)
WRITE_JOB_KIND = "exports.write"
MANIFEST_NAME = "manifest.json"
CARD_NAME = "README.md"
MANIFEST_FORMAT_VERSION = 1
# Batches read ahead of the writer thread: enough to keep both busy, few enough to keep memory flat.
WRITE_AHEAD_BATCHES = 1


def create_export(*, project: Project, user, options: dict, publish: bool = True,
                  client_ip: str | None = None) -> Export:
    """Record an export, its audit row, and queue the job that writes it (sent once the transaction commits).

    publish=False leaves the job for the caller to run (the `export` command runs it inline). `user` None: the
    platform itself (the command line); a user must be one of the project's export creators. A pinned
    `data_version` is the export's from the start; otherwise it is read when the export starts.
    """
    if user is not None:  # the API and the page check it too, but a service must not rely on them
        require_export_creator(role_in(user, project), project)
    clean = validate_options(options, project=project)
    kind = get_kind(clean["kind"])
    with transaction.atomic():
        job = job_services.enqueue_job(project=project, kind=WRITE_JOB_KIND, params={}, user=user, publish=publish)
        export = Export.objects.create(
            project=project, job=job, kind=kind.name, kind_version=kind.version, filters=clean["filters"],
            format=clean["format"], shard_rows=clean.get("shard_rows"), shard_bytes=clean.get("shard_bytes"),
            validation_ratio=clean["validation_ratio"], dedup=clean["dedup"], data_version=clean["data_version"],
            created_by=user, storage=settings.EXPORTS_STORAGE_ALIAS,
        )
        export.location = f"exports/{project.slug}/{export.pk}"
        export.save(update_fields=["location"])
        audit.record(action=audit.Action.EXPORT_CREATED, actor=user, project=project, target=export,
                     client_ip=client_ip, detail={"kind": export.kind, "format": export.format,
                                                  "filters": export.filters, "data_version": export.data_version})
    return export


@pandas_kept_out()  # no export hands pyarrow a pandas object: not importing it saves ~55 MB a worker
def write_export(*, export: Export, progress) -> dict:
    """Write the export's shards, then its dataset card, then manifest.json (last).

    Any failure or cancellation removes every file this run wrote; a rerun of the
    same export first removes what an earlier attempt left, so it replaces, never adds.
    A store fault is raised as the store's error (StoreDown, a Transient: the job is retried; StoreRefused: it
    fails and says what to fix), never as the cleanup's: a store that is down fails that too, which is logged,
    and the retry or exports.orphans.sweep_orphans removes the files left.
    """
    kind = get_kind(export.kind)
    if kind.version != export.kind_version:
        raise RuntimeError(f"Export kind {kind.name} is now version {kind.version}; "
                           f"this export was created for version {export.kind_version}.")
    filters = kind.filters(data=export.filters)
    filters.is_valid(raise_exception=True)
    storage = storage_of(export)
    with store_errors(export.storage):
        delete_prefix(storage, export.location)
    if not export.data_version:
        export.data_version = kind.data_version(export.project)
        export.save(update_fields=["data_version"])
    query = ExportQuery(project=export.project, filters=filters.validated_data, data_version=export.data_version,
                        batch_size=settings.EXPORT_BATCH_ROWS)
    progress.set_total(kind.count(query) or 0)

    work_dir = Path(tempfile.mkdtemp(prefix=f"export-{export.pk}-", dir=_scratch_dir()))
    writers: dict[tuple[str | None, str], SplitWriter] = {}  # (partition, split) -> its writer, made on first use
    row_groups = RowGroups(rows=settings.EXPORT_PARQUET_ROW_GROUP_ROWS, bytes=settings.EXPORT_PARQUET_ROW_GROUP_BYTES)

    def writer(partition: str | None, split: str) -> SplitWriter:
        if (partition, split) not in writers:
            writers[partition, split] = SplitWriter(
                split=split, fmt=export.format, schema=kind.schema, work_dir=work_dir, shard_rows=export.shard_rows,
                shard_bytes=export.shard_bytes, partition=partition, row_groups=row_groups,
                on_complete=lambda path, info: _publish_file(export, storage, path, info.name),
            )
        return writers[partition, split]

    dedup = Deduplicator(kind.dedup_ignore) if export.dedup else None

    def write_batch(batch: pa.RecordBatch) -> None:
        if dedup:
            batch = dedup.filter(batch)
        for partition, group in partition_batch(batch, kind.partition_field).items():
            for split, part in split_batch(group, kind.group_by, export.validation_ratio).items():
                writer(partition, split).write(part)

    read_path, batches = read_batches(kind, query)
    rows_read = 0
    # Hashing, compression and writing run on a thread of their own while the next batch is read; pyarrow,
    # polars and the database driver leave the GIL while they work, so the two overlap on two cores.
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"export-{export.pk}-writer")
    try:
        pending: deque[Future] = deque()
        for batch in batches:
            rows_read += batch.num_rows
            pending.append(background.submit(write_batch, batch))
            while len(pending) > WRITE_AHEAD_BATCHES:
                pending.popleft().result()  # bounds memory, and raises the writer's error here
            progress.report(rows_read, message=Status(gettext_noop("%(rows)s rows read"), rows=rows_read))
            forget_logged_queries()  # DEBUG on: the batches' queries would stay in memory as SQL text
        while pending:
            pending.popleft().result()
        background.shutdown()
        shards = [info for key in sorted(writers, key=lambda k: (k[0] or "", SPLITS.index(k[1])))
                  for info in writers[key].close()]
        if not shards:  # no rows: one empty train shard, so the folder still loads (with the kind's schema)
            shards = writer(None, "train").close(keep_empty=True)
        # The files are in English whatever language the request or worker speaks (a kind's texts may be lazy).
        with translation.override("en"):
            manifest = build_manifest(export, kind, shards, dedup_removed=dedup.removed if dedup else 0)
            manifest["read_path"] = read_path
            # A kind whose rows carry token ids names their tokenizer and chat template (token_masks.note_identity).
            manifest["tokenizer"] = query.notes.pop("tokenizer", None)
            # What the kind's filters matched but its rows leave out, by reason (e.g. AED cases below min_grade):
            # the manifest and the card say how many and why (registry.ExportQuery.notes).
            left_out = query.notes.pop("left_out", None)
            if left_out:
                manifest["left_out"] = {"total": sum(left_out.values()), "reasons": dict(sorted(left_out.items()))}
            if query.notes:
                manifest["notes"] = query.notes
            card = cards.dataset_card(export, kind, manifest).encode("utf-8")
        manifest["card"] = {"name": CARD_NAME, "bytes": len(card), "sha256": hashlib.sha256(card).hexdigest()}
        _publish_text(export, storage, work_dir, CARD_NAME, card.decode("utf-8"))
        _publish_text(export, storage, work_dir, MANIFEST_NAME, json.dumps(manifest, indent=2))
    except BaseException as failure:
        background.shutdown(cancel_futures=True)  # the writer thread is done before its files are removed
        for writer in writers.values():
            writer.abort()
        _remove_attempt(export, storage, failure)
        raise
    finally:
        batches.close()  # ends the read (and its database connection) if it stopped early
        shutil.rmtree(work_dir, ignore_errors=True)

    Export.objects.filter(pk=export.pk).update(
        rows_total=manifest["totals"]["rows"], bytes_total=manifest["totals"]["bytes"], manifest=manifest
    )
    progress.report(rows_read, message=Status(gettext_noop("%(rows)s rows in %(shards)s shards"),
                                               rows=manifest["totals"]["rows"], shards=len(shards)), force=True)
    return {"export_id": export.pk, "rows": manifest["totals"]["rows"], "shards": len(shards)}


def _by_partition(kind: ExportKind, shards: list) -> dict:
    if kind.partition_field is None:
        return {}
    totals: dict[str, dict] = {}
    for shard in shards:
        if shard.partition is None:  # the empty shard of an export of no rows
            continue
        entry = totals.setdefault(shard.partition, {"rows": 0, "bytes": 0, "shards": 0})
        entry["rows"] += shard.rows
        entry["bytes"] += shard.bytes
        entry["shards"] += 1
    return {"partition_field": kind.partition_field, "by_partition": totals}


def build_manifest(export: Export, kind: ExportKind, shards: list, *, dedup_removed: int) -> dict:
    by_split = {split: {"rows": 0, "bytes": 0, "shards": 0} for split in SPLITS}
    for shard in shards:
        by_split[shard.split]["rows"] += shard.rows
        by_split[shard.split]["bytes"] += shard.bytes
        by_split[shard.split]["shards"] += 1
    return {
        "manifest_version": MANIFEST_FORMAT_VERSION,
        "export_id": export.pk,
        "project": export.project.slug,
        "kind": kind.name,
        "kind_version": kind.version,
        "description": str(kind.description),
        "filters": export.filters,
        "data_version": export.data_version,
        "format": export.format,
        "compression": "zstd" if export.format == "parquet" else ("gzip" if export.format == "jsonl.gz" else None),
        "shard_rows": export.shard_rows,
        "shard_bytes": export.shard_bytes,
        # A group (one prompt, task, ...) never crosses splits: its key is the first of group_by that is not empty.
        "split": {"method": "xxh3_64(utf-8 text of the group key) / 2^64 < validation_ratio", "group": kind.group,
                  "group_by": list(kind.group_by), "validation_ratio": export.validation_ratio},
        "dedup": {"enabled": export.dedup, "ignored_fields": list(kind.dedup_ignore), "removed_rows": dedup_removed},
        "schema": {
            "fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in kind.schema],
            "arrow_ipc_base64": _ipc_base64(kind.schema),
            # What JSONL shards parse with (pyarrow.json's explicit_schema): JSON values as their text.
            "jsonl_arrow_ipc_base64": _ipc_base64(text_schema(kind.schema)),
        },
        "shards": [shard.as_manifest_entry() for shard in shards],
        "totals": {"rows": sum(s.rows for s in shards), "bytes": sum(s.bytes for s in shards),
                   "shards": len(shards), "by_split": by_split, **_by_partition(kind, shards)},
        "created_by": export.created_by.username if export.created_by else None,
        "created_at": timezone.now().isoformat(),
        "job_id": export.job_id,
    }


class ExportBusy(Conflict):
    """The export's job is still queued or running."""


class ExportGone(Missing):
    """Deleted meanwhile (by another request)."""


def delete_export(*, export: Export, actor=None, client_ip: str | None = None) -> None:
    """Remove a finished export's rows, with its audit row, then its files. A running one must be cancelled first.

    The rows go first and the files only once that has committed: a download that read the row a moment before
    finds no file and answers 404 (ExportShardApi), and a failed commit leaves the export whole. Files whose
    removal fails after the commit are left behind (logged), never a row without its files.

    The storage is asked first, outside the transaction (no network call while the row is locked): while it is down
    or refuses the platform, nothing is deleted and the caller gets a 503 that says which (StoreDown, StoreRefused)."""
    if export.location:
        _check_store(export)
    with transaction.atomic():
        # Locks the export and its job: a second delete waits, then finds nothing; a retry cannot requeue it.
        export = Export.objects.select_for_update().select_related("job").filter(pk=export.pk).first()
        if export is None:
            raise ExportGone(gettext("No such export."))
        job = export.job
        if not job.is_terminal:
            raise ExportBusy(gettext("Export %(id)d is still %(state)s; cancel its job first.")
                             % {"id": export.pk, "state": job.get_state_display().lower()})
        audit.record(action=audit.Action.EXPORT_DELETED, actor=actor, project=export.project,
                     target_type="exports.export", target_id=export.pk, client_ip=client_ip,
                     detail={"kind": export.kind, "rows": export.rows_total})
        location, storage = export.location, storage_of(export)
        export.delete()
        job.delete()
        if location:
            transaction.on_commit(lambda: delete_prefix(storage, location), robust=True)


def _check_store(export: Export) -> None:
    with store_errors(export.storage):
        try:
            storage_of(export).listdir(export.location)
        except FileNotFoundError:
            pass


class ManifestNotReady(Conflict):
    """The export has not succeeded (yet): its manifest exists once it does."""


def manifest_of(export: Export) -> dict:
    if export.job.state != JobState.SUCCEEDED:
        raise ManifestNotReady(gettext("Export %(id)d is %(state)s; its manifest exists once it succeeds.")
                               % {"id": export.pk, "state": export.job.get_state_display().lower()})
    return export.manifest


def _ipc_base64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def _publish_file(export: Export, storage, path: Path, name: str) -> None:
    with store_errors(export.storage):
        publish(storage, path, f"{export.location}/{name}")


def _publish_text(export: Export, storage, work_dir: Path, name: str, text: str) -> None:
    path = work_dir / f".{name}.partial"
    path.write_text(text, encoding="utf-8")
    _publish_file(export, storage, path, name)


def _remove_attempt(export: Export, storage, failure: BaseException) -> None:
    """Remove what a failed or cancelled run published. Never raises: the run's own error is the one to record (the
    job retries a StoreDown); a removal that fails too (the store is down) is logged beside it, and the files are
    removed by the retry, or by the sweep (exports.orphans) once the job has failed for good."""
    try:
        delete_prefix(storage, export.location)
    except Exception as exc:
        logger.warning("Export %s failed (%s: %s) and the files of its failed attempt were not removed (%s: %s); "
                       "its retry or the orphan sweep removes them.", export.pk, type(failure).__name__, failure,
                       type(exc).__name__, exc)


def _scratch_dir() -> Path:
    # Under DATA_DIR, on the same filesystem as the local export storage, so publishing is a rename.
    path = settings.DATA_DIR / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


class MoveFailed(Exception):
    """A file of the export could not be copied as the manifest lists it: the export stays where it was."""


def move_export(*, export_id: int, to: str, leftovers_on: tuple[str, ...] = ()) -> str:
    """Move a finished export's files to the storage `to` (an alias in settings.STORAGES): copy each file, check the
    copy's sha256 against the manifest (manifest.json's against the source's bytes), switch the export's record, then
    delete the old copies. Returns "moved", "already there", "busy" (its job is not finished) or "gone" (deleted).

    Resumable: a copy already on `to` with the right sha256 is kept, not copied again; and an export already on `to`
    loses the copies still under its prefix on `leftovers_on` (a move stopped between its switch and its delete).
    Downloads go on throughout: they read the old copies until the switch, the new ones after. A delete meanwhile
    wins: the switch finds no row, and the copies just made are removed."""
    export = Export.objects.select_related("job").filter(pk=export_id).first()
    if export is None:
        return "gone"
    if export.storage == to:
        for alias in leftovers_on:
            if alias != to:
                delete_prefix(storage_named(alias), export.location)
        return "already there"
    if not export.job.is_terminal:
        return "busy"
    source, target = storage_of(export), storage_named(to)
    if export.job.state == JobState.SUCCEEDED and export.manifest:
        try:
            _copy_verified(export, source, target)
        except BaseException:
            delete_prefix(target, export.location)  # no half-moved copies left on a storage the record never names
            raise
    # The row is locked by a delete (delete_export): this waits for it, then switches nothing.
    switched = Export.objects.filter(pk=export.pk, storage=export.storage).update(storage=to)
    if not switched:
        delete_prefix(target, export.location)
        return "gone" if not Export.objects.filter(pk=export.pk).exists() else "already there"
    delete_prefix(source, export.location)
    return "moved"


def _copy_verified(export: Export, source, target) -> None:
    listed = {shard["name"]: shard["sha256"] for shard in export.manifest["shards"]}
    if card := export.manifest.get("card"):
        listed[card["name"]] = card["sha256"]
    work_dir = Path(tempfile.mkdtemp(prefix=f"move-{export.pk}-", dir=_scratch_dir()))
    try:
        for name in [*listed, *([CARD_NAME] if CARD_NAME not in listed else []), MANIFEST_NAME]:  # manifest last
            path = f"{export.location}/{name}"
            expected = listed.get(name)
            if expected and target.exists(path) and _sha256_of(target, path) == expected:
                continue  # copied by an earlier run
            copy = work_dir / f".{name}.partial"
            with source.open(path, "rb") as reading, open(copy, "wb") as writing:
                shutil.copyfileobj(reading, writing, 1 << 20)
            copied = _sha256_of_file(copy)
            if expected and copied != expected:
                raise MoveFailed(f"Export {export.pk}: {name} on {export.storage} has sha256 {copied}, "
                                 f"not the manifest's {expected}; left where it is.")
            publish(target, copy, path)
            if (stored := _sha256_of(target, path)) != (expected or copied):
                raise MoveFailed(f"Export {export.pk}: {name} reads back from the new storage with sha256 {stored}, "
                                 f"not {expected or copied}; left where it is.")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _sha256_of(storage, path: str) -> str:
    digest = hashlib.sha256()
    with storage.open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256_of_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
