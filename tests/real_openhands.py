"""The real OpenHands output files of tests/fixtures/real/openhands/ (whole records, read through the index, see
tests/fixtures/real/SOURCES.md): one of each generation its tools wrote: the 2025 events with tool-call metadata,
the 2024 pairs, the resolver's flat events."""

import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "fixtures" / "real" / "openhands"
EVENTS_2025 = "multi_swe_bench_ponyc-4593.jsonl"  # evaluation output, events with tool-call metadata; an error
PAIRS_2024 = "gorilla_torch_output.jsonl"  # [action, observation] pairs; the task as `question_id`, no outcome
RESOLVER = "resolver_output.jsonl"  # the resolver's flat events: no args, no source; `issue`, `success`


def lines(name: str) -> list[bytes]:
    return (FOLDER / name).read_bytes().splitlines(keepends=True)


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in lines(name)]


def null_observations(name: str) -> int:
    """How many of the pairs' observations are OpenHands' "No observation", counted from the raw file."""
    return sum(observation["observation"] == "null" for record in records(name) for _, observation in record["history"])
