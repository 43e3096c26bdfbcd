"""A stored row's integer-list columns as typed binary (`StoredRows.binary_lists`, `StoredRow.arrays`).

Token-id lists are most of the bytes of a tokenized kind's row, and parsing them back from JSON text was most of
the time of its exports (aed.recovery: 1.7k rows/s). Kept beside the document as little-endian 32-bit integers,
a batch of rows is decoded with a few vectorized numpy operations over the bytes the database sent, with no
Python object per row or per value, on PostgreSQL (ADBC reads bytea into one Arrow binary column) as on SQLite.

A row's blob is one run of int32 words: first one length per binary column (-1 for a null value), then the
columns' values one after the other.
"""

import numpy as np
import pyarrow as pa

INT32 = np.dtype("<i4")
LOW, HIGH = np.iinfo(INT32).min, np.iinfo(INT32).max


def pack(kind_name: str, columns: tuple[str, ...], row: dict) -> tuple[dict, bytes]:
    """(the row without `columns`, their values as one blob)."""
    rest = {name: value for name, value in row.items() if name not in columns}
    lengths, values = [], []
    for name in columns:
        value = row.get(name)
        if value is None:
            lengths.append(-1)
            continue
        if any(item is None for item in value):
            raise ValueError(f"Export kind {kind_name!r}: binary list column {name!r} holds a null value.")
        lengths.append(len(value))
        values.extend(value)
    words = np.array(lengths + values, dtype=np.int64)
    if len(words) and (words.min() < LOW or words.max() > HIGH):
        raise ValueError(f"Export kind {kind_name!r}: a value of the binary list columns {list(columns)} does not "
                         "fit in 32 bits.")
    return rest, words.astype(INT32).tobytes()


def unpack(blobs: pa.Array, columns: tuple[str, ...]) -> dict[str, pa.ListArray]:
    """The list<int64> column of each of `columns` for a batch of blobs (a binary array, one blob per row)."""
    if not pa.types.is_binary(blobs.type):
        blobs = blobs.cast(pa.binary())
    if blobs.null_count:
        raise ValueError("A stored row of a kind with binary list columns has no arrays.")
    count, width = len(blobs), len(columns)
    offsets = np.frombuffer(blobs.buffers()[1], dtype=np.int32)[blobs.offset:blobs.offset + count + 1].astype(np.int64)
    raw = np.frombuffer(blobs.buffers()[2], dtype=np.uint8) if count else np.zeros(0, np.uint8)
    words = raw[offsets[0]:offsets[-1]].view(INT32) if count else np.zeros(0, INT32)
    starts = (offsets[:-1] - offsets[0]) // INT32.itemsize  # each row's first word
    header = words[starts[:, None] + np.arange(width)] if count else np.zeros((0, width), np.int64)
    nulls = header < 0
    lengths = np.where(nulls, 0, header).astype(np.int64)
    # Where each column's values start in its row: after the header and the columns before it.
    before = np.cumsum(lengths, axis=1) - lengths
    arrays = {}
    for number, name in enumerate(columns):
        list_offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths[:, number], out=list_offsets[1:])
        first = starts + width + before[:, number]
        # Every value's word: its row's first value, plus its place within the row's list.
        where = np.repeat(first - list_offsets[:-1], lengths[:, number]) + np.arange(list_offsets[-1])
        arrays[name] = _list_array(words[where].astype(np.int64), list_offsets.astype(np.int32), nulls[:, number])
    return arrays


def _list_array(values: np.ndarray, offsets: np.ndarray, nulls: np.ndarray) -> pa.ListArray:
    """A list<int64> array straight from numpy buffers: pa.array() of an ndarray imports pandas (1.4 s and ~90 MB
    a worker, for nothing)."""
    children = pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    return pa.Array.from_buffers(pa.list_(pa.int64()), len(nulls), [validity, pa.py_buffer(offsets)],
                                 null_count=int(nulls.sum()), children=[children])
