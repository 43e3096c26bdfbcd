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
- targets (issue 46), printed: at the largest size every page p50 <= 300 ms and <= 2x its own figure at the
  smallest (flat), no request over 30 queries.

Everything lives in a dedicated database (`dataplatform_pages_bench`, or PAGES_BENCH_DB) and DATA_DIR
`var/bench/pages/`; the data are kept between runs (`--rebuild` builds them again). A page that took longer than
`--cap-seconds` at one size is not asked again at the larger ones. Run from the project root, with PostgreSQL on
127.0.0.1:5432 (user postgres, no password):

    .venv/bin/python bench/pages_bench.py [--sizes 10000,100000,1000000] [--workflows swe,aed] [--repeat 5]
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
TARGET_MS, TARGET_FLAT, TARGET_QUERIES = 300, 2.0, 30


def setup_django(rebuild: bool) -> None:
    benchlib.open_own_database(SERVER_URL, BENCH_DB, rebuild=rebuild)
    from django.core.management import call_command
    call_command("migrate", verbosity=0)


def projects_of_size(workflows: list[str], size: int, say) -> dict:
    """workflow -> its project of about `size` items (copies of its seed, replicated the first time)."""
    from django.apps import apps
    from kinds_data import WORKFLOWS, bench_user, ensure_seed, ensure_target

    user = bench_user()
    projects = {}
    for name in workflows:
        workflow = WORKFLOWS[name]
        seed = ensure_seed(workflow, user)
        items_model = apps.get_model(ITEM_TABLES[name])
        per_copy = max(1, items_model.objects.filter(project=seed).count())
        copies = max(1, -(-size // per_copy))
        projects[name] = ensure_target(workflow, seed, copies, user, slug=f"pb-{name}-{size}", say=say)
    return projects


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
    """(status, queries) of the page answered in this process through Django's test client."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from kinds_data import bench_user
    from pages_list import local_client

    client = local_client(bench_user())
    with CaptureQueriesContext(connection) as captured:
        response = client.post(url) if page.method == "POST" else client.get(url)
    return response.status_code, len(captured.captured_queries)


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
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    workflows = [name for name in args.workflows.split(",") if name]
    wanted = [word.lower() for word in args.pages.split(",") if word]

    setup_django(args.rebuild)
    import httpx
    from kinds_data import bench_user
    from pages_list import PAGES

    from dataplatform.accounts.services import issue_token

    pages = [page for page in PAGES if page.workflow in workflows
             and (not wanted or any(word in page.name.lower() for word in wanted))]
    user = bench_user()
    _token, secret = issue_token(user=user, name=f"pages-bench-{time.time():.0f}")
    from pages_list import local_client
    session_cookie = local_client(user).cookies["sessionid"].value

    env = {**os.environ, "WEB_STATEMENT_TIMEOUT_SECONDS": str(args.statement_timeout)}
    log_dir = Path(os.environ["DATA_DIR"])
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"pages bench: sizes {sizes}, workflows {workflows}, {len(pages)} pages, {os.cpu_count()} cores")
    results: dict[str, dict[int, dict]] = {page.name: {} for page in pages}
    too_slow: set[str] = set()
    for size in sizes:
        projects = projects_of_size(workflows, size, say=lambda line: print(line, flush=True))
        server = benchlib.Server("asgi", log_dir, env=env)
        failed = True
        try:
            server.wait_ready(secret)
            with httpx.Client(base_url=server.base_url, cookies={"sessionid": session_cookie}) as pages_http, \
                    httpx.Client(base_url=server.base_url, headers={"Authorization": f"Token {secret}"}) as api_http:
                for page in pages:
                    if page.name in too_slow:
                        continue
                    project = projects[page.workflow]
                    url = page.url(project)
                    status, queries = queries_of(page, url)
                    timed = time_page(api_http if page.api else pages_http, page, url, args.repeat, args.cap_seconds)
                    keyset = keyset_ms(page.keyset_sql(), project.pk, args.repeat)
                    results[page.name][size] = {**timed, "queries": queries, "keyset_ms": keyset,
                                                "test_status": status}
                    if timed["max_ms"] > args.cap_seconds * 1000 / 2:
                        too_slow.add(page.name)
                    print(f"  {size:>9,} {page.name}: {timed['p50_ms']:.0f} ms ({timed['status']}), "
                          f"{queries} queries, keyset {keyset:.2f} ms", flush=True)
            failed = False
        finally:
            benchlib.stop_servers({"web": server}, failed)
    print_report(pages, sizes, results)


def print_report(pages, sizes: list[int], results: dict) -> None:
    header = ("page", *(f"p50 ms @{size:,}" for size in sizes), "queries", "x keyset (largest)",
              f"flat ({sizes[-1]:,} / {sizes[0]:,})", "targets")
    rows = []
    for page in pages:
        measured = results[page.name]
        cells = []
        for size in sizes:
            figure = measured.get(size)
            cells.append("-" if figure is None else f"{figure['p50_ms']:.0f}"
                         + ("" if figure["status"] < 400 else f" ({figure['status']})"))
        largest = measured.get(sizes[-1])
        smallest = measured.get(sizes[0])
        queries = max((figure["queries"] for figure in measured.values()), default=0)
        ratio = f"{largest['p50_ms'] / largest['keyset_ms']:.0f}x" if largest else "-"
        flat = largest["p50_ms"] / smallest["p50_ms"] if largest and smallest else None
        met = (largest is not None and largest["p50_ms"] <= TARGET_MS and queries <= TARGET_QUERIES
               and (flat is None or flat <= TARGET_FLAT))
        rows.append((page.name, *cells, str(queries), ratio, "-" if flat is None else f"{flat:.2f}",
                     "met" if met else "MISSED"))
    benchlib.print_table(header, rows)
    print(f"targets: p50 <= {TARGET_MS} ms at {sizes[-1]:,} items, <= {TARGET_FLAT}x the {sizes[0]:,} figure, "
          f"<= {TARGET_QUERIES} queries a request")


if __name__ == "__main__":
    main()
