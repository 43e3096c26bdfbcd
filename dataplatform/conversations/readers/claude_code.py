"""Claude Code session logs (`~/.claude/projects/<project>/<session id>.jsonl`, and a sub-agent's
`<session id>/subagents/agent-<id>.jsonl`), as Claude Code writes them: one entry a line, each with its `uuid` and
the `parentUuid` it follows. documents.py reads such a file as one record, `{"entries": [...]}`.

- The conversation is the `user` and `assistant` entries of the session's thread, in the file's order. An entry
  follows its `parentUuid`; when the user goes back and sends a prompt again from an earlier point (a rewind), two
  prompts follow the same entry, and the earlier one's branch is no longer the conversation: it is kept in meta
  as `other_branches`. Sidechains (`isSidechain`: a sub-agent's own turns) are kept apart, in meta as
  `sidechains`, unless the file holds nothing else (a sub-agent's own file): then they are the conversation.
- Claude Code writes each content block of a model response as an entry of its own, all with the response's
  `message.id`, and may write tool results before the response's last blocks: the blocks of one response are one
  assistant turn, its `text` blocks the content, its `thinking` blocks the reasoning, each `tool_use` a call (its
  `input` the arguments). `redacted_thinking` blocks and the thinking signatures are kept beside the turn.
- A user entry's `tool_result` blocks are tool results, each answering its `tool_use_id`, with `is_error` kept
  beside it (the agent saw the error as the result); its text (a prompt, a command's output, "[Request
  interrupted by user]") is a user turn after them. A block that is not text (an image) is refused by name, never
  dropped.
- `system`, `progress`, `file-history-snapshot`, `queue-operation`, `summary` and any other entries are no turns:
  they are kept in meta as `other_events`. Each message keeps its entries' own fields beside it (`entries`: uuid,
  parentUuid, timestamp, cwd, the response's id, model, usage...).
- The run's id is the `sessionId` (and the `agentId` of a sub-agent's file); the model is the last response's
  `message.model` (not Claude Code's `<synthetic>` notices); harness `claude-code`. A session names no task and no
  outcome.
"""

from django.utils.translation import gettext

from ..reading import Problem
from .base import Built, TraceRecord, conversation_of, without

FORMAT = "claude_code"
HARNESS = "claude-code"
TURNS = ("user", "assistant")
SYNTHETIC = "<synthetic>"  # the model Claude Code names on notices it writes itself (an API error...)


def is_entry(data: dict) -> bool:
    """Whether a JSON line is an entry of a Claude Code session log (a turn, or the log's own bookkeeping)."""
    return isinstance(data.get("type"), str) and ("sessionId" in data or "leafUuid" in data
                                                  or ("messageId" in data and "snapshot" in data))


def read(record: dict) -> tuple[TraceRecord | None, list[Problem]]:
    problems: list[Problem] = []
    entries = record.get("entries")
    if not isinstance(entries, list) or not entries:
        return None, [("entries", gettext("must be a non-empty list of session entries"))]
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append((f"entries[{index}]", gettext("must be an object: an entry of the session")))
    if problems:
        return None, problems
    turns = [index for index, entry in enumerate(entries) if entry.get("type") in TURNS]
    main = [index for index in turns if not entries[index].get("isSidechain")]
    chosen = main or turns
    abandoned = _abandoned(entries, set(chosen))
    thread = [index for index in chosen if index not in abandoned]
    session = _Session(entries, problems)
    for index in thread:
        session.add(index)
    # A log whose every turn was refused has no conversation to read: its problems say why.
    conversation = conversation_of(session.built, problems, list_path="entries") if session.built or not problems \
        else None
    if problems:
        return None, problems
    kept = set(thread) | abandoned | set(turns) - set(chosen)
    meta = {key: value for key, value in (
        ("other_events", [entry for index, entry in enumerate(entries) if index not in kept]),
        ("sidechains", [entries[index] for index in turns if index not in chosen]),
        ("other_branches", [entries[index] for index in sorted(abandoned)])) if value}
    first = entries[thread[0]]
    trace_id = first.get("sessionId") if isinstance(first.get("sessionId"), str) else ""
    if trace_id and not main and isinstance(first.get("agentId"), str):
        trace_id = f"{trace_id}:{first['agentId']}"
    model, model_at = session.model()
    return TraceRecord(FORMAT, conversation, extras=tuple(b.extras for b in session.built), trace_id=trace_id,
                       model=model, harness=HARNESS, meta=meta,
                       origins={"trace_id": f"entries[{thread[0]}].sessionId", "model": model_at}), []


def _prompt(entry: dict) -> bool:
    """A user entry the user wrote (not tool results): two of them after one entry make a rewind."""
    content = entry.get("message", {}).get("content") if isinstance(entry.get("message"), dict) else None
    if entry.get("type") != "user" or entry.get("isMeta"):
        return False
    return isinstance(content, str) or (isinstance(content, list) and not any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content))


def _abandoned(entries: list[dict], chosen: set[int]) -> set[int]:
    """The indexes of the entries on branches a rewind left: every prompt but the last after one same entry, and
    all that follows it."""
    children: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if isinstance(entry.get("parentUuid"), str):
            children.setdefault(entry["parentUuid"], []).append(index)
    left = []
    for followers in children.values():
        prompts = [index for index in followers if index in chosen and _prompt(entries[index])]
        left += prompts[:-1]
    abandoned, queue = set(), list(left)
    while queue:  # every entry that follows an abandoned one
        index = queue.pop()
        if index in abandoned:
            continue
        abandoned.add(index)
        uuid = entries[index].get("uuid")
        queue += children.get(uuid, []) if isinstance(uuid, str) else []
    return abandoned


def _facts(entry: dict) -> dict:
    """What a message keeps of an entry: its own fields, and its message's beyond role and content."""
    facts = without(entry, "message")
    if isinstance(entry.get("message"), dict):
        rest = without(entry["message"], "role", "content")
        if rest:
            facts["message"] = rest
    return facts


class _Session:
    """The messages built from the thread's entries, in order."""

    def __init__(self, entries: list[dict], problems: list[Problem]):
        self.entries, self.problems = entries, problems
        self.built: list[Built] = []
        self.responses: dict[str, Built] = {}  # message.id -> its assistant turn
        self.names: dict[str, str] = {}  # tool_use id -> tool name
        self.last_model = ("", "")

    def add(self, index: int) -> None:
        entry, where = self.entries[index], f"entries[{index}].message"
        message = entry.get("message")
        if not isinstance(message, dict):
            self.problems.append((where, gettext("must be an object with role and content")))
            return
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            self.problems.append((f"{where}.content", gettext("must be text or a list of content blocks")))
            return
        if entry["type"] == "assistant":
            self._response(where, entry, message, blocks)
        else:
            self._user(where, entry, blocks)

    def _response(self, where: str, entry: dict, message: dict, blocks: list) -> None:
        response_id = message.get("id") if isinstance(message.get("id"), str) else None
        turn = self.responses.get(response_id) if response_id else None
        if turn is None:
            turn = Built({"role": "assistant", "content": "", "reasoning": "", "tool_calls": []}, where, {"entries": []})
            self.built.append(turn)
            if response_id:
                self.responses[response_id] = turn
        turn.extras["entries"].append(_facts(entry))
        if isinstance(message.get("model"), str) and message["model"] != SYNTHETIC:
            self.last_model = (message["model"], f"{where}.model")
        for position, block in enumerate(blocks):
            at, kind = f"{where}.content[{position}]", block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                turn.message["content"] += block["text"]
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                reasoning = turn.message["reasoning"]
                turn.message["reasoning"] = f"{reasoning}\n\n{block['thinking']}" if reasoning else block["thinking"]
                if block.get("signature"):
                    turn.extras.setdefault("signatures", []).append(block["signature"])
            elif kind == "redacted_thinking":
                turn.extras.setdefault("redacted_thinking", []).append(block)
            elif kind == "tool_use" and isinstance(block.get("input"), dict) and isinstance(block.get("name"), str):
                turn.message["tool_calls"].append({"id": block.get("id"), "type": "function",
                                                   "function": {"name": block["name"], "arguments": block["input"]}})
                if isinstance(block.get("id"), str):
                    self.names[block["id"]] = block["name"]
                if without(block, "type", "id", "name", "input"):
                    turn.extras.setdefault("tool_use", []).append(without(block, "input"))
            else:
                self._refuse(at, kind, "assistant")

    def _user(self, where: str, entry: dict, blocks: list) -> None:
        texts = []
        for position, block in enumerate(blocks):
            at, kind = f"{where}.content[{position}]", block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_result":
                call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else ""
                result = {"role": "tool", "tool_call_id": call_id, "name": self.names.get(call_id, ""),
                          "content": block.get("content")}
                self.built.append(Built(result, at, without(block, "type", "tool_use_id", "content")
                                        | {"entries": [_facts(entry)]}))
            else:
                self._refuse(at, kind, "user")
        if texts:
            self.built.append(Built({"role": "user", "content": "".join(texts)}, where, {"entries": [_facts(entry)]}))

    def _refuse(self, at: str, kind, role: str) -> None:
        self.problems.append((at, gettext("a %(kind)s block in a %(role)s message: only text, thinking, tool_use "
                                          "(assistant) and tool_result (user) blocks are read, and no block is left "
                                          "out") % {"kind": repr(kind), "role": role}))

    def model(self) -> tuple[str, str]:
        return self.last_model
