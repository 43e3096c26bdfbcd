"""The corpus of tests/fixtures/real/: files the agent tools wrote (tests/fixtures/real/SOURCES.md), and what each
holds, read here straight from the file's JSON with none of the platform's readers, so that a test compares a
reader's (or a workflow's) messages with the source's, message by message.

A message is compared as `view`: (role, content, reasoning, ((call id, tool name, arguments as an object)...),
tool_call_id).
"""

import json
from pathlib import Path

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
CLAUDE_CODE = "claude_code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"  # 2.1.39: thinking, parallel calls, results
CODEX = "codex/session-01.jsonl"  # codex_exec 0.135.0: developer, environment, prompt, answer
MINI_SWE_AGENT = "mini_swe_agent/local.traj.json"  # the messages array mini-swe-agent's tests save
MINI_SWE_AGENT_2 = "mini_swe_agent/list-files.traj.json"  # 2.4.6 saved it: tool calls, a failed command, `exit`
MINI_SWE_AGENT_1 = "mini_swe_agent/list-files-1.x.traj.json"  # 1.17.5 saved it: text actions, instance_id
TAU_BENCH = "tau_bench/gpt-4o-airline.json"  # an array of runs; a tool error the agent saw
TAU_BENCH_FAILED = "tau_bench/tool-calling-deepseek-v3-0.0_range_0-1_user-gpt-4o-human_0612073827.json"  # empty traj
SWE_LABELER = ("swe_labeler/raw_trajectory.jsonl", "swe_labeler/l1_labeled_trajectory.jsonl")
SWE_AGENT_1 = "swe_agent/6e44b9__sweagenttestrepo-1c2844.traj"  # 1.0 function calling; `submit` only in trajectory
SWE_AGENT_0 = "swe_agent/pydicom__pydicom-1458.traj"  # 0.x text actions, a demonstration, three refused edits read
OPENHANDS_2025 = "openhands/multi_swe_bench_ponyc-4593.jsonl"  # events with tool-call metadata; an error observation
# Every file that imports, its format, and the task it names (the labeler's trajectories need one).
IMPORTS = {CLAUDE_CODE: ("claude_code", ""), CODEX: ("codex", ""), MINI_SWE_AGENT: ("openai", "local"),
           MINI_SWE_AGENT_2: ("mini_swe_agent", "list-files"), MINI_SWE_AGENT_1: ("mini_swe_agent", "list-files"),
           TAU_BENCH: ("tau_bench", "0"), SWE_LABELER[0]: ("swe_labeler", "synthetic-trajectory-1"),
           SWE_LABELER[1]: ("swe_labeler", "synthetic-trajectory-2"),
           SWE_AGENT_1: ("swe_agent", "6e44b9__sweagenttestrepo-1c2844"),  # a .traj is named after its instance
           SWE_AGENT_0: ("swe_agent", "pydicom__pydicom-1458"),
           OPENHANDS_2025: ("openhands", "ponylang__ponyc-4593")}
THINKING = "Let me start by checking the issue details and finding available subtasks."  # the Claude Code file's


def body(name: str) -> bytes:
    return (REAL / name).read_bytes()


def lines(name: str) -> list[dict]:
    return [json.loads(line) for line in body(name).decode().splitlines() if line.strip()]


def view(messages: list[dict]) -> list[tuple]:
    """Messages in the stored (or OpenAI) shape, as the tests compare them."""
    def calls(message):
        return tuple((call.get("id"), call["function"]["name"], _object(call["function"]["arguments"]))
                     for call in message.get("tool_calls") or ())
    return [(m["role"], m.get("content") or "", m.get("reasoning") or m.get("reasoning_content") or "", calls(m),
             m.get("tool_call_id") or "") for m in messages]


def _object(arguments):
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def expected(name: str) -> list[tuple]:
    """The source's messages, in `view`'s terms."""
    readers = {CLAUDE_CODE: _claude_code, CODEX: _codex, MINI_SWE_AGENT: _mini_swe_agent, TAU_BENCH: _tau_bench,
               MINI_SWE_AGENT_2: _saved_mini_swe_agent, MINI_SWE_AGENT_1: _saved_mini_swe_agent,
               SWE_AGENT_1: _swe_agent, SWE_AGENT_0: _swe_agent, OPENHANDS_2025: _openhands_events}
    return readers.get(name, _swe_labeler)(name)


def _claude_code(name: str) -> list[tuple]:
    """Each response's blocks (one `message.id`) make one turn; each tool_result block a result; a text prompt a turn."""
    turns, by_id = [], {}
    for entry in lines(name):
        if entry.get("type") == "assistant":
            message = entry["message"]
            turn = by_id.setdefault(message["id"], {"role": "assistant", "content": "", "reasoning": "",
                                                    "tool_calls": []})
            if turn not in turns:
                turns.append(turn)
            for block in message["content"]:
                turn["content"] += block.get("text", "")
                turn["reasoning"] += block.get("thinking", "")
                if block["type"] == "tool_use":
                    turn["tool_calls"].append({"id": block["id"], "function": {"name": block["name"],
                                                                               "arguments": block["input"]}})
        elif entry.get("type") == "user":
            content = entry["message"]["content"]
            if isinstance(content, str):
                turns.append({"role": "user", "content": content})
                continue
            turns += [{"role": "tool", "content": block["content"], "tool_call_id": block["tool_use_id"]}
                      for block in content if block["type"] == "tool_result"]
    return view(turns)


def _codex(name: str) -> list[tuple]:
    roles = {"developer": "system"}
    return view([{"role": roles.get(item["payload"]["role"], item["payload"]["role"]),
                  "content": "".join(part["text"] for part in item["payload"]["content"])}
                 for item in lines(name) if item["type"] == "response_item" and item["payload"]["type"] == "message"])


def _mini_swe_agent(name: str) -> list[tuple]:
    return view(json.loads(body(name)))


def _saved_mini_swe_agent(name: str) -> list[tuple]:
    """A saved trajectory's messages but 2.x's closing `exit` (the model never saw it)."""
    return view([message for message in json.loads(body(name))["messages"] if message["role"] != "exit"])


def _tau_bench(name: str) -> list[tuple]:
    [run] = json.loads(body(name))
    return view(run["traj"])


def _swe_agent(name: str) -> list[tuple]:
    """A .traj's history: a turn's calls as written (a tool item answers its one `tool_call_ids`), or, for a text
    action (0.x), the thought and the action as a `bash` call answered by the next observation; then the
    trajectory's steps the history holds no assistant turn for, read the same way. A call without an id has the
    platform's, `call_<message>_<call>`."""
    def bash(thought, action, observation=None):
        call = {"id": f"call_{len(messages)}_0", "function": {"name": "bash", "arguments": {"command": action}}}
        return [{"role": "assistant", "content": thought, "tool_calls": [call]}] + (
            [] if observation is None else [{"role": "tool", "content": observation, "tool_call_id": call["id"]}])

    record, messages, pending = json.loads(body(name)), [], None
    for item in record["history"]:
        if item["role"] == "assistant" and item.get("action") and not item.get("tool_calls"):
            messages += bash(item["thought"], item["action"])
            pending = messages[-1]["tool_calls"][0]["id"]
            continue
        message = {"role": item["role"], "content": item["content"], "tool_calls": item.get("tool_calls")}
        if item["role"] == "tool":
            message["tool_call_id"] = item["tool_call_ids"][0]
        elif pending and item["role"] == "user":  # the output of the bash call before it
            message |= {"role": "tool", "tool_call_id": pending}
        messages.append(message)
        pending = None
    taken = sum(item["role"] == "assistant" for item in record["history"])
    for step in record["trajectory"][taken:]:
        messages += bash(step["thought"], step["action"], step["observation"])
    return view(messages)


def _openhands_events(name: str) -> list[tuple]:
    """An OpenHands evaluation record of 2025: the system and message actions; each model response once (its
    message as recorded, the calls as the model wrote them), however many actions it made; an observation
    answering a call as its result; an `error` observation answering none as the user turn OpenHands showed."""
    [record] = lines(name)
    messages, responses = [], set()
    for event in record["history"]:
        metadata = event.get("tool_call_metadata") or {}
        if event.get("action") == "system":
            messages.append({"role": "system", "content": event["args"]["content"]})
        elif event.get("action") == "message":
            messages.append({"role": "user" if event["source"] == "user" else "assistant",
                             "content": event["args"]["content"]})
        elif "action" in event and "model_response" in metadata:
            response = metadata["model_response"]
            if response["id"] not in responses:
                responses.add(response["id"])
                messages.append(response["choices"][0]["message"])
        elif "observation" in event and metadata:
            messages.append({"role": "tool", "content": event["content"], "tool_call_id": metadata["tool_call_id"]})
        elif event.get("observation") == "error":
            messages.append({"role": "user", "content": event["content"]})
    return view(messages)


def _swe_labeler(name: str) -> list[tuple]:
    [record] = lines(name)
    return view(record["messages"])


def read(name: str):
    """The file through the platform's readers: [(Read, TraceRecord or None, problems)], one a record."""
    import io

    from dataplatform.conversations.readers import read_trace, trace_records

    return [(found, *read_trace(found.record, task_id=found.name)) if found.record is not None else (found, None, [])
            for found in trace_records(io.BytesIO(body(name)), Path(name).name)]
