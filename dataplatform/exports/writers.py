"""Shard writing: split assignment, dedup, and Parquet / JSONL(.gz) shards of bounded size.

Shards are written to local temporary files; a shard is handed to `on_complete`
(which publishes it to storage under its final name) only once it is closed
and hashed, so no file that looks complete is ever half-written.
"""

import gzip
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

SPLITS = ("train", "validation")
EXTENSIONS = {"parquet": "parquet", "jsonl": "jsonl", "jsonl.gz": "jsonl.gz"}
PARQUET_COMPRESSION = "zstd"
# Row groups of at most pyarrow's write_table's 1,048,576 rows (setting EXPORT_PARQUET_ROW_GROUP_ROWS); the bytes
# (EXPORT_PARQUET_ROW_GROUP_BYTES) bound what an export's shards hold in memory together (RowGroups). 16 MiB keeps an
# export worker under bench/export_bench.py's 300 MB (1M rows: ~265 MB with a row group per batch, ~288 with 16 MiB,
# 294-301 with 24, ~306 with 32, ~370 with 64); a row group of 1 KB rows is then ~15,000 rows, ~7 MB compressed.
ROW_GROUP_ROWS = 1024 * 1024
ROW_GROUP_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ShardInfo:
    name: str
    split: str
    rows: int
    bytes: int
    sha256: str
    partition: str | None = None  # for kinds that write one shard set per value of a field

    def as_manifest_entry(self) -> dict:
        entry = {"name": self.name, "split": self.split, "rows": self.rows, "bytes": self.bytes, "sha256": self.sha256}
        return entry | ({"partition": self.partition} if self.partition is not None else {})


def validation_mask(keys: pa.Array, ratio: float) -> pa.Array:
    """True where a row goes to validation: the 64-bit XXH3 hash of its key's text, below `ratio` of 2^64.

    The hash depends only on the key's text (XXH3 is a published, frozen algorithm, so anyone can
    recompute the split), so the split is the same on every run and every machine, and a row keeps its
    split when other rows are added or removed.
    """
    if ratio <= 0:
        return pa.array(np.zeros(len(keys), dtype=bool))
    threshold = int(ratio * 2**64)
    texts = keys.cast(pa.string()).cast(pa.binary()).to_pylist()
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(text) for text in texts), dtype=np.uint64, count=len(texts))
    return pa.array(hashes < np.uint64(min(threshold, 2**64 - 1)))


class Deduplicator:
    """Drops rows whose content (all columns but `ignore`) was already seen in this export.

    A row's content is hashed to 64 bits by polars (vectorized over the batch, nested columns included;
    the hash is stable within one polars version, which is all one export needs). The hashes seen so far
    stay in one sorted array: 8 bytes per distinct row, 8 MB per million. Two different rows are taken
    for duplicates with a chance of about n^2 / 2^65: 3 in 100 million for a million rows.
    """

    def __init__(self, ignore: tuple[str, ...]):
        self.ignore = ignore
        self.seen = np.empty(0, dtype=np.uint64)
        self.removed = 0

    def filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import polars

        content = batch.drop_columns([name for name in self.ignore if name in batch.schema.names])
        hashes = polars.from_arrow(content, rechunk=False).hash_rows(seed=0).to_numpy()
        # The first row of each hash in this batch, unless an earlier batch had it.
        unique, first = np.unique(hashes, return_index=True)
        at = np.searchsorted(self.seen, unique)  # a binary search each: the seen array is never re-sorted
        seen_before = self.seen[np.minimum(at, len(self.seen) - 1)] == unique if len(self.seen) else at < 0
        new, keep_rows = unique[~seen_before], np.sort(first[~seen_before])
        self.seen = np.insert(self.seen, at[~seen_before], new)
        self.removed += batch.num_rows - len(keep_rows)
        return batch if len(keep_rows) == batch.num_rows else batch.take(pa.array(keep_rows))


@dataclass
class _Compression:
    """What a split's row groups weighed in Arrow and then in the file: their ratio estimates the file bytes of
    rows not written yet."""

    arrow_bytes: int = 0
    file_bytes: int = 0

    @property
    def ratio(self) -> float | None:
        return self.file_bytes / self.arrow_bytes if self.arrow_bytes else None


class RowGroups:
    """How an export's Parquet shards cut their rows into row groups: at most `rows` rows each, and all its shards
    together hold back at most about `bytes` of Arrow data; past that, the shard holding the most writes what it
    holds as a row group. So the memory an export takes does not grow with its splits and partitions."""

    def __init__(self, rows: int = ROW_GROUP_ROWS, bytes: int = ROW_GROUP_BYTES):
        self.rows, self.bytes = rows, bytes
        self.open: list[_ParquetShard] = []

    def make_room(self) -> None:
        while self.open and sum(shard.held_bytes for shard in self.open) >= self.bytes:
            max(self.open, key=lambda shard: shard.held_bytes).write_row_group()


class _ParquetShard:
    """A Parquet file whose rows are held back and written a row group at a time (RowGroups), whatever the size of
    the batches that come in: a row group per batch, as pyarrow's write_batch makes, gives a small split hundreds
    of tiny row groups and a footer that outweighs its data."""

    def __init__(self, path: Path, schema: pa.Schema, *, row_groups: RowGroups, compression: _Compression):
        self.path, self.schema, self.row_groups, self.compression = path, schema, row_groups, compression
        self.writer = pq.ParquetWriter(path, schema, compression=PARQUET_COMPRESSION)
        self.held: list[pa.RecordBatch] = []
        self.held_rows = self.held_bytes = 0
        row_groups.open.append(self)

    def write(self, batch: pa.RecordBatch) -> None:
        while batch.num_rows:
            room = self.row_groups.rows - self.held_rows
            part, batch = batch.slice(0, room), batch.slice(room)
            self.held.append(part)
            self.held_rows += part.num_rows
            self.held_bytes += part.nbytes
            if self.held_rows >= self.row_groups.rows:
                self.write_row_group()
            self.row_groups.make_room()

    def write_row_group(self) -> None:
        if not self.held_rows:
            return
        before = os.path.getsize(self.path)
        self.writer.write_table(pa.Table.from_batches(self.held, self.schema), row_group_size=self.held_rows)
        self.compression.arrow_bytes += self.held_bytes
        self.compression.file_bytes += os.path.getsize(self.path) - before
        self.held, self.held_rows, self.held_bytes = [], 0, 0

    def reached(self, limit: int) -> bool:
        """Whether the file, with the rows held back, is about `limit` bytes: the held rows count at the
        compression this split's row groups have had. Before its first row group there is none to go by: the
        rows are written as one once they weigh `limit` in Arrow, and the file is measured."""
        ratio = self.compression.ratio
        if ratio is None:
            if self.held_bytes < limit:
                return False
            self.write_row_group()
            return os.path.getsize(self.path) >= limit
        return os.path.getsize(self.path) + self.held_bytes * ratio >= limit

    def close(self) -> None:
        self.write_row_group()
        self.discard()

    def discard(self) -> None:
        self.row_groups.open.remove(self)
        self.held = []
        self.writer.close()


class _JsonlShard:
    def __init__(self, path: Path, compress: bool):
        self.path = path
        self.raw = open(path, "wb")
        self.stream = gzip.GzipFile(fileobj=self.raw, mode="wb", mtime=0) if compress else self.raw

    def write(self, batch: pa.RecordBatch) -> None:
        lines = [json.dumps(row, ensure_ascii=False, default=_json_default) for row in batch.to_pylist()]
        self.stream.write(("\n".join(lines) + "\n").encode("utf-8"))

    def reached(self, limit: int) -> bool:
        return self.raw.tell() >= limit

    def close(self) -> None:
        self.stream.close()
        if self.stream is not self.raw:
            self.raw.close()

    discard = close


def _json_default(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"Cannot write {type(value).__name__} to JSON")


class SplitWriter:
    """Writes one split's rows into numbered shards of at most `shard_rows` rows / about `shard_bytes` bytes;
    Parquet shards in row groups as `row_groups` (shared by the export's writers) cuts them."""

    def __init__(
        self, *, split: str, fmt: str, schema: pa.Schema, work_dir: Path, shard_rows: int | None,
        shard_bytes: int | None, on_complete: Callable[[Path, ShardInfo], None], partition: str | None = None,
        row_groups: RowGroups | None = None,
    ):
        self.split, self.fmt, self.schema, self.work_dir, self.partition = split, fmt, schema, work_dir, partition
        self.shard_rows, self.shard_bytes, self.on_complete = shard_rows, shard_bytes, on_complete
        self.row_groups = row_groups or RowGroups()
        self.compression = _Compression()
        self.index = 0
        self.current = None
        self.current_rows = 0
        self.shards: list[ShardInfo] = []

    @property
    def _name(self) -> str:
        prefix = f"{self.partition}-" if self.partition is not None else ""
        return f"{prefix}{self.split}-{self.index:05d}.{EXTENSIONS[self.fmt]}"

    def _open(self) -> None:
        path = self.work_dir / f".{self._name}.partial"
        if self.fmt == "parquet":
            self.current = _ParquetShard(path, self.schema, row_groups=self.row_groups, compression=self.compression)
        else:
            self.current = _JsonlShard(path, compress=self.fmt == "jsonl.gz")
        self.current_rows = 0

    def write(self, batch: pa.RecordBatch) -> None:
        while batch.num_rows:
            if self.current is None:
                self._open()
            room = self.shard_rows - self.current_rows if self.shard_rows else batch.num_rows
            part, batch = batch.slice(0, room), batch.slice(room)
            self.current.write(part)
            self.current_rows += part.num_rows
            full_by_rows = self.shard_rows and self.current_rows >= self.shard_rows
            if full_by_rows or (self.shard_bytes and self.current.reached(self.shard_bytes)):
                self._finish()

    def close(self, *, keep_empty: bool = False) -> list[ShardInfo]:
        """Finish the last shard; the shards written. `keep_empty`: a split that had no rows at all still gets one
        shard, of no rows (a Parquet file with the schema, an empty JSONL file), so that an export of no rows
        is a folder loaders read, not one whose card names files that are not there."""
        if keep_empty and not self.shards and self.current is None:
            self._open()
        if self.current is not None:  # it has rows, or is that one empty shard
            self._finish()
        self.abort()
        return self.shards

    def abort(self) -> None:
        """Drop the shard being written (its temporary file only)."""
        if self.current is not None:
            try:
                self.current.discard()
            finally:
                self.current.path.unlink(missing_ok=True)
                self.current = None

    def _finish(self) -> None:
        shard, self.current = self.current, None
        shard.close()
        info = ShardInfo(name=self._name, split=self.split, rows=self.current_rows, bytes=os.path.getsize(shard.path),
                         sha256=file_sha256(shard.path), partition=self.partition)
        self.on_complete(shard.path, info)
        self.shards.append(info)
        self.index += 1


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


PARTITION_RE = re.compile(r"^[A-Za-z0-9_.]+$")


def partition_batch(batch: pa.RecordBatch, field: str | None) -> dict[str | None, pa.RecordBatch]:
    """The batch's rows grouped by the value of `field` (None: one group). Values name shard files,
    so they must be plain: letters, digits, `_` and `.`."""
    if field is None:
        return {None: batch}
    column = batch.column(field)
    groups = {}
    for value in pc.unique(column).to_pylist():
        if value is None or not PARTITION_RE.match(str(value)):
            raise ValueError(f"Partition field {field!r} has the value {value!r}, which cannot name a shard.")
        groups[str(value)] = batch.filter(pc.equal(column, value))
    return groups


def group_keys(batch: pa.RecordBatch, group_by: tuple[str, ...]) -> pa.Array:
    """Each row's group key: the text of the first of the `group_by` columns that is neither null nor empty
    ("" when none is)."""
    texts = []
    for name in group_by:
        text = batch.column(name).cast(pa.string())
        texts.append(pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text))
    return pc.coalesce(*texts).fill_null("")


def split_batch(batch: pa.RecordBatch, group_by: tuple[str, ...], ratio: float) -> dict[str, pa.RecordBatch]:
    """The batch's rows by split: a row's place is its group key's (`group_keys`), so a group never crosses."""
    if ratio <= 0:
        return {"train": batch}
    mask = validation_mask(group_keys(batch, group_by), ratio)
    return {"train": batch.filter(pc.invert(mask)), "validation": batch.filter(mask)}
