"""The report of bench/pages_bench.py: each page's p50 at each size, its queries, its ratio to the keyset read, how
it grows, and issue 46's targets as pass/FAIL columns, then a summary line of what misses.

`results` is {page name: {size: figures}}, figures being {"p50_ms", "max_ms", "status", "queries", "keyset_ms"} or
{"error": what failed}: a page that failed is reported, never a crash of the report.
"""

import benchlib
from pages_list import TARGET_FLAT, TARGET_QUERIES


def targets_of(page, sizes: list[int], measured: dict) -> dict[str, str]:
    """Each target's verdict for the page: "pass", "FAIL", or "-" (not measured), at the largest size measured."""
    largest, smallest = measured.get(sizes[-1], {}), measured.get(sizes[0], {})
    answered = [figure for figure in measured.values() if "error" not in figure]

    def verdict(ok: bool | None) -> str:
        return "-" if ok is None else "pass" if ok else "FAIL"

    timed = "p50_ms" in largest
    flat = timed and "p50_ms" in smallest and len(sizes) > 1
    return {
        "answers": verdict(not any("error" in figure or figure["status"] >= 400 for figure in measured.values())
                           if measured else None),
        "p50": verdict(largest["p50_ms"] <= page.target_ms if timed else None),
        "flat": verdict(largest["p50_ms"] <= TARGET_FLAT * smallest["p50_ms"] if flat else None),
        "queries": verdict(max(figure["queries"] for figure in answered) <= TARGET_QUERIES if answered else None),
    }


def print_report(pages, sizes: list[int], results: dict) -> None:
    """The table of every page at every size with its targets, and the summary line of the pages that miss."""
    header = ("page", *(f"p50 ms @{size:,}" for size in sizes), "queries", "x keyset (largest)",
              f"flat ({sizes[-1]:,} / {sizes[0]:,})", "answers", "p50 <= target", f"<= {TARGET_FLAT:g}x",
              f"<= {TARGET_QUERIES} queries")
    rows, missed = [], []
    for page in pages:
        measured = results[page.name]
        cells = []
        for size in sizes:
            figure = measured.get(size)
            cells.append("-" if figure is None else "error" if "error" in figure else f"{figure['p50_ms']:.0f}"
                         + ("" if figure["status"] < 400 else f" ({figure['status']})"))
        answered = [figure for figure in measured.values() if "error" not in figure]
        largest, smallest = measured.get(sizes[-1], {}), measured.get(sizes[0], {})
        queries = max((figure["queries"] for figure in answered), default=None)
        ratio = f"{largest['p50_ms'] / largest['keyset_ms']:.0f}x" if "p50_ms" in largest else "-"
        flat = (largest["p50_ms"] / smallest["p50_ms"] if "p50_ms" in largest and "p50_ms" in smallest
                and len(sizes) > 1 else None)
        verdicts = targets_of(page, sizes, measured)
        rows.append((page.name, *cells, "-" if queries is None else str(queries), ratio,
                     "-" if flat is None else f"{flat:.2f}", *verdicts.values()))
        failed = [what for what, verdict in verdicts.items() if verdict == "FAIL"]
        if failed or not measured.get(sizes[-1]):
            why = {"answers": "; ".join(sorted({figure.get("error") or f"HTTP {figure['status']}"
                                                for figure in measured.values()
                                                if "error" in figure or figure["status"] >= 400})),
                   "p50": f"p50 {largest.get('p50_ms', 0):.0f} ms > {page.target_ms}",
                   "flat": f"{flat or 0:.1f}x its {sizes[0]:,} figure",
                   "queries": f"{queries} queries"}
            missed.append(f"{page.name} ({', '.join(why[what] for what in failed) or 'not measured at the largest size'})")
    benchlib.print_table(header, rows)
    print(f"targets at {sizes[-1]:,} items: p50 <= 300 ms (claims <= 20 ms), <= {TARGET_FLAT:g}x the {sizes[0]:,} "
          f"figure, <= {TARGET_QUERIES} queries a request, every answer below 400")
    print(f"summary: {len(pages) - len(missed)} of {len(pages)} pages meet every target"
          + (f"; missed: {'; '.join(missed)}" if missed else ""))
