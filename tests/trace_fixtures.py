"""The agent-trace fixtures of tests/fixtures/traces/: small files of our own, in the shapes the real tools write
(SWE-agent .traj and its JSONL, OpenHands output.jsonl, OpenAI chat with tool calls, the SWE Labeler's own)."""

import json
from pathlib import Path

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
SWE_AGENT_TRAJ = "textkit__textkit-42.traj"  # a .traj document, function calling
SWE_AGENT = "swe_agent.jsonl"  # text actions; steps only; a bad record
OPENHANDS = "openhands_output.jsonl"  # function calling with a parallel call; the older pairs; a bad record
OPENAI = "openai_tool_calls.jsonl"  # tool calls and reasoning; a plain chat; a bad record
SWE_LABELER = "swe_labeler_trajectories.jsonl"  # upstream's example shape; json_content blocks; a bad record


def body(name: str) -> bytes:
    return (TRACES / name).read_bytes()


def records(name: str) -> list[dict]:
    """The records of a fixture: each line of a JSONL file, or the one document of a .traj."""
    text = body(name).decode()
    return [json.loads(text)] if name.endswith(".traj") else [json.loads(line) for line in text.splitlines()]
