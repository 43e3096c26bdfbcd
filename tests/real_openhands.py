"""The real OpenHands output files of tests/fixtures/real/openhands/ (verbatim, see tests/fixtures/real/SOURCES.md):
one of each generation its tools wrote."""

import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "fixtures" / "real" / "openhands"
EVENTS_2025 = "multi_swe_bench_output.jsonl"  # evaluation output, events with tool-call metadata; 2 error observations
PAIRS_2024 = "logic_reasoning_output.jsonl"  # evaluation output, [action, observation] pairs; `id`, test_result.result
RESOLVER = "resolver_output.jsonl"  # the resolver's flat events: no args, no source; `issue`, `success`


def lines(name: str) -> list[bytes]:
    return (FOLDER / name).read_bytes().splitlines(keepends=True)


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in lines(name)]
