"""A project of a million items opens as fast as one of ten thousand (issue 46): every page and list API a user
opens, timed on the production web server at growing project sizes, beside a keyset SQL read of one page of the
same rows in the same run.

It prints tables of figures; it is not a test and fails on nothing (it exits non-zero only when a run itself fails).

- the data: per workflow (onPanda, SWE labeler, AED, ATD, and the jobs and exports of the platform) a seed project
  filled through the platform's own code with the embedded model (bench/kinds_seeds.py, as bench/kinds_bench.py
  fills it), grown by SQL replication of its real rows (bench/kinds_data.py) to each size, in items of the
  workflow (onPanda items, SWE tasks, AED traces, ATD prompts, jobs), ANALYZEd;
- the server: `python -m dataplatform.webserver` (uvicorn, DEBUG off, PostgreSQL, one process), as production runs
  it, with the web's statement timeout off (`--statement-timeout` sets it) so a slow page is measured, not cut;
- each page (bench/pages_list.py): one warm-up request, then `--repeat` timed ones, p50 and max, as the bench user
  (the project's admin; a signed-in session for pages, an API token for APIs); its queries, counted in this
  process through Django's test client on the same database; and the keyset read of one page of the workflow's
  rows (`ORDER BY id DESC LIMIT 25` on an index), p50 in this process: "x keyset" is the page's p50 over it;
- targets (issue 46), printed as pass/FAIL columns and a summary line of the pages that miss: at the largest size
  every page p50 <= 300 ms (claims <= 20 ms) and <= 2x its own figure at the smallest (flat), no request over 30
  queries, every answer below 400. A page that fails (an error, a timeout, the server gone) is reported, not fatal.

Everything lives in a dedicated database (`dataplatform_pages_bench`, or PAGES_BENCH_DB) and DATA_DIR
`var/bench/pages/`; the data are kept between runs (`--rebuild` builds them again). A page that took longer than
`--cap-seconds` at one size is not asked again at the larger ones. Run from the project root, with PostgreSQL on
127.0.0.1:5432 (user postgres, no password):

    .venv/bin/python bench/pages_bench.py [--sizes 10000,100000,1000000] [--workflows swe,aed] [--repeat 5]
    .venv/bin/python bench/pages_bench.py --sizes 1000000 --build-only   # the data only (long: see bench/README.md)
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import benchlib  # noqa: E402  (bench/ is sys.path[0] when run as a script)

SERVER_URL = "postgres://postgres@127.0.0.1:5432"
BENCH_DB = os.environ.get("PAGES_BENCH_DB", "dataplatform_pages_bench")
benchlib.use_own_database(SERVER_URL, BENCH_DB, ROOT / "var" / "bench" / "pages")

SIZES = (10_000, 100_000, 1_000_000)
ITEM_TABLES = {"onpanda": "annotate.Item", "swe": "labeler.SweTask", "aed": "corpora.Trace",
               "atd": "corpora.AtdPrompt", "jobs": "jobs.Job"}


def setup_django(rebuild: bool) -> None:
    benchlib.open_own_database(SERVER_URL, BENCH_DB, rebuild=rebuild)
    from kinds_data import migrate
    migrate()


def projects_of_size(workflows: list[str], size: int, say) -> dict:
    """workflow -> its project of about `size` items (copies of its seed, replicated the first time)."""
    from django.apps import apps
    from kinds_data import WORKFLOWS, bench_user, ensure_seed, ensure_target

    user = bench_user()
    projects = {}
    for name in workflows:
        workflow = WORKFLOWS[name]
        started = time.perf_counter()
        seed = ensure_seed(workflow, user)
        items_model = apps.get_model(ITEM_TABLES[name])
        per_copy = max(1, items_model.objects.filter(project=seed).count())
        copies = max(1, -(-size // per_copy))
        projects[name] = ensure_target(workflow, seed, copies, user, slug=f"pb-{name}-{size}", say=say)
        say(f"  {name} at {size:,}: ready in {time.perf_counter() - started:.0f} s (built now, or kept from a run before)")
    return projects


def database_size() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        return cursor.fetchone()[0]


def keyset_ms(sql: str, project_id: int, repeat: int) -> float:
    from django.db import connection

    times = []
    with connection.cursor() as cursor:
        for _ in range(repeat + 1):
            started = time.perf_counter()
            cursor.execute(sql, {"project": project_id})
            cursor.fetchall()
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:]) * 1000


def queries_of(page, url: str) -> tuple[int, int]:
    """(status, queries) of the page answered in this process through Django's test client, after one request
    that warms it up (a kept figure's first read counts it: the queries of every later request are counted)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from kinds_data import bench_user
    from pages_list import local_client

    client = local_client(bench_user())
    client.post(url) if page.method == "POST" else client.get(url)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(url) if page.method == "POST" else client.get(url)
    return response.status_code, len(captured.captured_queries)


def first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else "")[:160]


def measure(page, project, http, repeat: int, cap: float) -> dict:
    """The page's figures at one size, or {"error": what went wrong}: a page that fails (its URL cannot be made,
    the request times out, the server is gone, the page answers 500) is reported, and the bench goes on."""
    try:
        url = page.url(project)
        status, queries = queries_of(page, url)
        timed = time_page(http, page, url, repeat, cap)
        keyset = keyset_ms(page.keyset_sql(), project.pk, repeat)
    except Exception as exc:  # noqa: BLE001 (any failure of one page is that page's result)
        from django.db import connection
        connection.close()  # a failed query may have left the connection in an aborted transaction
        return {"error": f"{type(exc).__name__}: {first_line(exc)}"}
    return {**timed, "queries": queries, "keyset_ms": keyset, "test_status": status}


def time_page(http, page, url: str, repeat: int, cap: float) -> dict:
    times, status = [], None
    for attempt in range(repeat + 1):
        started = time.perf_counter()
        response = http.request(page.method, url, timeout=cap)
        elapsed = time.perf_counter() - started
        status = response.status_code
        if attempt:  # the first one warms up
            times.append(elapsed)
        if elapsed > cap / (repeat + 1):  # too slow to ask again this size: one timed answer is enough
            times.append(elapsed)
            break
    return {"status": status, "p50_ms": statistics.median(times) * 1000, "max_ms": max(times) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES), help="items per workflow")
    parser.add_argument("--workflows", default=",".join(ITEM_TABLES), help="comma-separated: " + ",".join(ITEM_TABLES))
    parser.add_argument("--pages", default="", help="only pages whose names contain one of these (comma-separated)")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests a page (after one warm-up)")
    parser.add_argument("--cap-seconds", type=float, default=120.0, help="a page slower than this is not asked again")
    parser.add_argument("--statement-timeout", type=float, default=0.0, help="the web's statement timeout (0: off)")
    parser.add_argument("--rebuild", action="store_true", help="drop the bench database and build the data again")
    parser.add_argument("--build-only", action="store_true", help="build (or find) the data of each size, time no page")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    workflows = [name for name in args.workflows.split(",") if name]
    wanted = [word.lower() for word in args.pages.split(",") if word]

    setup_django(args.rebuild)
    import httpx
    from kinds_data import bench_user
    from pages_list import PAGES, local_client

    from dataplatform.accounts.services import issue_token

    pages = [page for page in PAGES if page.workflow in workflows
             and (not wanted or any(word in page.name.lower() for word in wanted))]
    user = bench_user()
    _token, secret = issue_token(user=user, name=f"pages-bench-{time.time():.0f}")
    session_cookie = local_client(user).cookies["sessionid"].value

    env = {**os.environ, "WEB_STATEMENT_TIMEOUT_SECONDS": str(args.statement_timeout)}
    log_dir = Path(os.environ["DATA_DIR"])
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"pages bench: sizes {sizes}, workflows {workflows}, {len(pages)} pages, {os.cpu_count()} cores, "
          f"load average {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    results: dict[str, dict[int, dict]] = {page.name: {} for page in pages}
    too_slow: set[str] = set()
    for size in sizes:
        started = time.perf_counter()
        projects = projects_of_size(workflows, size, say=lambda line: print(line, flush=True))
        print(f"data at {size:,} items per workflow: ready in {time.perf_counter() - started:.0f} s; "
              f"database {BENCH_DB} {database_size()}", flush=True)
        if args.build_only:
            continue
        try:
            server = benchlib.Server("asgi", log_dir, env=env)
        except Exception as exc:  # noqa: BLE001 (reported with the pages, the bench goes on)
            for page in pages:
                results[page.name][size] = {"error": f"the server did not start: {first_line(exc)}"}
            continue
        try:
            server.wait_ready(secret, timeout=args.cap_seconds * 2.5)  # a loaded machine starts it slowly
            with httpx.Client(base_url=server.base_url, cookies={"sessionid": session_cookie}) as pages_http, \
                    httpx.Client(base_url=server.base_url, headers={"Authorization": f"Token {secret}"}) as api_http:
                for page in pages:
                    if page.name in too_slow:
                        continue
                    measured = measure(page, projects[page.workflow], api_http if page.api else pages_http,
                                       args.repeat, args.cap_seconds)
                    results[page.name][size] = measured
                    if "error" in measured:
                        print(f"  {size:>9,} {page.name}: FAILED {measured['error']}", flush=True)
                        continue
                    if measured["max_ms"] > args.cap_seconds * 1000 / 2:
                        too_slow.add(page.name)
                    print(f"  {size:>9,} {page.name}: {measured['p50_ms']:.0f} ms ({measured['status']}), "
                          f"{measured['queries']} queries, keyset {measured['keyset_ms']:.2f} ms", flush=True)
        except Exception as exc:  # noqa: BLE001 (the server died or never answered: this size's pages failed)
            for page in pages:
                results[page.name].setdefault(size, {"error": f"{type(exc).__name__}: {first_line(exc)}"})
            print(f"  {size:>9,}: the server failed: {exc}", flush=True)
        finally:
            benchlib.stop_servers({"web": server}, False)
    if not args.build_only:
        from pages_report import print_report
        print_report(pages, sizes, results)


if __name__ == "__main__":
    main()
