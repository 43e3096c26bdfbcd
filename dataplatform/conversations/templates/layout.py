"""How an assistant response is written as text: the channels, the markers between them, and the layout
every family shares (Qwen3's, which Hermes-style models also use):

    <think>\\n{reasoning}\\n</think>\\n\\n{content}\\n<tool_call>\\n{"name": "{name}", "arguments": {arguments}}\\n</tool_call>

- the reasoning block only when there is reasoning; it stays open (no closing marker) while the
  reasoning is unfinished: nothing comes after it yet and the message is not complete;
- one `<tool_call>` block per call, after the content, the newline before it only when something
  precedes it; the last call stays open while the message is partial;
- the text of every channel exactly as stored (no stripping), so what the annotator saw is what the
  model continues from. The one thing that cannot round-trip is text that contains a marker itself.

This module writes the layout (render); scanner.py reads it back from bytes (parse).
"""

from dataclasses import dataclass

from django.utils.translation import gettext, gettext_lazy

from dataplatform.errors import Refused

from ..model import Message

REASONING = "reasoning"
CONTENT = "content"
TOOL_NAME = "tool_name"
TOOL_ARGUMENTS = "tool_arguments"
MARKER = "marker"  # template text: markers, the newlines around them, the JSON around a call's name
PENDING = "pending"  # the stream ends inside what may be a marker: the next tokens decide
TEXT_CHANNELS = (REASONING, CONTENT, TOOL_NAME, TOOL_ARGUMENTS)
COMPLETE = ("stop", "tool_calls")  # finish reasons of a finished message; any other is partial


@dataclass(frozen=True)
class Markers:
    """The markers of the channels a family parses: `(opening, closing)`, or None when the family has no
    such channel (then a message that needs it cannot be rendered)."""

    reasoning: tuple[str, str] | None = ("<think>", "</think>")
    tool_call: tuple[str, str] | None = ("<tool_call>", "</tool_call>")

    def __post_init__(self):
        for pair in (self.reasoning, self.tool_call):
            # The scanner relies on it: the whitespace before a marker is matched separately.
            if pair is not None and not all(marker and not marker[0].isspace() for marker in pair):
                raise ValueError(f"markers must be non-empty and start with a visible character: {pair!r}")


def is_complete(message: Message | None) -> bool:
    return message is not None and message.finish_reason in COMPLETE


def response_pieces(message: Message, markers: Markers, *, complete: bool) -> list[tuple[str, str]]:
    """The response as (channel, text) pieces in order; joined, they are the text to tokenize. A complete
    message closes every block; a partial one leaves the last block open for the model to continue."""
    pieces: list[tuple[str, str]] = []

    def add(channel: str, text: str) -> None:
        if text:
            pieces.append((channel, text))

    if message.reasoning:
        opening, closing = _needed(markers.reasoning, gettext_lazy("reasoning"))
        add(MARKER, opening + "\n")
        add(REASONING, message.reasoning)
        if complete or message.content or message.tool_calls:  # the reasoning is finished
            add(MARKER, f"\n{closing}\n\n")
    add(CONTENT, message.content)
    if message.tool_calls:
        opening, closing = _needed(markers.tool_call, gettext_lazy("tool calls"))
        for index, call in enumerate(message.tool_calls):
            separator = "\n" if message.content or index else ""
            add(MARKER, f'{separator}{opening}\n{{"name": "')
            add(TOOL_NAME, call.name)
            add(MARKER, '", "arguments": ')
            add(TOOL_ARGUMENTS, call.arguments)
            if complete or index + 1 < len(message.tool_calls):
                add(MARKER, f"}}\n{closing}")
    return pieces


def response_text(message: Message, markers: Markers, *, complete: bool) -> str:
    return "".join(text for _, text in response_pieces(message, markers, complete=complete))


def _needed(pair: tuple[str, str] | None, what) -> tuple[str, str]:
    if pair is None:
        raise Refused(gettext("This response template has no markers for %(what)s, so the message cannot be "
                              "rendered without losing them; choose a template family that has them.")
                      % {"what": what})
    return pair
