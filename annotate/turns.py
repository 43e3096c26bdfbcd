"""The operators that start a response of their own: the next turn of a trajectory, or a new tree.

- `run_tool_calls`: the current response ended with tool calls; the annotator approves, edits or
  rejects each, the approved ones run on the project's MCP servers (dataplatform/tools), and the
  results are the context of the next turn, which the model answers (it streams);
- `start_new_round`: a user turn after an answer; earlier rounds are the context of the next;
- `generate_new` and `edit_prompt`: a new tree of the session, for the same prompt or an edited one.

The next turn's prompt is its whole context rendered by the response template, so an edited argument
or a tool's result reads to the model as if it had always been there. Each operator reads and checks
under the session's lock, then runs the tools and renders the prompt with no transaction open (a tool
can take seconds; rendering is a backend call), then writes under the lock again if the session's
version has not moved (locking.py): a tool that fails, hangs or is down loses nothing, and the annotator
can try again. A prompt over the token budget (budget.py) is refused then, naming what made it long.
"""

import json
from dataclasses import dataclass, replace
from typing import NamedTuple

from django.utils.translation import gettext as _

from dataplatform import tools as mcp
from dataplatform.conversations.model import Conversation, Message
from dataplatform.conversations.reading import read_conversation
from dataplatform.errors import Refused
from dataplatform.inference import backend_for

from . import budget
from .errors import AnnotationError, ToolRunRefused
from .locking import SessionLock, bump
from .models import Event, EventKind, Node, NodeStatus, Session
from .nodes import new_turn, next_tree, node_conversation, response_message, template_of
from .services import config_for

APPROVE, EDIT, REJECT = "approve", "edit", "reject"
REJECTED = "The user rejected this tool call."


@dataclass(frozen=True)
class NextTurn:
    """Tool calls ran; `node` is the next turn, which streams next."""

    node: Node
    results: list[dict]


def _current_answer(session: Session, node_id: int) -> Node:
    node = session.current_node
    if node is None or node.pk != node_id:
        raise AnnotationError(_("This applies to the node you are looking at; reload the session."))
    if node.status == NodeStatus.STREAMING:
        raise AnnotationError(_("Wait for the model to finish this response, or cancel it."))
    if node.status != NodeStatus.COMPLETE:
        raise AnnotationError(_("This response stopped before it ended: continue it first, or correct it."))
    return node


class Prompt(NamedTuple):
    """The next turn's prompt ids, and the model that answers them."""

    ids: list[int]
    model_id: str


def _prompt(session: Session, conversation: Conversation, field_of=None) -> Prompt:
    """The next turn's prompt, checked against the budget; outside any transaction (backend calls)."""
    project = session.item.project
    config = config_for(project)
    backend = backend_for(project, model=config.model_name)
    budget.precheck_turn(conversation, config=config, backend=backend, field_of=field_of)
    ids = template_of(config, backend).render(conversation, None, backend=backend).ids
    budget.check_turn(ids, conversation, config=config, backend=backend, field_of=field_of)
    return Prompt(ids, backend.model_id)


def _start(session: Session, node: Node, *, actor, kind: str, conversation: Conversation, parent: Node | None,
           tree: int, payload: dict, prompt: Prompt) -> Node:
    """The next turn (or a new tree), written under the session's lock: no backend call here."""
    child = new_turn(session=session, parent=parent, operator=kind, conversation=conversation, tree=tree,
                     prompt_ids=prompt.ids, model_id=prompt.model_id)
    child.seed = node.seed
    child.save()
    session.current_node = child
    bump(session)
    Event.objects.create(session=session, kind=kind, node=child, actor=actor, payload=payload)
    return child


# --- tool calls -------------------------------------------------------------------------------------

def tool_steps(session: Session) -> int:
    return Event.objects.filter(session=session, kind=EventKind.RUN_TOOL_CALLS).count()


def run_tool_calls(*, session: Session, version: int, node_id: int, decisions: list[dict] | None = None,
                   actor=None, auto: bool = False) -> NextTurn:
    """Run the current response's tool calls as decided (one decision per call, in order: approve, edit
    with new `arguments`, or reject, each with an optional `note`; none given = approve all), then open the
    next turn with the results, left streaming. `auto`: run by the stream for the project's auto-approve."""
    lock = SessionLock(session.pk, version)
    # A look under the lock: the checks; nothing is written until the tools answer.
    node = lock.look(lambda locked: _current_answer(locked, node_id))
    config = config_for(session.item.project)
    message = response_message(node)
    if not message.tool_calls:
        raise ToolRunRefused(_("This response makes no tool calls."))
    if message.finish_reason != "tool_calls":
        raise ToolRunRefused(_("The response was cut inside its tool calls; continue generating it first."))
    if tool_steps(session) >= config.max_tool_steps:
        raise ToolRunRefused(_("This session has run tools %(limit)s times, the project's limit; "
                               "accept, correct or reject the response instead.") % {"limit": config.max_tool_steps})
    decisions = decisions if decisions is not None else [{"action": APPROVE}] * len(message.tool_calls)
    if len(decisions) != len(message.tool_calls):
        raise ToolRunRefused(_("Decide on each of the %(calls)s tool calls, in order (%(given)s decisions were "
                               "given).") % {"calls": len(message.tool_calls), "given": len(decisions)},
                             field="decisions")
    plans = _plans(message, decisions, config)
    _check_edits(session, plans, config)
    results = [_run(plan) for plan in plans]  # outside the transaction: a tool can take seconds
    calls = tuple(replace(call, arguments=plan["arguments_text"]) for call, plan in zip(
        message.tool_calls, plans, strict=True))
    answered = replace(message, tool_calls=calls, finish_reason=None)  # context: how it ended is the node's
    tool_messages = [Message(role="tool", tool_call_id=call.id, name=call.name, content=result["content"])
                     for call, result in zip(calls, results, strict=True)]
    before = node_conversation(node)
    conversation = Conversation(before.messages + (answered, *tool_messages), before.tools)
    # A call's arguments and its result are this run's: an answer names the decision they came from.
    answered_at = len(before.messages)
    prompt = _prompt(session, conversation, field_of=lambda part: None if part.message is None or part.message <
                     answered_at else (f"decisions[{part.call}].arguments" if part.call is not None
                                       else f"decisions[{part.message - answered_at - 1}]"))
    with lock.write() as locked:  # refused if anything changed while the tools ran
        child = _start(locked, node, actor=actor, kind=EventKind.RUN_TOOL_CALLS, conversation=conversation,
                       parent=node, tree=node.tree, payload={"calls": results, "auto": auto}, prompt=prompt)
    return NextTurn(child, results)


def _check_edits(session: Session, plans: list[dict], config) -> None:
    """An edited argument longer than the whole prompt may be is refused before any tool runs with it."""
    edited = [plan for plan in plans if "edited_arguments" in plan]
    if not edited:
        return
    backend = backend_for(session.item.project, model=config.model_name)
    for plan in edited:
        tokens = len(backend.tokenize(plan["edited_arguments"]))
        if (refused := budget.refusal(tokens, config=config, backend=backend, max_tokens=1)) is not None:
            raise refused.because(_("The edited arguments of call %(id)s (%(name)s) alone are %(tokens)s tokens.")
                                  % {"id": plan["id"], "name": plan["name"], "tokens": f"{tokens:,}"},
                                  field=f"decisions[{plan['index']}].arguments")


def _plans(message: Message, decisions: list[dict], config) -> list[dict]:
    """Check every decision before anything runs: an unknown tool or bad arguments refuse the whole run."""
    wanted = [decision.get("action", APPROVE) != REJECT for decision in decisions]
    offered = {tool.name: tool for tool in mcp.list_tools(config.tool_servers)} if any(wanted) else {}
    plans = []
    for index, (call, decision) in enumerate(zip(message.tool_calls, decisions, strict=True)):
        action = decision.get("action", APPROVE)
        if action not in (APPROVE, EDIT, REJECT):
            raise ToolRunRefused(_("Decision %(number)s: %(action)r is not approve, edit or reject.")
                                 % {"number": index + 1, "action": action},
                                 field=f"decisions[{index}].action")
        plan = {"index": index, "id": call.id, "name": call.name, "action": action, "note": decision.get("note", ""),
                "arguments": call.arguments, "arguments_text": call.arguments, "tool": None}
        if action != REJECT:
            tool = offered.get(call.name)
            if tool is None:
                servers = ", ".join(config.tool_servers) or _("none: an admin sets them in the project's settings")
                raise ToolRunRefused(_("No tool server of this project offers %(tool)r (servers: %(servers)s); "
                                       "reject the call or correct its name.") % {"tool": call.name, "servers": servers},
                                     field=f"decisions[{index}]")
            given = decision.get("arguments") if action == EDIT else call.arguments
            arguments = mcp.validate_arguments(tool, given, where=f"decisions[{index}].arguments")
            plan |= {"tool": tool, "parsed": arguments}
            if action == EDIT:
                plan["arguments_text"] = given if isinstance(given, str) else json.dumps(arguments, ensure_ascii=False)
                plan["edited_arguments"] = plan["arguments_text"]
        plans.append(plan)
    return plans


def _run(plan: dict) -> dict:
    """One call's record (the event's, and the tool message's content)."""
    record = {key: plan[key] for key in ("index", "id", "name", "action", "note", "arguments")}
    if "edited_arguments" in plan:
        record["edited_arguments"] = plan["edited_arguments"]
    if plan["action"] == REJECT:
        note = plan["note"].strip()
        return record | {"content": REJECTED + (f" Their note: {note}" if note else ""), "is_error": False,
                         "server": None, "latency_ms": None}
    tool = plan["tool"]
    result = mcp.call_tool(tool.server, tool.name, plan["parsed"])
    return record | {"content": result.text, "is_error": result.is_error, "server": tool.server,
                     "latency_ms": round(result.latency_ms, 1)}


def auto_run_tool_calls(*, node: Node) -> NextTurn | None:
    """After a response streams: with auto-approve on, its tool calls run at once and the next turn
    follows, until the session's step limit (then the annotator decides)."""
    session = node.session
    config = config_for(session.item.project)
    if not (config.auto_approve_tools and node.status == NodeStatus.COMPLETE and node.message.get("tool_calls")):
        return None
    session.refresh_from_db(fields=["version", "current_node", "status"])
    if session.current_node_id != node.pk or tool_steps(session) >= config.max_tool_steps:
        return None
    return run_tool_calls(session=session, version=session.version, node_id=node.pk, auto=True)


# --- new rounds and new trees ------------------------------------------------------------------------

def start_new_round(*, session: Session, version: int, node_id: int, text: str, actor) -> Node:
    """A user turn after the current answer: the next round, its context every earlier round."""
    if not text.strip():
        raise AnnotationError(_("Write the user's next message."), field="text")
    lock = SessionLock(session.pk, version)
    node = lock.look(lambda locked: _current_answer(locked, node_id))
    message = response_message(node)
    if message.tool_calls:
        raise AnnotationError(_("This response makes tool calls: run or reject them before the next round."))
    before = node_conversation(node)
    answered = replace(message, finish_reason=None)  # context: how it ended is the node's
    conversation = Conversation(before.messages + (answered, Message(role="user", content=text)), before.tools)
    last = len(conversation.messages) - 1
    prompt = _prompt(session, conversation, field_of=lambda part: "text" if part.message == last else None)
    with lock.write() as session:  # refused if anything changed meanwhile
        return _start(session, node, actor=actor, kind=EventKind.START_NEW_ROUND, conversation=conversation,
                      parent=node, tree=node.tree, payload={"text": text}, prompt=prompt)


def generate_new(*, session: Session, version: int, actor) -> Node:
    """A new tree: the model answers the current node's prompt again, from scratch."""
    lock = SessionLock(session.pk, version)
    node = _not_streaming(lock)
    conversation = node_conversation(node)
    prompt = _prompt(session, conversation)
    with lock.write() as session:
        return _start(session, node, actor=actor, kind=EventKind.GENERATE_NEW, conversation=conversation,
                      parent=None, tree=next_tree(session), payload={"from_node": node.pk}, prompt=prompt)


def _not_streaming(lock: SessionLock) -> Node:
    """The current node, read under the lock, if no stream holds it."""
    node = lock.look(lambda session: session.current_node)
    if node.status == NodeStatus.STREAMING:
        raise AnnotationError(_("Wait for the model to finish this response, or cancel it."))
    return node


def edit_prompt(*, session: Session, version: int, messages: list, tools: list | None, actor) -> Node:
    """A new tree for an edited prompt (system, user turns, earlier context, tools)."""
    read = read_conversation(messages, tools if tools is not None else [])
    if read.conversation is None:
        where, problem = read.problems[0]
        raise Refused(f"{where}: {problem}", field="messages" if where.startswith("messages") else "tools")
    conversation = read.conversation
    if not conversation.messages or conversation.messages[-1].role not in ("user", "tool"):
        raise Refused(_("The prompt must end with a user message (or tool results) for the model to answer."),
                      field="messages")
    lock = SessionLock(session.pk, version)
    node = _not_streaming(lock)
    prompt = _prompt(session, conversation, field_of=lambda part: "messages" if part.message is not None else "tools")
    stored = conversation.as_dict()
    with lock.write() as session:
        return _start(session, node, actor=actor, kind=EventKind.EDIT_PROMPT, conversation=conversation,
                      parent=None, tree=next_tree(session), prompt=prompt,
                      payload={"from_node": node.pk, "messages": stored["messages"], "tools": stored.get("tools", [])})
