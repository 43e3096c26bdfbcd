"""Readers of real agent traces into the one conversation model, each with field-level problems.

| format        | what it reads                                                                  | module         |
|---------------|--------------------------------------------------------------------------------|----------------|
| `openai`      | OpenAI chat with tool calls: `{messages, tools?, id?, model?}`                 | `openai`       |
| `swe_agent`   | SWE-agent `.traj`: `history` and/or `trajectory` steps, `info`                 | `swe_agent`    |
| `openhands`   | OpenHands evaluation `output.jsonl`: `{instance_id, history of events, ...}`   | `openhands`    |
| `swe_labeler` | The SWE Labeler's trajectories: `{trajectory_id, messages or json_content}`   | `swe_labeler`  |

`read_trace(record)` tells a record's format (`detect`) and reads it into a `TraceRecord`: the conversation,
the source's own fields of each message (`extras`), the run's ids, model, scaffold, environment and outcome,
and every other field of the record as `meta`; or it gives the problems, each (field path in the record as
the file spells it, message). Each module's docstring says how its format maps onto messages: where the
agent's thought goes, how an action becomes a tool call and an observation its result.

`json_texts(lines, file)` reads a trace file: JSONL, or a whole `.traj` document.

To add a format: a module with `FORMAT` and `read(record) -> (TraceRecord | None, problems)` that builds
OpenAI-shaped messages (`base.Built`) and reads them with `base.conversation_of`; then a rule in `detect`.
"""

from .base import TraceRecord
from .detect import FORMATS, detect, read_trace
from .documents import document_name, json_texts

__all__ = ["FORMATS", "TraceRecord", "detect", "document_name", "json_texts", "read_trace"]
