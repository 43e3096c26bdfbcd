"""Benchmark of the export engine on this machine, against the simplest Arrow-native path in the same run.

It prints a table of figures; it is not a test and fails on nothing (it exits non-zero only when
a run itself fails). It measures:

- engine throughput: rows/s of one export job (kind `bench.chat_sft`, a values() kind read on the
  Arrow-native path, Parquet, shards of 250,000 rows, validation_ratio 0.05, dedup off) run by
  `dataplatform.jobs.services.execute_job` in a fresh child process (the "worker process"), timed
  around `execute_job` only, for the first 100,000 rows (median of 3) and for all 1,000,000 rows;
- the peak RSS of that worker process (ru_maxrss), for 100k and for 1M rows: the engine reads one
  keyset batch at a time, so its memory should stay flat as the export grows;
- the baseline, the simplest Arrow-native path with no engine around it, in a fresh child process:
  the ADBC PostgreSQL driver reads the table (one query, its record batches as they come) and
  pyarrow writes them to one zstd Parquet file as they are (JSON stays text: no parsing, no split,
  no manifest, no hashing), in one thread, for the same 100k (median of 3) and 1M rows;
- two more reference rates over the 1M rows: the ADBC read alone (nothing written), and the older
  raw baseline `COPY (SELECT row_to_json(t) ...) TO STDOUT` -> `pyarrow.json` -> Parquet;
- one extra engine run with dedup on, over the 100k rows (target: at least 0.8x dedup off);
- the Parquet layout of the 100k-row export, shard by shard: row groups, footer bytes, file bytes and
  the time pyarrow takes to read the shard (best of 5), beside the same rows written by
  `pyarrow.parquet.write_table` with its defaults (one row group up to 1,048,576 rows); once as above
  and once more with the engine reading batches of SMALL_BATCH_ROWS rows (as a kind that reads a few
  hundred rows a page does), where a writer that wrote one row group per batch shows it most;
- a check of the exported data: the manifest's rows add up to the row count, the job took the
  Arrow-native read path, and the first row of a train and a validation shard read back with
  pyarrow equals the database row.

The data are 1,000,000 synthetic chat SFT records (about 1 KB of text each: a user and an
assistant turn in `messages` jsonb, `tags` text[], `score` float8, `created_at` timestamptz; 1 in
100 rows repeats the previous row's content, for dedup) in a raw table `bench_chat_rows`
generated in SQL (INSERT ... SELECT FROM generate_series), read by the kind through an unmanaged
model. Everything lives in a dedicated database `dataplatform_bench` (created if missing) and a
dedicated DATA_DIR `var/bench/`; the table is kept between runs, so only the first run (or
`--rebuild`) pays the ~20-60 s generation. Exports of the previous run are deleted at the start of
the next.

Run from the project root (a few minutes on 2 cores), with PostgreSQL on 127.0.0.1:5432 (user
postgres, no password):

    .venv/bin/python bench/export_bench.py [--rebuild]

`--rows N` generates N rows instead of 1,000,000 (a quick smoke run; figures then are not the
reference ones, and a table of another size is regenerated).
"""

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run as a script, sys.path[0] is bench/; the project packages live one level up.
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = "dataplatform_bench"
# Set (not setdefault) before django.setup(): the bench must never write into another database
# or DATA_DIR. The child processes inherit this environment.
os.environ["DATABASE_URL"] = f"{SERVER_URL}/{BENCH_DB}"
os.environ["DATA_DIR"] = str(ROOT / "var" / "bench")
os.environ["DJANGO_SETTINGS_MODULE"] = "dataplatform.settings"
# create_export() publishes the job to the broker once its transaction commits. Rather than patching
# publish_job, the bench runs with REDIS_URL unset: settings then use kombu's filesystem broker under
# the bench DATA_DIR (var/bench/broker/), which no worker consumes, so the published message is inert
# and the job is executed here, in a child process, by execute_job() itself. Queued messages of earlier
# runs are removed at the start of each run.
os.environ.pop("REDIS_URL", None)
# Local filesystem storage: the figures are the engine's, not an object store's upload speed.
os.environ.pop("EXPORTS_S3_BUCKET", None)
# The table is the output; INFO lines would only interleave with it.
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import psycopg2  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.postgres.fields import ArrayField  # noqa: E402
from django.db import connection, models  # noqa: E402
from rest_framework import serializers  # noqa: E402

from dataplatform.exports.registry import ExportFilters, ExportKind, ExportQuery, register  # noqa: E402

TOTAL_ROWS = 1_000_000
SUBSET_ROWS = 100_000
REPEATS = 3  # 100k runs; the 1M runs are done once each
SHARD_ROWS = 250_000
VALIDATION_RATIO = 0.05
DUPLICATE_EVERY = 100  # row g with g % 100 == 0 repeats the content of row g - 1

TARGET_ROWS_PER_S = 80_000
TARGET_BASELINE_RATIO = 1.0  # engine / (ADBC -> Parquet, one thread)
TARGET_RSS_MB = 300
TARGET_RSS_FLAT = 1.25  # "flat": peak RSS at 1M rows at most 1.25x that at 100k rows
TARGET_DEDUP_RATIO = 0.8  # dedup on / dedup off
SMALL_BATCH_ROWS = 500  # the layout run's read batches (EXPORT_BATCH_ROWS in its worker process)
READS = 5  # reads of each shard for its read time

TABLE = "bench_chat_rows"
# Stored as the table's comment once generation has finished; a table without the marker of
# the current generator (or of another size) is regenerated.
TABLE_MARKER = "export_bench generator v1, rows={rows}"
KIND = "bench.chat_sft"
RAW_OUTPUT = Path(settings.DATA_DIR) / "raw-baseline.parquet"
REWRITTEN = Path(settings.DATA_DIR) / "rewritten-shard.parquet"
ADBC_OUTPUT = Path(settings.DATA_DIR) / "adbc-baseline.parquet"

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("created_at", pa.timestamp("us", tz="UTC")),
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("tags", pa.list_(pa.string())),
    ("score", pa.float64()),
])
COLUMNS = "id, created_at, messages, tags, score"
# A dict literal: tests/exports/test_field_meanings.py reads it (and SCHEMA's names) without importing the bench.
FIELD_MEANINGS = {
    "id": "The row's id in bench_chat_rows, 1 to the number of rows generated.",
    "created_at": "2024-01-01 00:00 UTC plus 2.5 s per id, plus up to about a second of jitter.",
    "messages": "A synthetic user instruction and assistant answer (about 1 KB of word-like text); every 100th row "
                "repeats the previous row's content.",
    "tags": "One to three topic tags (math, code, chat, ...), picked from the row's content key.",
    "score": "A number in [0, 1] hashed from the row's content key.",
}


class BenchChatRow(models.Model):
    """The generated table, read by the kind as a real app's table is: a values() queryset."""

    id = models.BigIntegerField(primary_key=True)
    created_at = models.DateTimeField()
    messages = models.JSONField()
    tags = ArrayField(models.TextField())
    score = models.FloatField()

    class Meta:
        managed = False  # made by ensure_table, in SQL
        db_table = TABLE
        app_label = "exports"


# --- The bench record kind -------------------------------------------------------------------

class BenchFilters(ExportFilters):
    # Export only the first `limit` rows (by id) of the data version: the 100k runs.
    # (The inherited created_after/created_before are accepted and ignored by this kind.)
    limit = serializers.IntegerField(required=False, min_value=1)


def _upto(query: ExportQuery) -> int:
    upto = int(query.data_version or 0)
    limit = query.filters.get("limit")
    if limit:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM {TABLE} WHERE id <= %s ORDER BY id OFFSET %s LIMIT 1", [upto, limit - 1])
            row = cursor.fetchone()
        if row:
            upto = min(upto, row[0])
    return upto


def _values(query: ExportQuery):
    return BenchChatRow.objects.filter(id__lte=_upto(query)).values(*SCHEMA.names)


def _count(query: ExportQuery) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE id <= %s", [_upto(query)])
        return cursor.fetchone()[0]


def _data_version(project) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {TABLE}")
        return str(cursor.fetchone()[0])


register(ExportKind(
    name=KIND,
    version=1,
    schema=SCHEMA,
    group="row",
    group_by=("id",),
    label="Bench chat SFT rows",
    description="Synthetic chat SFT records of bench/export_bench.py (not a project's data).",
    values=_values,
    data_version=_data_version,
    append_only=True,  # rows are only inserted into the bench table
    count=_count,
    filters=BenchFilters,
    dedup_ignore=("id", "created_at"),
    field_meanings=FIELD_MEANINGS,
))


# --- Data --------------------------------------------------------------------------------------

def _words(expression: str) -> str:
    """Hex digests made word-like with a few cheap replace()s (translate() costs 5x more)."""
    return f"replace(replace(replace(replace({expression}, '0', ' '), 'a', ' the '), '7', 'ing '), 'c', 'o')"


def _hex(prefix: str) -> str:
    return f"encode(sha512(('{prefix}' || k)::bytea), 'hex')"


# (`%%` is a literal % once psycopg2 has substituted %(lo)s and %(hi)s.)
# Every row's text comes from sha512 digests of its content key k (g, or g - 1 for a duplicate), so
# no two original rows share text and the text compresses about as poorly as real text (~2-3x).
INSERT_SQL = f"""
INSERT INTO {{table}} ({COLUMNS})
SELECT g,
       timestamptz '2024-01-01 00:00:00+00' + make_interval(secs => g * 2.5)
         + (hashint4(g) & 1048575) * interval '1 microsecond',
       jsonb_build_array(
         jsonb_build_object('role', 'user', 'content',
           (ARRAY['Explain', 'Summarize this:', 'Rewrite more formally:', 'Translate into French:',
                  'Find the bug in', 'Give three examples of', 'What is', 'Write a short poem about'])[1 + k %% 8]
           || ' ' || left({_words(_hex('u') + ' || ' + _hex('v'))}, 90 + (k * 13) %% 160)),
         jsonb_build_object('role', 'assistant', 'content',
           (ARRAY['Sure! ', 'Here is the answer. ', 'Certainly. ', '', 'Let us go step by step. '])[1 + k %% 5]
           || left({_words(' || '.join(_hex(p) for p in 'abcdef'))}, 600 + (k * 7) %% 300))
       ),
       (ARRAY['math', 'code', 'chat', 'safety', 'reasoning', 'writing', 'translation', 'qa', 'multilingual',
              'tool-use'])[1 + k %% 10 : 1 + k %% 10 + (k / 10) %% 3],
       (hashint4(k) & 2147483647)::float8 / 2147483647
FROM (SELECT g, CASE WHEN g %% {DUPLICATE_EVERY} = 0 THEN g - 1 ELSE g END AS k
      FROM generate_series(%(lo)s, %(hi)s) AS g) AS s
"""


def ensure_database() -> None:
    benchlib.ensure_database(SERVER_URL, BENCH_DB)


def ensure_table(rows: int, rebuild: bool) -> None:
    marker = TABLE_MARKER.format(rows=rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", [TABLE])
        comment = cursor.fetchone()[0]
        if not rebuild and comment == marker:
            cursor.execute(f"SELECT count(*) FROM {TABLE}")
            if cursor.fetchone()[0] == rows:
                print(f"reused table {TABLE} ({rows:,} rows; --rebuild regenerates it)")
                return
    started = time.perf_counter()
    # One id range per core, each generated on its own connection into its own staging table
    # (INSERT ... SELECT runs on one core), then copied in id order into the table, whose heap is
    # thus in id order like a table filled over time (concurrent inserts would interleave its pages).
    workers = max(1, min(4, os.cpu_count() or 1))
    step = -(-rows // workers)
    ranges = [(lo, min(rows, lo + step - 1)) for lo in range(1, rows + 1, step)]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")
        for number in range(len(ranges)):
            cursor.execute(f"DROP TABLE IF EXISTS {TABLE}_stage{number}")
            # UNLOGGED: no WAL while generating (twice as fast); reads are the same as a logged table's.
            cursor.execute(f"""CREATE UNLOGGED TABLE {TABLE}_stage{number} (
                id bigint NOT NULL, created_at timestamptz NOT NULL, messages jsonb NOT NULL,
                tags text[] NOT NULL, score double precision NOT NULL)""")

    def insert(number: int) -> None:
        conn = psycopg2.connect(os.environ["DATABASE_URL"])
        try:
            with conn, conn.cursor() as cur:
                cur.execute(INSERT_SQL.format(table=f"{TABLE}_stage{number}"),
                            {"lo": ranges[number][0], "hi": ranges[number][1]})
        finally:
            conn.close()

    with ThreadPoolExecutor(len(ranges)) as pool:
        list(pool.map(insert, range(len(ranges))))
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE UNLOGGED TABLE {TABLE} (LIKE {TABLE}_stage0)")
        for number in range(len(ranges)):
            cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {TABLE}_stage{number} ORDER BY id")
            cursor.execute(f"DROP TABLE {TABLE}_stage{number}")
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {TABLE} ADD PRIMARY KEY (id)")
        # Sets hint bits and the visibility map now, so the first timed read does not pay for them.
        cursor.execute(f"VACUUM (ANALYZE) {TABLE}")
        cursor.execute(f"COMMENT ON TABLE {TABLE} IS %s", [marker])
        cursor.execute(f"SELECT pg_size_pretty(pg_total_relation_size('{TABLE}')), "
                       f"avg(octet_length(messages::text))::int FROM {TABLE}")
        size, avg_json = cursor.fetchone()
    print(f"generated table {TABLE}: {rows:,} rows, {size}, messages JSON {avg_json} bytes/row on average, "
          f"in {time.perf_counter() - started:.1f} s")


def warm_cache() -> float:
    """Read the whole heap once, so that neither side's first run pays for cold disk reads."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT sum(octet_length(tags[1])) FROM {TABLE}")
        cursor.fetchone()
    return time.perf_counter() - started


def nth_id(n: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {TABLE} ORDER BY id OFFSET %s LIMIT 1", [n - 1])
        return cursor.fetchone()[0]


def db_row(row_id: int) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, created_at, messages::json, tags, score FROM {TABLE} WHERE id = %s", [row_id])
        return dict(zip(SCHEMA.names, cursor.fetchone(), strict=True))


def first_parquet_row(path) -> dict:
    return next(pq.ParquetFile(path).iter_batches(batch_size=1)).to_pylist()[0]


# --- Child processes ---------------------------------------------------------------------------

peak_rss_mb = benchlib.peak_rss_mb


def child_engine(export_id: int) -> dict:
    """The worker process: run the export's job as a Celery worker would, timed around execute_job."""
    from dataplatform.exports.models import Export
    from dataplatform.jobs.services import execute_job

    job_id = Export.objects.values_list("job_id", flat=True).get(pk=export_id)
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    execute_job(job_id=job_id)
    return {"seconds": time.perf_counter() - started, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb()}


COPY_SQL = (
    f"COPY (SELECT row_to_json(t) FROM (SELECT {COLUMNS} FROM {TABLE}{{where}}) t) "
    r"TO STDOUT WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')"
)


def child_raw(upto: int | None) -> dict:
    """The raw baseline: COPY the rows out as JSON lines, parse them with pyarrow, write one zstd Parquet file."""
    import pyarrow.json as pj

    rss_before = peak_rss_mb()
    started = time.perf_counter()
    buffer = io.BytesIO()
    with psycopg2.connect(os.environ["DATABASE_URL"]) as conn, conn.cursor() as cursor:
        cursor.copy_expert(COPY_SQL.format(where=f" WHERE id <= {int(upto)}" if upto else ""), buffer)
    conn.close()
    view = buffer.getbuffer()
    table = pj.read_json(pa.BufferReader(pa.py_buffer(view)),
                         parse_options=pj.ParseOptions(explicit_schema=SCHEMA))
    del view
    buffer = None  # the JSON text is not needed while writing the Parquet file
    pq.write_table(table, RAW_OUTPUT, compression="zstd")
    return {"seconds": time.perf_counter() - started, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb(),
            "rows": table.num_rows, "bytes": RAW_OUTPUT.stat().st_size}


def child_adbc(upto: int | None, write: bool) -> dict:
    """The baseline: the ADBC driver reads the rows (one query, its batches as they come) and, with `write`,
    pyarrow writes them to one zstd Parquet file as they are, in this one thread."""
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    where = f" WHERE id <= {int(upto)}" if upto else ""
    rows = benchlib.adbc_to_parquet(os.environ["DATABASE_URL"], f"SELECT {COLUMNS} FROM {TABLE}{where} ORDER BY id",
                                    ADBC_OUTPUT if write else None)
    return {"seconds": time.perf_counter() - started, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb(),
            "rows": rows, "bytes": ADBC_OUTPUT.stat().st_size if write else 0}


def run_child(*args: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                          env=os.environ | (env or {}))
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"child process {' '.join(args)} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- Runs ---------------------------------------------------------------------------------------

def engine_run(project, *, limit: int | None, dedup: bool = False, batch_rows: int | None = None) -> dict:
    from dataplatform.exports import services as export_services
    from dataplatform.exports.models import Export
    from dataplatform.jobs.models import JobState

    options = {"kind": KIND, "format": "parquet", "shard_rows": SHARD_ROWS, "validation_ratio": VALIDATION_RATIO,
               "dedup": dedup, "filters": {"limit": limit} if limit else {}}
    export = export_services.create_export(project=project, user=None, options=options)
    measured = run_child("engine", str(export.pk),
                         env={"EXPORT_BATCH_ROWS": str(batch_rows)} if batch_rows else None)
    export = Export.objects.select_related("job").get(pk=export.pk)
    if export.job.state != JobState.SUCCEEDED:
        raise SystemExit(f"export {export.pk} ended {export.job.state}: {export.job.error}")
    totals = export.manifest["totals"]
    return {**measured, "export": export, "rows": totals["rows"], "shards": totals["shards"],
            "bytes": totals["bytes"], "removed": export.manifest["dedup"]["removed_rows"],
            "rows_read": export.job.progress_done}


def parquet_layout(path: Path) -> dict:
    """One Parquet file's row groups, footer (the file metadata's serialized size) and file bytes, and how long
    pyarrow takes to read it whole (the best of READS: the file is in the page cache after the first, and on a
    shared machine the slower reads measure the neighbours)."""
    metadata = pq.ParquetFile(path).metadata
    seconds = []
    for _ in range(READS):
        started = time.perf_counter()
        pq.read_table(path)
        seconds.append(time.perf_counter() - started)
    return {"rows": metadata.num_rows, "row_groups": metadata.num_row_groups, "footer": metadata.serialized_size,
            "bytes": path.stat().st_size, "read": min(seconds)}


def layout_rows(label: str, export) -> list[tuple[str, ...]]:
    """Each shard of `export` beside the same rows written by pyarrow's write_table with its defaults (zstd)."""
    from dataplatform.exports.storage import export_storage

    storage, rows = export_storage(), []
    for shard in export.manifest["shards"]:
        path = Path(storage.path(f"{export.location}/{shard['name']}"))
        pq.write_table(pq.read_table(path), REWRITTEN, compression="zstd")
        ours, base = parquet_layout(path), parquet_layout(REWRITTEN)
        name = f"{label}, {shard['split']} ({ours['rows']:,} rows)"
        rows += [
            (f"{name}: row groups", f"{ours['row_groups']:,}", f"{base['row_groups']:,}",
             f"{ours['row_groups'] / base['row_groups']:.0f}"),
            (f"{name}: footer bytes", f"{ours['footer']:,}", f"{base['footer']:,}",
             f"{ours['footer'] / base['footer']:.2f}"),
            (f"{name}: file bytes", f"{ours['bytes']:,}", f"{base['bytes']:,}", f"{ours['bytes'] / base['bytes']:.2f}"),
            (f"{name}: read ms (best of {READS})", f"{ours['read'] * 1000:.1f}", f"{base['read'] * 1000:.1f}",
             f"{ours['read'] / base['read']:.2f}"),
        ]
    REWRITTEN.unlink(missing_ok=True)
    return rows


def delete_previous_exports(project) -> None:
    from dataplatform.exports.models import Export
    from dataplatform.exports.services import delete_export
    from dataplatform.jobs.services import fail_job

    for export in Export.objects.filter(project=project).select_related("job"):
        if not export.job.is_terminal:  # left by an interrupted run
            fail_job(job_id=export.job_id, error="Interrupted bench run.")
            export.refresh_from_db()
        delete_export(export=export)
    for message in (settings.BROKER_DIR / "queue").glob("*"):
        message.unlink()


def verify(engine_1m: dict, engine_small: dict, dedup_small: dict, raw_1m: dict, total: int, subset: int) -> list[str]:
    from dataplatform.exports.storage import export_storage

    problems = []
    expected_removed = subset // DUPLICATE_EVERY
    for label, run, expected in (("1M", engine_1m, total), ("100k", engine_small, subset)):
        shard_sum = sum(shard["rows"] for shard in run["export"].manifest["shards"])
        if shard_sum != expected or run["rows"] != expected:
            problems.append(f"engine {label}: manifest rows {shard_sum:,} / totals {run['rows']:,}, expected {expected:,}")
    if dedup_small["rows"] != subset - expected_removed or dedup_small["removed"] != expected_removed:
        problems.append(f"dedup: {dedup_small['rows']:,} rows, {dedup_small['removed']:,} removed; "
                        f"expected {subset - expected_removed:,} and {expected_removed:,}")
    if raw_1m["rows"] != total:
        problems.append(f"raw 1M: {raw_1m['rows']:,} rows, expected {total:,}")
    export = engine_1m["export"]
    if export.manifest.get("read_path") != "postgresql-arrow":
        problems.append(f"engine 1M: read path {export.manifest.get('read_path')!r}, not postgresql-arrow")
    storage = export_storage()
    paths = [storage.path(f"{export.location}/{shard['name']}") for shard in export.manifest["shards"]]
    # Every id exactly once, then whole rows of every 997th id (a sample across all shards) against the database.
    ids = pa.concat_arrays([pq.read_table(path, columns=["id"]).column("id").combine_chunks() for path in paths])
    if sorted(ids.to_pylist()) != list(range(1, total + 1)):
        problems.append(f"engine 1M: the shards' ids are not each of 1..{total:,} once")
    for path in paths:
        table = pq.read_table(path, filters=[("id", "in", list(range(1, total + 1, 997)))])
        for row in table.to_pylist():
            if row != db_row(row["id"]):
                problems.append(f"engine shard {Path(path).name}: row id {row['id']} differs from the database row")
    raw_row = first_parquet_row(RAW_OUTPUT)
    if raw_row != db_row(raw_row["id"]):
        problems.append(f"raw baseline: first row (id {raw_row['id']}) differs from the database row")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="regenerate the synthetic table")
    parser.add_argument("--rows", type=int, default=TOTAL_ROWS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # Sampled before we add our own load: on 2 cores other work swings every figure.
    load_average = os.getloadavg()[0]
    total = args.rows
    subset = min(SUBSET_ROWS, total)

    from django.core.management import call_command

    from dataplatform.accounts.models import Project

    ensure_database()
    call_command("migrate", verbosity=0)
    ensure_table(total, args.rebuild)
    warm_seconds = warm_cache()
    project, _ = Project.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    delete_previous_exports(project)
    subset_upto = nth_id(subset)

    # Interleaved, so any drift of the machine hits both sides alike.
    engine_small, base_small = [], []
    for _ in range(REPEATS):
        engine_small.append(engine_run(project, limit=subset))
        base_small.append(run_child("adbc_parquet", str(subset_upto)))
    engine_1m = engine_run(project, limit=None)
    base_1m = run_child("adbc_parquet", "0")
    read_1m = run_child("adbc_read", "0")
    raw_1m = run_child("raw", "0")
    dedup_small = engine_run(project, limit=subset, dedup=True)
    small_batches = engine_run(project, limit=subset, batch_rows=SMALL_BATCH_ROWS)
    problems = verify(engine_1m, engine_small[-1], dedup_small, raw_1m, total, subset)
    if small_batches["rows"] != subset:
        problems.append(f"engine {subset:,}, batches of {SMALL_BATCH_ROWS}: {small_batches['rows']:,} rows")
    for label, run in (("ADBC -> Parquet", base_1m), ("ADBC read", read_1m)):
        if run["rows"] != total:
            problems.append(f"{label} 1M: {run['rows']:,} rows, expected {total:,}")

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    print(
        f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, PostgreSQL {pg_version}, "
        f"pyarrow {pa.__version__}, psycopg2 {psycopg2.__version__.split()[0]}, Python {platform.python_version()}, "
        f"EXPORT_BATCH_ROWS={settings.EXPORT_BATCH_ROWS}, load average before the run {load_average:.2f} "
        f"(cache warm-up read {warm_seconds:.1f} s)"
    )

    small_label, big_label = f"{subset // 1000}k", (f"{total // 1_000_000}M" if total % 1_000_000 == 0
                                                       else f"{total // 1000}k")

    def rate(run: dict, rows: int) -> float:
        return rows / run["seconds"]

    def median_rate(runs: list[dict], rows: int) -> float:
        return statistics.median(rate(run, rows) for run in runs)

    e_small, b_small = median_rate(engine_small, subset), median_rate(base_small, subset)
    e_big, b_big = rate(engine_1m, total), rate(base_1m, total)
    e_rss_small = max(run["peak_rss_mb"] for run in engine_small)
    b_rss_small = max(run["peak_rss_mb"] for run in base_small)
    e_rss_ratio, b_rss_ratio = engine_1m["peak_rss_mb"] / e_rss_small, base_1m["peak_rss_mb"] / b_rss_small
    dedup_ratio = rate(dedup_small, subset) / e_small
    rate_target = f"≥ {TARGET_ROWS_PER_S:,}, ratio ≥ {TARGET_BASELINE_RATIO}"
    rows: list[tuple[str, ...]] = [
        (f"rows/s, {small_label} rows (median of {REPEATS})", f"{e_small:,.0f}", f"{b_small:,.0f}",
         f"{e_small / b_small:.2f}", rate_target),
        (f"rows/s, {big_label} rows", f"{e_big:,.0f}", f"{b_big:,.0f}", f"{e_big / b_big:.2f}", rate_target),
        (f"wall time, {big_label} rows (s)", f"{engine_1m['seconds']:.1f}", f"{base_1m['seconds']:.1f}",
         f"{engine_1m['seconds'] / base_1m['seconds']:.2f}", ""),
        (f"peak RSS, {small_label} rows (MB, max of {REPEATS})", f"{e_rss_small:.0f}", f"{b_rss_small:.0f}",
         f"{e_rss_small / b_rss_small:.2f}", ""),
        (f"peak RSS, {big_label} rows (MB)", f"{engine_1m['peak_rss_mb']:.0f}", f"{base_1m['peak_rss_mb']:.0f}",
         f"{engine_1m['peak_rss_mb'] / base_1m['peak_rss_mb']:.2f}", f"engine < {TARGET_RSS_MB}"),
        (f"peak RSS ratio {big_label} / {small_label}", f"{e_rss_ratio:.2f}", f"{b_rss_ratio:.2f}", "-",
         f"engine ≤ {TARGET_RSS_FLAT} (flat)"),
        ("RSS after imports, before the work (MB)", f"{engine_1m['rss_before_mb']:.0f}",
         f"{base_1m['rss_before_mb']:.0f}", "-", ""),
        (f"output, {big_label} rows (MB, zstd Parquet)", f"{engine_1m['bytes'] / 1e6:.0f}",
         f"{base_1m['bytes'] / 1e6:.0f}", f"{engine_1m['bytes'] / base_1m['bytes']:.2f}", ""),
        (f"rows written / files, {big_label} rows", f"{engine_1m['rows']:,} / {engine_1m['shards']}",
         f"{base_1m['rows']:,} / 1", "-", ""),
        (f"rows/s, {small_label} rows, dedup on", f"{rate(dedup_small, subset):,.0f}", f"{e_small:,.0f} (off)",
         f"{dedup_ratio:.2f}", f"≥ {TARGET_DEDUP_RATIO} of dedup off"),
    ]
    benchlib.print_table(("figure", "engine", "ADBC -> Parquet", "ratio", "target"), rows)
    print(f"ratio = engine / baseline: above 1 is faster for rows/s, bigger for RSS, seconds and MB. Engine: one job "
          f"(read path {engine_1m['export'].manifest.get('read_path')}, keyset batches of "
          f"{settings.EXPORT_BATCH_ROWS:,}, {VALIDATION_RATIO:.0%} validation split, shards of {SHARD_ROWS:,} rows, "
          "manifest, sha256); baseline: ADBC's batches of one query written to one zstd Parquet file as they are "
          "(JSON as text), one thread. Both in fresh child processes.")
    print(f"reference rates, {big_label} rows: ADBC read alone {rate(read_1m, total):,.0f} rows/s (peak RSS "
          f"{read_1m['peak_rss_mb']:.0f} MB); COPY row_to_json -> pyarrow.json -> Parquet {rate(raw_1m, total):,.0f} "
          f"rows/s (peak RSS {raw_1m['peak_rss_mb']:.0f} MB); dedup removed {dedup_small['removed']:,} rows of "
          f"{subset:,}, peak RSS {dedup_small['peak_rss_mb']:.0f} MB")

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    print(f"targets: engine ≥ {TARGET_ROWS_PER_S:,} rows/s at {big_label}: {verdict(e_big >= TARGET_ROWS_PER_S)} "
          f"({e_big:,.0f}); engine/baseline ≥ {TARGET_BASELINE_RATIO} at {big_label}: "
          f"{verdict(e_big / b_big >= TARGET_BASELINE_RATIO)} ({e_big / b_big:.2f}); peak RSS < {TARGET_RSS_MB} MB: "
          f"{verdict(engine_1m['peak_rss_mb'] < TARGET_RSS_MB)} ({engine_1m['peak_rss_mb']:.0f}); flat "
          f"({big_label}/{small_label} ≤ {TARGET_RSS_FLAT}): {verdict(e_rss_ratio <= TARGET_RSS_FLAT)} "
          f"({e_rss_ratio:.2f}); dedup on ≥ {TARGET_DEDUP_RATIO}x off: {verdict(dedup_ratio >= TARGET_DEDUP_RATIO)} "
          f"({dedup_ratio:.2f})")
    print()
    benchlib.print_table(
        (f"Parquet layout, {small_label}-row export", "engine", "pyarrow write_table", "ratio"),
        layout_rows(f"batches of {settings.EXPORT_BATCH_ROWS:,}", engine_small[-1]["export"])
        + layout_rows(f"batches of {SMALL_BATCH_ROWS:,}", small_batches["export"]))
    print(f"engine: the shards of the {small_label}-row export as the job wrote them (read batches of "
          f"{settings.EXPORT_BATCH_ROWS:,} rows, then of {SMALL_BATCH_ROWS:,}, the run's rows/s "
          f"{rate(small_batches, subset):,.0f}, peak RSS {small_batches['peak_rss_mb']:.0f} MB); "
          "pyarrow write_table: the same rows written by pyarrow.parquet.write_table with its defaults, zstd")
    if problems:
        print("verified: NO")
        for problem in problems:
            print(f"  {problem}")
    else:
        print(f"verified: yes (manifest rows = {total:,} and {subset:,}, read on the Arrow-native path; every id once "
              "in the shards; every 997th row of the shards and the raw file's first row equal the database rows; "
              f"dedup removed {dedup_small['removed']:,})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        what, value = sys.argv[2], int(sys.argv[3])
        if what == "engine":
            result = child_engine(value)
        elif what in ("adbc_parquet", "adbc_read"):
            result = child_adbc(value or None, write=what == "adbc_parquet")
        else:
            result = child_raw(value or None)
        print(json.dumps(result))
    else:
        main()
