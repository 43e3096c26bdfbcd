"""What every operator does to a node: its conversation, its response template, the channels of its tokens.

A node is one assistant response. Its `context` is the conversation before it (the item's prompt, or
that plus earlier rounds and tool results) and its `prompt_ids` what the response template rendered
them into; the response's tokens continue those ids exactly. The template also reads the tokens back
into the structured message (reasoning, content, tool calls) and the channel of every token.
"""

from django.db.models import Max

from dataplatform.conversations.model import Conversation, Message, ToolCall
from dataplatform.conversations.templates import Template, template_for

from .models import Node, NodeStatus, Session
from .prompts import stored_prompt
from .tokens import TokenSequence


def template_of(config, backend) -> Template:
    """The project's response template: the family it names, else the one its model id calls for."""
    return template_for(backend.model_id, config.response_template)


def node_conversation(node: Node) -> Conversation:
    """The conversation the node answers."""
    return stored_prompt(node.context, node.tools)


def parse_into(node: Node, *, template: Template, backend, pieces: list[bytes] | None = None) -> None:
    """Set the node's channels and message from its tokens: finished when the node is complete. `pieces`:
    the tokens' bytes, when the caller already has them (a stream keeps them)."""
    finished = node.status == NodeStatus.COMPLETE
    parsed = template.parse(node.token_ids, backend=backend, pieces=pieces,
                            finish_reason=(node.finish_reason or "length") if finished else None)
    TokenSequence(node).set_channels(parsed.channels)
    node.message = parsed.message.as_dict()


def response_message(node: Node) -> Message:
    """The assistant message the node's tokens spell (its stored parse)."""
    return response_message_of(node.message)


def response_message_of(data: dict) -> Message:
    """A stored parse (Node.message) as the Message it is."""
    data = data or {"role": "assistant", "content": ""}
    calls = tuple(ToolCall(id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"])
                  for call in data.get("tool_calls", []))
    return Message(role="assistant", content=data.get("content", ""), reasoning=data.get("reasoning", ""),
                   tool_calls=calls, finish_reason=data.get("finish_reason"))


def next_key(session: Session) -> int:
    return (session.nodes.aggregate(top=Max("key"))["top"] or 0) + 1


def next_tree(session: Session) -> int:
    return (session.nodes.aggregate(top=Max("tree"))["top"] or 0) + 1


def fork_of(node: Node, *, session: Session, operator: str, keep: int) -> Node:
    """An unsaved child that keeps the parent's first `keep` tokens and its turn: a correction's start."""
    child = Node(
        session=session, parent=node, key=next_key(session), operator=operator, fork_index=keep,
        tree=node.tree, round=node.round, context=node.context, tools=node.tools, prompt_ids=node.prompt_ids,
        model_id=node.model_id, seed=node.seed, max_tokens=node.max_tokens, status=NodeStatus.STREAMING,
    )
    TokenSequence(node).prefix(keep).write_to(child)
    return child


def new_turn(*, session: Session, parent: Node | None, operator: str, conversation: Conversation, tree: int,
             prompt_ids: list[int], model_id: str) -> Node:
    """An unsaved, empty node that answers `conversation` (a new tree's root, or the next turn of one), from
    `prompt_ids`: the conversation as the response template rendered it (before the session was locked)."""
    stored = conversation.as_dict()
    return Node(
        session=session, parent=parent, key=next_key(session), operator=operator, tree=tree,
        round=sum(message.role == "user" for message in conversation.messages) or 1,
        context=stored["messages"], tools=stored.get("tools", []), prompt_ids=prompt_ids,
        model_id=model_id, status=NodeStatus.STREAMING,
    )
