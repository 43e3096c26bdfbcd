import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataplatform.exports.writers import Deduplicator, RowGroups, SplitWriter, validation_mask

from .kinds import SCHEMA, make_row


def batch_of(rows):
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def test_split_is_stable_and_close_to_the_ratio():
    keys = pa.array(range(20_000))
    first = validation_mask(keys, 0.1).to_pylist()
    assert first == validation_mask(keys, 0.1).to_pylist()
    assert 0.09 < sum(first) / len(first) < 0.11
    # A row's split does not depend on which other rows are in the batch.
    assert validation_mask(pa.array([12345]), 0.1).to_pylist() == [first[12345]]


def test_zero_ratio_sends_everything_to_train():
    assert not any(validation_mask(pa.array(range(100)), 0.0).to_pylist())


def test_dedup_removes_exact_duplicates_only():
    dedup = Deduplicator(ignore=("id", "created_at"))
    rows = [make_row(1), make_row(2, content_of=1), make_row(3)]
    near = make_row(4, content_of=3)
    near["score"] += 1e-9  # one field differs a little: not a duplicate
    kept = dedup.filter(batch_of(rows + [near]))
    assert kept.column("id").to_pylist() == [1, 3, 4]
    assert dedup.removed == 1
    again = dedup.filter(batch_of([make_row(5, content_of=3)]))  # duplicates across batches count too
    assert again.num_rows == 0 and dedup.removed == 2


def test_shards_hold_at_most_shard_rows(tmp_path):
    published = []
    writer = SplitWriter(split="train", fmt="parquet", schema=SCHEMA, work_dir=tmp_path, shard_rows=4,
                         shard_bytes=None, on_complete=lambda path, info: published.append((path.exists(), info)))
    writer.write(batch_of([make_row(i) for i in range(1, 8)]))
    writer.write(batch_of([make_row(i) for i in range(8, 11)]))
    shards = writer.close()
    assert [s.rows for s in shards] == [4, 4, 2]
    assert [s.name for s in shards] == ["train-00000.parquet", "train-00001.parquet", "train-00002.parquet"]
    assert all(existed for existed, _ in published)


def test_shards_close_when_they_pass_shard_bytes(tmp_path):
    writer = SplitWriter(split="train", fmt="jsonl", schema=SCHEMA, work_dir=tmp_path, shard_rows=None,
                         shard_bytes=2_000, on_complete=lambda path, info: None)
    for start in range(1, 60, 5):
        writer.write(batch_of([make_row(i) for i in range(start, start + 5)]))
    shards = writer.close()
    assert len(shards) > 3 and sum(s.rows for s in shards) == 60
    assert all(s.bytes >= 2_000 for s in shards[:-1])


def test_abort_leaves_no_partial_file(tmp_path):
    writer = SplitWriter(split="train", fmt="parquet", schema=SCHEMA, work_dir=tmp_path, shard_rows=100,
                         shard_bytes=None, on_complete=lambda path, info: None)
    writer.write(batch_of([make_row(1)]))
    assert list(tmp_path.iterdir())
    writer.abort()
    assert not list(tmp_path.iterdir())


def parquet_writer(tmp_path, split="train", **options) -> SplitWriter:
    return SplitWriter(split=split, fmt="parquet", schema=SCHEMA, work_dir=tmp_path,
                       on_complete=lambda path, info: shutil.copy(path, tmp_path / info.name),
                       **{"shard_rows": None, "shard_bytes": None} | options)


def row_groups(path) -> list[int]:
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


def test_small_batches_make_one_row_group_not_one_each(tmp_path):
    writer = parquet_writer(tmp_path)
    for start in range(1, 301, 3):  # 100 batches of 3 rows, as a split of a kind that reads small pages gets them
        writer.write(batch_of([make_row(i) for i in range(start, start + 3)]))
    [shard] = writer.close()
    assert row_groups(tmp_path / shard.name) == [300]
    assert pq.read_table(tmp_path / shard.name).column("id").to_pylist() == list(range(1, 301))


def test_row_groups_hold_at_most_the_rows_set(tmp_path):
    writer = parquet_writer(tmp_path, row_groups=RowGroups(rows=40))
    for start in range(1, 101, 7):
        writer.write(batch_of([make_row(i) for i in range(start, min(start + 7, 101))]))
    [shard] = writer.close()
    assert row_groups(tmp_path / shard.name) == [40, 40, 20]


def test_an_export_s_shards_hold_back_at_most_the_bytes_set_together(tmp_path):
    """Two splits share one bound: whenever they hold it between them, the one holding more writes its rows."""
    batch = batch_of([make_row(i) for i in range(1, 11)])
    budget = RowGroups(bytes=4 * batch.nbytes)
    train, validation = (parquet_writer(tmp_path, split=split, row_groups=budget) for split in ("train", "validation"))
    for step in range(12):
        train.write(batch)
        if step % 4 == 0:
            validation.write(batch)
        assert train.current.held_bytes + validation.current.held_bytes < 4 * batch.nbytes
    [train_shard], [validation_shard] = train.close(), validation.close()
    assert row_groups(tmp_path / train_shard.name) == [30, 20, 20, 20, 30]
    assert row_groups(tmp_path / validation_shard.name) == [30]
    assert budget.open == []


def test_parquet_shards_come_close_to_shard_bytes(tmp_path):
    writer = parquet_writer(tmp_path, shard_bytes=20_000)
    for start in range(1, 4001, 50):
        writer.write(batch_of([make_row(i) for i in range(start, start + 50)]))
    shards = writer.close()
    assert sum(s.rows for s in shards) == 4000 and len(shards) == 4
    # The first shard learns the split's compression with a row group of its own; the rest need one each.
    assert len(row_groups(tmp_path / shards[0].name)) == 2
    assert all(len(row_groups(tmp_path / s.name)) == 1 for s in shards[1:])
    assert all(0.8 * 20_000 < s.bytes < 1.1 * 20_000 for s in shards[:-1]), [s.bytes for s in shards]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "jsonl.gz"])
def test_a_split_with_no_rows_can_keep_one_empty_shard(tmp_path, fmt):
    writer = SplitWriter(split="train", fmt=fmt, schema=SCHEMA, work_dir=tmp_path, shard_rows=10, shard_bytes=None,
                         on_complete=lambda path, info: shutil.copy(path, tmp_path / info.name))
    assert writer.close() == []
    [shard] = writer.close(keep_empty=True)
    assert (shard.name, shard.rows) == (f"train-00000.{fmt}", 0)
    if fmt == "parquet":
        assert pq.read_table(tmp_path / shard.name).schema.equals(SCHEMA)
