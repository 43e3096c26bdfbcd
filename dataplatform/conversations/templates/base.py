"""What every response template is: `render` a conversation and a partial assistant message into prompt
token ids, and `parse` response token ids back into the message with the channel of every token."""

import codecs
from dataclasses import dataclass

from django.utils.translation import gettext

from dataplatform.errors import Refused

from ..model import Conversation, Message, ToolCall
from .layout import CONTENT, MARKER, PENDING, REASONING, TEXT_CHANNELS, TOOL_ARGUMENTS, TOOL_NAME, Markers
from .scanner import Scan, Span, scan


@dataclass(frozen=True)
class Prompt:
    """Prompt token ids: the conversation, the assistant turn opened, and the partial response so far.
    `ids[response_start:]` are the response's own tokens: parse them together with what the model
    continues with."""

    ids: list[int]
    response_start: int

    @property
    def response_ids(self) -> list[int]:
        return self.ids[self.response_start:]


@dataclass(frozen=True)
class Parsed:
    """The assistant message read from response tokens, and one channel per token: reasoning, content,
    tool_name, tool_arguments, marker (template text), or pending (the end of a partial stream that may
    still become a marker; never in a finished one)."""

    message: Message
    channels: list[str]


class Template:
    name: str
    markers: Markers
    # The text of a token that ends the turn besides the backend's end-of-sequence ids (a vLLM backend
    # may not know those). Empty: the backend's alone.
    end_of_turn: str = ""

    def render(self, conversation: Conversation, partial: Message | None, *, backend) -> Prompt:
        """Prompt ids for the model to continue `partial` after the conversation (None: to begin a new
        assistant turn). A partial message stays open where it stops; a complete one (`stop`,
        `tool_calls`) is closed and ends its turn."""
        raise NotImplementedError

    def parse(self, ids: list[int], *, backend, finish_reason: str | None = None,
              pieces: list[bytes] | None = None) -> Parsed:
        """Read response token ids, finished or not. An end-of-turn token finishes it (`stop`, or
        `tool_calls` when it made calls; tokens after it are ignored, as markers); otherwise pass the
        stream's `finish_reason` when it has ended (`length`). Without one the stream is partial: the
        message is what is certain so far, every field a prefix of what it will be. A stream that parses
        after every token passes the `pieces` (`backend.token_pieces(ids)`) it keeps, to look up only the
        new token's."""
        if pieces is None:
            pieces = backend.token_pieces(ids)
        end = self._end(ids, pieces, backend)
        if end < len(ids):
            finish_reason = "stop"
        finished = finish_reason is not None
        data = b"".join(pieces[:end])
        scanned = self.scan(data, finished=finished)
        channels = token_channels(pieces[:end], scanned.spans) + [MARKER] * (len(ids) - end)
        return Parsed(_message(data, scanned, finished=finished, finish_reason=finish_reason), channels)

    def scan(self, data: bytes, *, finished: bool) -> Scan:
        """The channel of every response byte: the shared layout's scanner, with this family's markers."""
        return scan(data, self.markers, finished=finished)

    def _end(self, ids: list[int], pieces: list[bytes], backend) -> int:
        end_of_turn = self.end_of_turn.encode()
        return next((index for index, (token_id, piece) in enumerate(zip(ids, pieces, strict=True))
                     if token_id in backend.eos_token_ids or (end_of_turn and piece == end_of_turn)), len(ids))


def check_partial(partial: Message | None) -> None:
    if partial is not None and partial.role != "assistant":
        raise Refused(gettext("Only an assistant message can be continued, not a %(role)s message.")
                      % {"role": partial.role})


def check_spelled(ids: list[int], text: str, backend) -> None:
    """The response tokens must spell the partial text exactly, or the model would continue from a
    prefix nobody saw (SmolLM2's tokenizer, for one, silently drops a few control characters). Decoded
    whole rather than piece by piece: a vLLM backend without a local tokenizer has lossy pieces."""
    if backend.detokenize(ids) != text:
        raise Refused(gettext("The partial message cannot be written exactly in the tokens of %(model)s (its "
                              "tokenizer drops some of its characters, or its chat template changes the text), so "
                              "it cannot be continued as it stands.") % {"model": backend.model_id})


def token_channels(pieces: list[bytes], spans: list[Span]) -> list[str]:
    """The channel of each token from the channels of its bytes.

    A token that holds any text gets the channel of its first text byte, even when it also holds
    marker bytes (`}}` closing the arguments and the call; ` {"` opening the arguments): correcting
    that token changes the text, so it belongs to the text. Only a token made of template bytes alone is
    a marker, and one whose bytes are still undecided is pending."""
    channels = []
    start = first = 0
    for piece in pieces:
        end = start + len(piece)
        while first < len(spans) and spans[first].end <= start:
            first += 1
        inside = [span.channel for span in spans[first:] if span.start < end] if end > start else []
        text = next((channel for channel in inside if channel in TEXT_CHANNELS), None)
        channels.append(text or (PENDING if PENDING in inside else MARKER))
        start = end
    return channels


def _message(data: bytes, scanned: Scan, *, finished: bool, finish_reason: str | None) -> Message:
    fields: dict[tuple[str, int | None], bytes] = {}
    for span in scanned.spans:
        if span.channel in TEXT_CHANNELS:
            key = (span.channel, span.call)
            fields[key] = fields.get(key, b"") + data[span.start:span.end]
    last = scanned.spans[-1] if scanned.spans else None

    def text(channel: str, call: int | None = None) -> str:
        # A partial stream can end inside a character (byte-level BPE splits them): hold its bytes back
        # until the rest arrives, so the text only ever grows. Anywhere else a broken character is final.
        at_end = last is not None and (last.channel, last.call) == (channel, call)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(fields.get((channel, call), b""), final=finished or not at_end)

    # The layout carries no call ids (results answer calls by order), so they are numbered.
    calls = tuple(ToolCall(id=f"call_{index}", name=text(TOOL_NAME, index), arguments=text(TOOL_ARGUMENTS, index))
                  for index in range(scanned.calls))
    if finish_reason == "stop" and calls:
        finish_reason = "tool_calls"
    return Message(role="assistant", content=text(CONTENT), reasoning=text(REASONING), tool_calls=calls,
                   finish_reason=finish_reason)
