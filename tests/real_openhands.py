"""The real OpenHands output files of tests/fixtures/real/openhands/ (verbatim prefixes of whole records, read
through the index, see tests/fixtures/real/SOURCES.md): the 2024 pairs and the resolver's flat events. The index
holds no small file of the 2025 events (its one example's records are 200 KB each), so none is here."""

import json
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "fixtures" / "real" / "openhands"
PAIRS_2024 = "gorilla_torch_output.jsonl"  # [action, observation] pairs; the task as `question_id`, no outcome
RESOLVER = "resolver_output.jsonl"  # the resolver's flat events: no args, no source; `issue`, `success`


def lines(name: str) -> list[bytes]:
    return (FOLDER / name).read_bytes().splitlines(keepends=True)


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in lines(name)]


def null_observations(name: str) -> int:
    """How many of the pairs' observations are OpenHands' "No observation", counted from the raw file."""
    return sum(observation["observation"] == "null" for record in records(name) for _, observation in record["history"])
