"""Readers of real agent traces into the one conversation model, each with field-level problems.

| format        | what it reads                                                                  | module         |
|---------------|--------------------------------------------------------------------------------|----------------|
| `openai`      | OpenAI chat with tool calls: `{messages, tools?, id?, model?}`                 | `openai`       |
| `swe_agent`   | SWE-agent `.traj`: `history` and/or `trajectory` steps, `info`                 | `swe_agent`    |
| `openhands`   | OpenHands evaluation `output.jsonl`: `{instance_id, history of events, ...}`   | `openhands`    |
| `swe_labeler` | The SWE Labeler's trajectories: `{trajectory_id, messages or json_content}`   | `swe_labeler`  |
| `claude_code` | A Claude Code session log, whole: entries threaded by `parentUuid`              | `claude_code`  |
| `codex`       | A Codex CLI rollout, whole: `session_meta`, `response_item`s, events            | `codex`        |
| `mini_swe_agent` | mini-swe-agent `.traj.json`: `{info, messages, trajectory_format}`          | `mini_swe_agent` |
| `tau_bench`   | A tau-bench run: `{task_id, reward, info, traj, trial}`                         | `tau_bench`    |

`read_trace(record)` tells a record's format (`detect`) and reads it into a `TraceRecord`: the conversation,
the source's own fields of each message (`extras`), the run's ids, model, scaffold, environment and outcome,
and every other field of the record as `meta`; or it gives the problems, each (field path in the record as
the file spells it, message). Each module's docstring says how its format maps onto messages: where the
agent's thought goes, how an action becomes a tool call and an observation its result.

`trace_records(lines, file)` reads a trace file, told from its content: JSONL, one JSON document (an array of
records, a record, an object of records), or a session log read whole as one record (`documents`).

To add a format: a module with `FORMAT` and `read(record) -> (TraceRecord | None, problems)` that builds
OpenAI-shaped messages (`base.Built`) and reads them with `base.conversation_of`; then a rule in `detect`.
"""

from .base import TraceRecord
from .detect import FORMATS, detect, read_trace
from .documents import Read, document_name, trace_records

__all__ = ["FORMATS", "Read", "TraceRecord", "detect", "document_name", "read_trace", "trace_records"]
