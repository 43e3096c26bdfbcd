"""Every shipped export kind at the speed of its data (issue 43): rows/s of one export job of each kind, beside an
ADBC -> Parquet read of the source tables its live derivation reads, measured in the same run.

It prints tables of figures; it is not a test and fails on nothing (it exits non-zero only when a run itself
fails). For every registered kind a workflow ships (onpanda.*, swe.*, aed.*, atd.*, platform.jobs; a bench's or a
test's own kinds are left out), at each size (default 10,000 and 100,000 rows):

- the data: per workflow a seed project filled through the platform's own code (bench/kinds_seeds.py: the demo's
  parts, importers, services and jobs, with the embedded model where the workflow needs one), grown by SQL
  replication of its real rows into a project of the copies the kind needs for that many rows (kinds of a workflow
  whose needs lie within 1.5x share one project), ANALYZEd;
- the kind: one export job (Parquet, 5% validation, dedup off) run by `execute_job` in a fresh child process, timed
  around it, with that process's peak RSS (VmHWM). A kind still running after `--cap-seconds` is stopped: its
  rate is then the job's rows read so far over its time (marked "capped") and its peak RSS read just before;
- the baseline, per project, in a fresh child process: the ADBC driver runs the workflow's one query over the
  tables a live derivation reads (a source per row with its children as JSON: sessions with nodes, events and
  reviews; cases with traces, proposals, replays and runs; tasks and trajectories with labels; prompts with scores,
  selections and answers; jobs; a kind whose rows come from other sources reads those: swe.trajectories its
  trajectories with labels, atd.dpo its teacher answers with prompt and scores) and pyarrow writes its batches to
  one zstd Parquet file; "x baseline" is the
  baseline's seconds over the export's, i.e. the kind's rows/s over the rows/s of reading its data;
- verified: the first `--sample` rows of the kind's live derivation (its row generator, or the stored-rows engine's
  `live_rows`, at the export's data version) equal the exported rows (by id, or by content where the schema has
  none), and the exported rows add up to the manifest's;
- the latency of the request that settles a source (submit a case, review a label: the service call, in this
  process) with the build-ahead hook on and off (EXPORTS_BUILD_AHEAD), alternating, p50 and p95 (`--requests`);
- for kinds whose rows the stored-rows engine computes ahead (`kind.stored`): the cost per row of computing them
  (`stored.build` over the project's sources, from no stored rows, in a child process with the cap, before the
  export, which then reads what was built and derives what is still missing).

Everything lives in a dedicated database `dataplatform_kinds_bench` and DATA_DIR `var/bench/kinds/`; the data are
kept between runs (`--rebuild` drops the database and builds everything again: the seeds with the model take a few
minutes). Run from the project root, with PostgreSQL on 127.0.0.1:5432 (user postgres, no password):

    .venv/bin/python bench/kinds_bench.py [--sizes 10000,100000] [--cap-seconds 180] [--kinds onpanda.,swe.labels]
    .venv/bin/python bench/kinds_bench.py --rows 2000    # a quick smoke run at one size
    KINDS_BENCH_PROFILE=/tmp/prof .venv/bin/python bench/kinds_bench.py ...   # each export's cProfile stats there
"""

import argparse
import contextlib
import cProfile
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
# KINDS_BENCH_DB names another database, so two checkouts can bench side by side.
BENCH_DB = os.environ.get("KINDS_BENCH_DB", "dataplatform_kinds_bench")
benchlib.use_own_database(SERVER_URL, BENCH_DB, ROOT / "var" / "bench" / "kinds")  # the children inherit it
# The children run as production's worker runs (docker-compose.yml): DEBUG off. With the embedded default, DEBUG on,
# Django logs every query's SQL in the connection (up to 9,000): a build's inserts of ~200 KB each took a catch-up
# build to 466 MB at 78k sessions, and every export's peak RSS grew with its batches, which no worker does.
os.environ["DEBUG"] = "0"
os.environ.setdefault("SECRET_KEY", "kinds-bench-" + secrets.token_hex(16))  # which DEBUG off requires

SIZES = (10_000, 100_000)
CAP_SECONDS = 180
SAMPLE_ROWS = 200
VALIDATION_RATIO = 0.05
TARGET_RATIO, STRETCH_RATIO = 0.5, 0.8  # x baseline at the largest size
SLOW_KINDS, TARGET_SLOW_RATE = ("onpanda.panda_json", "aed.recovery"), 10_000  # rows/s
TARGET_RSS_MB, TARGET_RSS_FLAT = 300, 1.25
REQUESTS, REQUEST_COPIES, TARGET_REQUEST_MS = 40, 20, 20  # settling requests a workflow; copies of its seed for them


def _setup_django(rebuild: bool = False) -> None:
    benchlib.open_own_database(SERVER_URL, BENCH_DB, rebuild=rebuild)


def _setup_child() -> None:
    """A child process: the parent made the database; Django alone, as a worker starts (no admin connection)."""
    import django

    django.setup()


# --- child processes -------------------------------------------------------------------------------------------

def child_engine(export_id: int, started_file: str) -> dict:
    """The worker process: the export's job run as a Celery worker runs it, timed around execute_job."""
    from dataplatform.exports.models import Export
    from dataplatform.jobs.services import execute_job

    job_id = Export.objects.values_list("job_id", flat=True).get(pk=export_id)
    rss_before = benchlib.peak_rss_mb()
    Path(started_file).write_text(str(time.time()))  # the parent times a run it stops from here
    profile = os.environ.get("KINDS_BENCH_PROFILE")  # a folder: each export's cProfile stats go there
    profiler = cProfile.Profile() if profile else contextlib.nullcontext()
    started = time.perf_counter()
    with profiler:
        execute_job(job_id=job_id)
    seconds = time.perf_counter() - started
    if profile:
        profiler.dump_stats(Path(profile, f"export-{export_id}.prof"))
    return {"seconds": seconds, "rss_before_mb": rss_before, "peak_rss_mb": benchlib.peak_rss_mb()}


def child_baseline(project_id: int, kind_name: str) -> dict:
    from django.conf import settings
    from kinds_data import workflow_of

    from dataplatform.exports.registry import get_kind

    output = Path(settings.DATA_DIR) / "baseline.parquet"
    rss_before = benchlib.peak_rss_mb()
    started = time.perf_counter()
    rows = benchlib.adbc_to_parquet(os.environ["DATABASE_URL"],
                                    workflow_of(get_kind(kind_name)).baseline_for(kind_name) % {"project": int(project_id)},
                                    output)
    return {"seconds": time.perf_counter() - started, "rss_before_mb": rss_before, "peak_rss_mb": benchlib.peak_rss_mb(),
            "rows": rows, "bytes": output.stat().st_size}


def run_child(*args: str, cap: float | None = None) -> dict:
    """A child process of this script; with `cap`, stopped after that many seconds ({"capped": True, ...})."""
    from django.conf import settings

    started_file = Path(settings.DATA_DIR) / "child-started"
    started_file.unlink(missing_ok=True)
    process = subprocess.Popen([sys.executable, __file__, "--child", *args, str(started_file)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = process.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        peak = benchlib.peak_rss_mb(process.pid)
        stopped = time.time()
        process.kill()
        process.communicate()
        began = float(started_file.read_text()) if started_file.exists() else stopped - cap
        return {"capped": True, "seconds": stopped - began, "peak_rss_mb": peak}
    if process.returncode != 0:
        sys.stderr.write(err)
        raise SystemExit(f"child process {' '.join(args)} failed (exit {process.returncode})")
    return {"capped": False, **json.loads(out.strip().splitlines()[-1])}


# --- the runs ---------------------------------------------------------------------------------------------------

def delete_previous_exports() -> None:
    from django.conf import settings

    from dataplatform.exports.models import Export
    from dataplatform.exports.services import delete_export
    from dataplatform.jobs.services import fail_job

    # Not the seeds': the jobs seed is made of exports (deleting an export deletes its job).
    exports = Export.objects.filter(project__slug__startswith="kb-").exclude(project__slug__startswith="kb-seed-")
    for export in exports.select_related("job"):
        if not export.job.is_terminal:  # left by an interrupted or capped run
            fail_job(job_id=export.job_id, error="Interrupted bench run.")
            export.refresh_from_db()
        delete_export(export=export)
    for message in (settings.BROKER_DIR / "queue").glob("*"):
        message.unlink()


def child_build(project_id: int, kind_name: str, started_file: str) -> dict:
    """Compute a stored kind's rows of the project ahead, as a worker's build does (`stored.build` over the
    sources its default filters select), timed around it."""
    from kinds_data import query_for

    from dataplatform.accounts.models import Project
    from dataplatform.exports import stored
    from dataplatform.exports.registry import get_kind

    kind = get_kind(kind_name)
    query = query_for(kind, Project.objects.get(pk=project_id))
    Path(started_file).write_text(str(time.time()))
    started = time.perf_counter()
    sources = stored.build(kind, query)
    return {"seconds": time.perf_counter() - started, "sources": sources, "peak_rss_mb": benchlib.peak_rss_mb()}


def build_stored(kind, project, cap: float) -> dict | None:
    """The stored-rows engine computing the kind's rows of the project ahead, from none, in a child process with the
    cap (None: not a stored kind)."""
    if getattr(kind, "stored", None) is None:
        return None
    from dataplatform.exports.models import StoredRow

    StoredRow.objects.filter(kind=kind.name, project=project).delete()
    measured = run_child("build", str(project.pk), kind.name, cap=cap)
    if measured["capped"]:
        measured["sources"] = StoredRow.objects.filter(kind=kind.name, project=project).values("source_id").distinct(
        ).count()
    measured["rows"] = StoredRow.objects.filter(kind=kind.name, project=project, row__isnull=False).count()
    return measured


def export_run(kind, project, cap: float) -> dict:
    from dataplatform.exports import services as export_services
    from dataplatform.exports.models import Export
    from dataplatform.jobs.models import JobState
    from dataplatform.jobs.services import fail_job

    options = {"kind": kind.name, "format": "parquet", "validation_ratio": VALIDATION_RATIO, "dedup": False}
    export = export_services.create_export(project=project, user=None, options=options)
    measured = run_child("engine", str(export.pk), cap=cap)
    export = Export.objects.select_related("job").get(pk=export.pk)
    if measured["capped"]:
        rows = export.job.progress_done
        fail_job(job_id=export.job_id, error=f"Stopped by the bench after {cap:.0f} s.")
        return {**measured, "rows": rows, "export": None}
    if export.job.state != JobState.SUCCEEDED:
        raise SystemExit(f"{kind.name}: export {export.pk} ended {export.job.state}: {export.job.error}")
    return {**measured, "rows": export.manifest["totals"]["rows"], "export": export}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES), help="rows of each kind, e.g. 10000,100000")
    parser.add_argument("--rows", type=int, help="one size only (a quick smoke run, e.g. 2000)")
    parser.add_argument("--cap-seconds", type=float, default=CAP_SECONDS, help="stop a kind's export after this")
    parser.add_argument("--kinds", default="", help="only kinds whose names start with one of these (comma-separated)")
    parser.add_argument("--sample", type=int, default=SAMPLE_ROWS, help="rows of each export checked")
    parser.add_argument("--rebuild", action="store_true", help="drop the bench database and build the data again")
    parser.add_argument("--build-only", action="store_true", help="build the data of every size, measure nothing")
    parser.add_argument("--requests", type=int, default=REQUESTS,
                        help="settling requests timed with the build-ahead hook and as many without (0: none)")
    args = parser.parse_args()
    load_average = os.getloadavg()[0]
    sizes = [args.rows] if args.rows else [int(size) for size in args.sizes.split(",")]
    _setup_django(rebuild=args.rebuild)

    import pyarrow as pa
    from django.conf import settings
    from django.db import connection
    from kinds_data import (
        WORKFLOWS,
        bench_user,
        copies_needed,
        ensure_seed,
        ensure_target,
        group_copies,
        migrate,
        rows_per_copy,
        shipped_kinds,
    )
    from kinds_data import workflow_of as workflow_for

    migrate()
    Path(settings.DATA_DIR).mkdir(parents=True, exist_ok=True)
    delete_previous_exports()
    user = bench_user()
    prefixes = tuple(prefix for prefix in args.kinds.split(",") if prefix)
    kinds = [kind for kind in shipped_kinds() if not prefixes or kind.name.startswith(prefixes)]
    workflows = {workflow_for(kind).name for kind in kinds}
    seeds = {}
    for name in sorted(workflows):
        started = time.perf_counter()
        seeds[name] = ensure_seed(WORKFLOWS[name], user)
        print(f"seed {seeds[name].slug} ready ({time.perf_counter() - started:.0f} s)")
    per_copy = {kind.name: rows_per_copy(kind, seeds[workflow_for(kind).name]) for kind in kinds}
    print("rows per copy of the seed: " + ", ".join(f"{name} {n}" for name, n in per_copy.items()))

    results = {}  # (kind, size) -> figures
    for size in sizes:
        projects = {}  # kind name -> project
        expected = {}  # kind name -> its rows there: copies x its rows per copy (the copies are the seed's rows)
        for name in sorted(workflows):
            workflow = WORKFLOWS[name]
            members = [kind for kind in kinds if workflow_for(kind) is workflow and per_copy[kind.name]]
            needed = {kind.name: copies_needed(size, per_copy[kind.name]) for kind in members}
            chosen = group_copies(list(needed.values()))
            for kind in members:
                projects[kind.name] = ensure_target(workflow, seeds[name], chosen[needed[kind.name]], user, say=print)
                expected[kind.name] = chosen[needed[kind.name]] * per_copy[kind.name]
        if args.build_only:
            continue
        baselines = {}
        for kind in kinds:
            if kind.name not in projects:
                results[(kind.name, size)] = {"missing": "the seed gives no rows"}
                continue
            project = projects[kind.name]
            key = (project.pk, workflow_for(kind).baseline_for(kind.name))
            if key not in baselines:
                baselines[key] = run_child("baseline", str(project.pk), kind.name)
            built = build_stored(kind, project, args.cap_seconds)
            run = export_run(kind, project, args.cap_seconds)
            verified = "capped: not verified" if run["capped"] else checked(kind, run["export"], args.sample)
            results[(kind.name, size)] = {**run, "baseline": baselines[key], "project": project.slug,
                                          "expected_rows": expected[kind.name], "built": built, "verified": verified}
            rate = run["rows"] / run["seconds"] if run["seconds"] else 0
            ratio, estimated = _ratio(results[(kind.name, size)])
            # Everything of the tables' row, as it comes: a run stopped before its tables still reports its kinds.
            print(f"  {kind.name} at {size:,}: {run['rows']:,} rows in {run['seconds']:.1f} s "
                  f"({rate:,.0f} rows/s{', capped' if run['capped'] else ''}), x baseline {ratio:.2f}{estimated} "
                  f"(baseline {baselines[key]['seconds']:.1f} s), peak RSS {run['peak_rss_mb']:.0f} MB, "
                  f"load {os.getloadavg()[0]:.1f}, verified {verified}"
                  + (_built(built) if built else ""), flush=True)

    if args.build_only:
        return
    latencies = {}
    for name in sorted(workflows):
        if args.requests and WORKFLOWS[name].settles is not None:
            latencies[name] = request_latencies(WORKFLOWS[name], seeds[name], user, args.requests)
    figures = {f"{name} {size}": {key: value for key, value in result.items() if key != "export"}
               for (name, size), result in results.items()}
    Path(settings.DATA_DIR, "kinds-results.json").write_text(json.dumps(
        {"figures": figures, "requests": latencies, "load_average": load_average}, indent=1, default=str))
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    print()
    print(f"machine: {platform.machine()}, os.cpu_count()={os.cpu_count()}, PostgreSQL {pg_version}, pyarrow "
          f"{pa.__version__}, Python {platform.python_version()}, EXPORT_BATCH_ROWS={settings.EXPORT_BATCH_ROWS}, "
          f"load average before the run {load_average:.2f}, cap {args.cap_seconds:.0f} s a kind")
    print_tables(kinds, sizes, results)
    if latencies:
        print()
        print_requests(latencies)


def _label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else f"{size:,}"


def request_latencies(workflow, seed, user, count: int) -> dict:
    """The settling request of the workflow, `count` times with the build-ahead hook (EXPORTS_BUILD_AHEAD) and
    `count` times without, alternating, each on a source of its own in a project of copies of the seed kept for it,
    by a person new to it (a source is settled once per person); milliseconds of each."""
    import uuid

    from django.conf import settings
    from kinds_data import ensure_target, project_for

    project = ensure_target(workflow, seed, REQUEST_COPIES, user, slug=f"kb-{workflow.name}-requests")
    person = type(user).objects.create(username=f"kinds-bench-{uuid.uuid4().hex[:8]}")
    project_for(project.slug, person)
    name, requests = workflow.settles
    timings = {True: [], False: []}
    original = settings.EXPORTS_BUILD_AHEAD
    try:
        for n, request in enumerate(requests(project, person, 2 * count + 2)):
            settings.EXPORTS_BUILD_AHEAD = hook = n % 2 == 0
            started = time.perf_counter()
            request()
            if n >= 2:  # the first of each warms up (imports, connection, caches)
                timings[hook].append(1000 * (time.perf_counter() - started))
    finally:
        settings.EXPORTS_BUILD_AHEAD = original
    return {"request": name, "on": timings[True], "off": timings[False]}


def print_requests(latencies: dict) -> None:
    rows = []
    for workflow, measured in latencies.items():
        off, on = measured["off"], measured["on"]
        if not off or not on:
            continue
        p95_off, p95_on = benchlib.percentile(off, 95), benchlib.percentile(on, 95)
        rows.append((f"{workflow}: {measured['request']}", f"{len(on)} / {len(off)}",
                     f"{benchlib.percentile(on, 50):.1f}", f"{p95_on:.1f}", f"{benchlib.percentile(off, 50):.1f}",
                     f"{p95_off:.1f}", f"{p95_on - p95_off:+.1f}",
                     f"≤ +{TARGET_REQUEST_MS} ms: " + ("met" if p95_on - p95_off <= TARGET_REQUEST_MS else "MISSED")))
    benchlib.print_table(("request (service call)", "n on / off", "p50 hook on", "p95 hook on", "p50 off", "p95 off",
                          "p95 on - off", "target"), rows)
    print("hook on: EXPORTS_BUILD_AHEAD, a settling service's build_soon sends the build to a worker after its commit "
          "(here to the filesystem broker, which no worker reads); off: the export derives what is missing. A "
          "service that calls no build_soon measures the same either way.")


def checked(kind, export, sample: int) -> str:
    """verify_export's verdict; a comparison that fails outright is a verdict too, not the end of the run."""
    from kinds_data import verify_export

    try:
        return verify_export(kind, export, sample)
    except Exception as exc:  # noqa: BLE001  (any failure of the check is reported in the table)
        return f"NO: the check failed: {type(exc).__name__}: {str(exc)[:200]}"


def _built(built: dict) -> str:
    """The cost of computing a stored kind's rows ahead: per row stored, and per source derived."""
    per_row = 1000 * built["seconds"] / max(1, built["rows"])
    return (f"; computed ahead: {built['rows']:,} rows of {built['sources']:,} sources in {built['seconds']:.1f} s, "
            f"{per_row:.2f} ms a row{' (capped)' if built['capped'] else ''}, build peak RSS {built['peak_rss_mb']:.0f} MB")


def _ratio(result: dict) -> tuple[float, str]:
    """x baseline: the kind's rows/s over those of reading its data. A capped export is compared by its rate so far
    against the baseline's over the rows the project gives (its copies x the kind's rows per copy): "(est.)"."""
    rate = result["rows"] / result["seconds"] if result["seconds"] else 0.0
    base_rate = result["expected_rows" if result["capped"] else "rows"] / result["baseline"]["seconds"]
    return (rate / base_rate if base_rate else 0.0), " (est.)" if result["capped"] else ""


def print_tables(kinds, sizes: list[int], results: dict) -> None:
    rows = []
    for kind in kinds:
        for size in sizes:
            result = results[(kind.name, size)]
            if "missing" in result:
                rows.append((kind.name, _label(size), "-", "-", "-", "-", "-", "-", "-", result["missing"]))
                continue
            rate = result["rows"] / result["seconds"] if result["seconds"] else 0.0
            base = result["baseline"]
            ratio, estimated = _ratio(result)
            built = result.get("built")
            rows.append((kind.name, _label(size), f"{result['rows']:,}" + (" (capped)" if result["capped"] else ""),
                         f"{result['seconds']:.1f}", f"{rate:,.0f}", f"{base['seconds']:.1f}",
                         f"{result['expected_rows' if result['capped'] else 'rows'] / base['seconds']:,.0f}",
                         f"{ratio:.2f}{estimated}", f"{result['peak_rss_mb']:.0f}",
                         result["verified"] + (_built(built) if built else "")))
    benchlib.print_table(("kind", "rows asked", "rows exported", "s", "rows/s", "baseline s", "baseline rows/s",
                          "x baseline", "peak RSS MB", "verified"), rows)
    print("baseline: the ADBC driver reads the kind's project's source tables (one query, a source a row with its "
          "children as JSON) and pyarrow writes one zstd Parquet file, in a child process; x baseline = its seconds / "
          "the export's. A capped export (stopped at the cap) gives the rate of the rows its job had read; its x "
          "baseline (est.) compares that rate with the baseline's over the rows the project gives (copies x the "
          "kind's rows per copy of the seed).")
    print()
    top, low = max(sizes), min(sizes)
    verdicts = []
    for kind in kinds:
        result = results[(kind.name, top)]
        if "missing" in result:
            verdicts.append((kind.name, "-", "-", "-", "-", result["missing"]))
            continue
        rate = result["rows"] / result["seconds"] if result["seconds"] else 0.0
        ratio, estimated = _ratio(result)
        small = results.get((kind.name, low), {})
        flat = result["peak_rss_mb"] / small["peak_rss_mb"] if small.get("peak_rss_mb") and top != low else None
        checks = [f"x baseline ≥ {TARGET_RATIO}: " + ("met" if ratio >= TARGET_RATIO else "MISSED")
                  + (f" (stretch ≥ {STRETCH_RATIO} met)" if ratio >= STRETCH_RATIO else ""),
                  f"RSS < {TARGET_RSS_MB}: " + ("met" if result["peak_rss_mb"] < TARGET_RSS_MB else "MISSED")]
        if flat is not None:
            checks.append(f"flat ≤ {TARGET_RSS_FLAT}: " + ("met" if flat <= TARGET_RSS_FLAT else "MISSED"))
        if kind.name in SLOW_KINDS:
            checks.append(f"≥ {TARGET_SLOW_RATE:,} rows/s: " + ("met" if rate >= TARGET_SLOW_RATE else "MISSED"))
        verdicts.append((kind.name, f"{rate:,.0f}" + (" (capped)" if result["capped"] else ""),
                         f"{ratio:.2f}{estimated}", f"{result['peak_rss_mb']:.0f}",
                         f"{flat:.2f}" if flat is not None else "-", "; ".join(checks)))
    benchlib.print_table((f"kind at {_label(top)}", "rows/s", "x baseline", "peak RSS MB",
                          f"RSS {_label(top)}/{_label(low)}", "targets"), verdicts)
    ratios = [_ratio(results[(kind.name, top)])[0] for kind in kinds if "missing" not in results[(kind.name, top)]]
    if ratios:
        print(f"median x baseline at {_label(top)}: {statistics.median(ratios):.2f} over {len(ratios)} kinds "
              f"(capped ones estimated); targets met: x baseline ≥ {TARGET_RATIO} by "
              f"{sum(r >= TARGET_RATIO for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _setup_child()
        what = sys.argv[2]
        if what == "engine":
            result = child_engine(int(sys.argv[3]), sys.argv[4])
        elif what == "build":
            result = child_build(int(sys.argv[3]), sys.argv[4], sys.argv[5])
        else:
            result = child_baseline(int(sys.argv[3]), sys.argv[4])
        print(json.dumps(result))
    else:
        main()
