import pyarrow as pa

from dataplatform.exports.writers import Deduplicator, SplitWriter, validation_mask

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
