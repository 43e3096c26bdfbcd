"""What the workspace page shows of a node: its tokens laid out by channel, its context, the session's tree.

Presentation only (the workspace view's context): the tokens stay in their order, and every piece of
text goes to the template as text, which escapes it.

A response is cut into blocks in token order: the reasoning, the content, each tool call (a content run
after a call is a block of its own, so the page keeps the token order). Template tokens (markers) join the
block they belong to: the reasoning's closing marker stays with the reasoning, a call's opening marker
begins the call, anything else joins the block before it (or the one after, at the very start).
"""

import json
import math
from dataclasses import dataclass, field

from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from dataplatform.conversations.templates import template_for
from dataplatform.imports.parsers import load_json

from .models import Node, Session, SessionStatus
from .selectors import TokenGroup
from .services import config_for

KIND_OF_CHANNEL = {"reasoning": "reasoning", "content": "content", "tool_name": "call", "tool_arguments": "call"}
LABELS = {"reasoning": gettext_lazy("Reasoning"), "content": gettext_lazy("Answer"), "call": gettext_lazy("Tool call")}
# A message's role as the page names it (the values stay the format's: system, user, assistant, tool).
ROLE_LABELS = {"system": pgettext_lazy("chat role", "system"), "user": pgettext_lazy("chat role", "user"),
               "assistant": pgettext_lazy("chat role", "assistant"), "tool": pgettext_lazy("chat role", "tool")}
# A node's status in the tree panel, lower case (the model's labels are capitalised and longer).
NODE_STATUS_WORDS = {"streaming": pgettext_lazy("node status", "streaming"),
                     "complete": pgettext_lazy("node status", "complete"),
                     "interrupted": pgettext_lazy("node status", "interrupted")}
MAX_DEPTH_SHOWN = 12  # the tree panel indents no deeper (workspace.css has a class per depth)


@dataclass
class Token:
    group: TokenGroup
    ids: str  # the token ids of the group, space-separated
    bytes_hex: str  # each token's bytes in hex, space-separated
    probability: float | None  # exp(logprob) of the group; None for typed and template tokens
    kind: str | None  # the block kind of its channel; None for markers

    @property
    def newline(self) -> bool:
        """Whitespace with a line break only: shown with a ↵ so that it can be seen and clicked."""
        return "\n" in self.group.text and not self.group.text.strip()

    def __getattr__(self, name):  # start, end, text, origin, locked, channel, logprob
        return getattr(self.group, name)


@dataclass
class Block:
    kind: str  # reasoning, content, call
    call: int | None = None  # the tool call's index
    tokens: list[Token] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.call is None:
            return str(LABELS[self.kind])
        return gettext("Tool call %(number)s") % {"number": self.call + 1}


def tokens_of(node: Node, groups: list[TokenGroup], pieces: list[bytes]) -> list[Token]:
    tokens = []
    for group in groups:
        tokens.append(Token(
            group=group, ids=" ".join(str(i) for i in node.token_ids[group.start:group.end]),
            bytes_hex=" ".join(piece.hex() for piece in pieces[group.start:group.end]),
            probability=None if group.logprob is None else math.exp(group.logprob),
            kind=KIND_OF_CHANNEL.get(group.channel)))
    return tokens


def blocks_of(tokens: list[Token], call_opening: str | None) -> list[Block]:
    """The response's blocks, in token order (module docstring)."""
    blocks: list[Block] = []
    markers: list[Token] = []  # template tokens waiting for the next text
    calls = 0
    last_channel = None
    for token in tokens:
        if token.kind is None:
            markers.append(token)
            continue
        run = "".join(marker.text for marker in markers)
        previous = blocks[-1] if blocks else None
        if token.kind == "call":
            opens = call_opening in run if call_opening else (token.channel == "tool_name"
                                                              and last_channel == "tool_arguments")
            new = previous is None or previous.kind != "call" or opens
            block = Block("call", calls) if new else previous
            calls += new
        elif previous is not None and previous.kind == token.kind:
            block = previous
        else:
            block = Block(token.kind)
        if block is previous:
            previous.tokens += markers
        else:
            _split(markers, previous, block, run.rfind(call_opening) if call_opening and block.kind == "call"
                   else -1)
            blocks.append(block)
        markers = []
        block.tokens.append(token)
        last_channel = token.channel
    if markers:
        if not blocks:
            blocks.append(Block("content"))
        blocks[-1].tokens += markers
    return blocks


def _split(markers: list[Token], before: Block | None, after: Block, at: int) -> None:
    """Markers between two blocks: up to character `at` of their text (a call's opening marker) to the block
    before; without a split point, all of them to the block before when there is one."""
    if at < 0:
        at = 0 if before is None else sum(len(marker.text) for marker in markers)
    offset = 0
    for marker in markers:
        (before if before is not None and offset < at else after).tokens.append(marker)
        offset += len(marker.text)


def _pretty(text: str) -> str:
    """JSON text indented (arguments, tool results); anything else as it is, nested JSON that a tool or a
    model wrote 100,000 deep included (load_json refuses it where json.loads would recurse and fail)."""
    try:
        value = load_json(text)
    except (TypeError, ValueError):
        return text
    return json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, (dict, list)) else text


def context_messages(node: Node) -> list[dict]:
    """The conversation before the response, for the page: each message with its tool calls' arguments and
    tool results pretty-printed."""
    shown = []
    for message in node.context:
        calls = [{"id": call.get("id", ""), "name": call["function"]["name"],
                  "arguments": _pretty(call["function"].get("arguments", ""))}
                 for call in message.get("tool_calls", [])]
        content = message.get("content") or ""
        shown.append({"role": message["role"], "role_label": ROLE_LABELS.get(message["role"], message["role"]),
                      "content": _pretty(content) if message["role"] == "tool" else content,
                      "reasoning": message.get("reasoning", ""), "tool_calls": calls,
                      "name": message.get("name", ""), "tool_call_id": message.get("tool_call_id", "")})
    return shown


def tool_calls_to_decide(node: Node) -> list[dict]:
    """The calls the annotator approves, edits or rejects: the response ended with them."""
    message = node.message or {}
    if node.status != "complete" or message.get("finish_reason") != "tool_calls":
        return []
    described = {tool.get("function", {}).get("name"): tool.get("function", {}).get("description", "")
                 for tool in node.tools}
    return [{"index": index, "id": call["id"], "name": call["function"]["name"],
             "arguments": _pretty(call["function"]["arguments"]),
             "description": described.get(call["function"]["name"], "")}
            for index, call in enumerate(message.get("tool_calls", []))]


def tree_of(session: Session) -> list[dict]:
    """Every node of the session, grouped by tree; in each, depth first by key, with its depth."""
    nodes = list(session.nodes.order_by("key").values("id", "key", "parent_id", "operator", "tree", "round",
                                                      "status", "finish_reason", "fork_index"))
    children: dict[int | None, list[dict]] = {}
    for node in nodes:
        children.setdefault(node["parent_id"], []).append(node)
    accepted = session.current_node_id if session.status == SessionStatus.ACCEPTED else None
    trees: dict[int, list[dict]] = {}

    def walk(node: dict, depth: int) -> None:
        node |= {"depth": min(depth, MAX_DEPTH_SHOWN), "current": node["id"] == session.current_node_id,
                 "accepted": node["id"] == accepted,
                 "status_label": NODE_STATUS_WORDS.get(node["status"], node["status"])}
        trees.setdefault(node["tree"], []).append(node)
        for child in children.get(node["id"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return [{"number": number, "nodes": trees[number]} for number in sorted(trees)]


def response_layout(node: Node, groups: list[TokenGroup], backend) -> list[Block]:
    pieces = backend.token_pieces(node.token_ids) if node.token_ids else []
    # By the node's model id, as its tokens were parsed (not the backend: a page may show another's nodes).
    markers = template_for(node.model_id, config_for(node.session.item.project).response_template).markers
    return blocks_of(tokens_of(node, groups, pieces), markers.tool_call[0] if markers.tool_call else None)


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
