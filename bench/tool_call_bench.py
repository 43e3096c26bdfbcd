"""Benchmark of a tool call through the platform (dataplatform.tools.call_tool) against the bare `mcp` SDK
doing the same in the same run: what the platform's allow-list, argument check, deadline watch and error
translation cost on top of the call itself.

Both sides start the registry's `mcp-server-time` over stdio for every call (as the platform does: a
call owns its server process), initialize, call `get_current_time` with {"timezone": "Asia/Tokyo"} and
stop the server. They alternate call by call, so machine noise hits them alike. The figures are p50 and
p95 over CALLS calls each, and the platform's extra time (p50 and p95 of the paired differences). A tool
call's latency is reported apart from the model's: in onPanda it is `latency_ms` in each tool result,
and a continuation's time to first token never includes it.

Run from the project root (about 30 s on 2 cores; needs requirements/dev.txt for the time server):

    .venv/bin/python bench/tool_call_bench.py
"""

import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dataplatform.settings")

CALLS = 20
SERVER = str(Path(sys.executable).parent / "mcp-server-time")
ARGUMENTS = {"timezone": "Asia/Tokyo"}


def bare_call() -> float:
    """The SDK alone: start, initialize, call, stop; milliseconds."""
    import anyio
    from mcp import Client, StdioServerParameters

    async def call():
        async with Client(StdioServerParameters(command=SERVER, args=["--local-timezone", "UTC"])) as client:
            result = await client.call_tool("get_current_time", ARGUMENTS)
            assert not result.is_error

    started = time.perf_counter()
    anyio.run(call)
    return (time.perf_counter() - started) * 1000


def platform_call() -> float:
    from dataplatform.tools import call_tool

    started = time.perf_counter()
    result = call_tool("time", "get_current_time", ARGUMENTS)
    assert not result.is_error and "Asia/Tokyo" in result.text
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    import django
    from django.conf import settings

    django.setup()
    settings.MCP_SERVERS = {"time": {"command": SERVER, "args": ["--local-timezone", "UTC"]}}
    from dataplatform.tools import list_tools

    list_tools(["time"])  # the listing is cached for 60 s, as in use: a call does not list again
    bare_call(), platform_call()  # warm the imports and the file cache
    bare, ours = [], []
    for index in range(CALLS):
        pair = (bare_call, platform_call) if index % 2 else (platform_call, bare_call)
        timings = {function.__name__: function() for function in pair}
        bare.append(timings["bare_call"])
        ours.append(timings["platform_call"])
    differences = [mine - theirs for mine, theirs in zip(ours, bare, strict=True)]
    print(f"tool call bench: {CALLS} calls each, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores")
    print(f"{'':34} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'bare mcp SDK (baseline)':34} {statistics.median(bare):8.1f} {percentile(bare, 0.95):8.1f}")
    print(f"{'dataplatform.tools.call_tool':34} {statistics.median(ours):8.1f} {percentile(ours, 0.95):8.1f}")
    print(f"{'platform - bare (paired)':34} {statistics.median(differences):8.1f} "
          f"{percentile(differences, 0.95):8.1f}")
    print(f"ratio of medians: {statistics.median(ours) / statistics.median(bare):.2f}x")


if __name__ == "__main__":
    main()
