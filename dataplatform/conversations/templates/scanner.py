"""Reading the response layout (layout.py) back from bytes: which byte belongs to which channel.

It works on bytes, not text, because the tokens are the truth: byte-level BPE splits a character over
several tokens, and a token can hold the end of a marker and the start of a text. It is lenient where
models vary and strict where the layout is fixed:

- the reasoning block counts only at the very start; one newline after `<think>` and one before
  `</think>` are template, as are up to two after it;
- a `<tool_call>` opens a call anywhere after the reasoning, with one optional newline on each side;
  whitespace between and after calls is template, any other text there is content;
- in a call, the JSON around the name may be spaced in any way; the arguments run to the first `}`
  that only whitespace separates from `</tool_call>`. A call whose JSON does not begin as `{"name": "...", "arguments": ` keeps the
  rest of its bytes as arguments, so that nothing the model wrote is lost.

On a partial stream (`finished` false) every decision is final: bytes at the end that may still turn
out to be a marker (a newline before a possible `</think>`, a `}` before a possible `</tool_call>`, half
a marker) are `pending`, everything before them keeps its channel whatever comes next.
"""

from dataclasses import dataclass

from .layout import CONTENT, MARKER, PENDING, REASONING, TOOL_ARGUMENTS, TOOL_NAME, Markers

SPACES = b" \t\r\n"
# Pattern parts: a literal, or one of these.
NEWLINE = "optional newline"
SPACE = "optional space"
WHITESPACE = "any whitespace"
PARTIAL = -1  # a pattern that the data ends inside

CALL_HEADER = (b"{", WHITESPACE, b'"name"', WHITESPACE, b":", WHITESPACE, b'"')
# One space at most after the colon: whitespace the arguments begin with is theirs.
CALL_MIDDLE = (b'"', WHITESPACE, b",", WHITESPACE, b'"arguments"', WHITESPACE, b":", SPACE)


@dataclass(frozen=True)
class Span:
    channel: str
    start: int
    end: int
    call: int | None = None  # the tool call a tool_name or tool_arguments span belongs to


@dataclass
class Scan:
    spans: list[Span]  # contiguous, covering all of the data
    calls: int  # tool calls opened


def scan(data: bytes, markers: Markers, *, finished: bool) -> Scan:
    scanner = _Scanner(data, finished)
    if markers.reasoning is None or scanner.reasoning(*markers.reasoning):
        if markers.tool_call is None:
            scanner.take(CONTENT, len(data))
        else:
            scanner.content_and_calls(*markers.tool_call)
    return Scan(scanner.spans, scanner.calls)


def _match(data: bytes, at: int, pattern: tuple) -> int | None:
    """The end of `pattern` matched at `at`; PARTIAL when the data ends inside it; None when it differs.
    Greedy is exact here: markers never start with whitespace (Markers checks it)."""
    for part in pattern:
        if part == NEWLINE:
            at += 1 if data.startswith(b"\n", at) else 0
        elif part == WHITESPACE:
            while at < len(data) and data[at] in SPACES:
                at += 1
        elif data.startswith(part, at):
            at += len(part)
        else:
            return PARTIAL if part.startswith(data[at:]) else None
    return at


def _find(data: bytes, start: int, pattern: tuple) -> tuple[int, int] | None:
    """The first place from `start` where `pattern` matches or the data ends inside it, and its end."""
    firsts = {b"\n", pattern[1][:1]} if pattern[0] == NEWLINE else {pattern[0][:1]}
    at = start
    while True:
        candidates = [found for first in firsts if (found := data.find(first, at)) != -1]
        if not candidates:
            return None
        at = min(candidates)
        end = _match(data, at, pattern)
        if end is not None:
            return at, end
        at += 1


class _Scanner:
    def __init__(self, data: bytes, finished: bool):
        self.data = data
        self.finished = finished
        self.at = 0
        self.spans: list[Span] = []
        self.calls = 0

    def take(self, channel: str, end: int, call: int | None = None) -> None:
        """Give the bytes up to `end` to `channel` (merged into the span before when it is the same)."""
        if end <= self.at:
            return
        last = self.spans[-1] if self.spans else None
        if last and (last.channel, last.call) == (channel, call):
            self.spans[-1] = Span(channel, last.start, end, call)
        else:
            self.spans.append(Span(channel, self.at, end, call))
        self.at = end

    def until(self, channel: str, pattern: tuple, call: int | None = None) -> bool:
        """Text of `channel` up to the next `pattern`, which becomes template. False when the data ends
        first; the start of the pattern at the very end is pending unless the stream is finished."""
        found = _find(self.data, self.at, pattern)
        if found is not None and found[1] != PARTIAL:
            self.take(channel, found[0], call)
            self.take(MARKER, found[1])
            return True
        if found is not None and not self.finished:
            self.take(channel, found[0], call)
            self.take(PENDING, len(self.data))
        self.take(channel, len(self.data), call)
        return False

    def sequence(self, pattern: tuple) -> bool | None:
        """Template that must follow, byte by byte: True when all of it is there; False at the first
        byte that differs (the bytes before it stay template); None when the data ends first."""
        for part in pattern:
            if part == WHITESPACE:
                end = self.at
                while end < len(self.data) and self.data[end] in SPACES:
                    end += 1
                self.take(MARKER, end)
                continue
            if part == SPACE:
                self.take(MARKER, self.at + (1 if self.data.startswith(b" ", self.at) else 0))
                continue
            for byte in part:
                if self.at == len(self.data):
                    return False if self.finished else None
                if self.data[self.at] != byte:
                    return False
                self.take(MARKER, self.at + 1)
        return True

    def newlines(self, most: int) -> None:
        end = self.at
        while end < min(len(self.data), self.at + most) and self.data[end] == ord("\n"):
            end += 1
        self.take(MARKER, end)

    def reasoning(self, opening: str, closing: str) -> bool:
        """The reasoning block, if the response starts with one. False when the data ends inside it."""
        opening_bytes = opening.encode()
        if not self.data.startswith(opening_bytes):
            if not self.finished and opening_bytes.startswith(self.data):
                self.take(PENDING, len(self.data))  # "<thi": the start of a reasoning block, perhaps
                return False
            return True
        self.take(MARKER, len(opening_bytes))
        self.newlines(1)
        if not self.until(REASONING, (NEWLINE, closing.encode())):
            return False
        self.newlines(2)
        return True

    def content_and_calls(self, opening: str, closing: str) -> None:
        open_pattern = (NEWLINE, opening.encode())
        close_pattern = (b"}", WHITESPACE, closing.encode())
        while self.at < len(self.data) and self.until(CONTENT, open_pattern):
            self.newlines(1)
            if not self.call(close_pattern):
                return
            self.sequence((WHITESPACE,))  # between calls, and after the last one

    def call(self, close_pattern: tuple) -> bool:
        """One tool call after its opening marker. False when the data ends inside it."""
        index = self.calls
        self.calls += 1
        header = self.sequence(CALL_HEADER)
        if header is None:
            return False
        if header:
            name_end = self.data.find(b'"', self.at)
            if name_end == -1:
                self.take(TOOL_NAME, len(self.data), index)
                return False
            self.take(TOOL_NAME, name_end, index)
            if self.sequence(CALL_MIDDLE) is None:
                return False
        return self.until(TOOL_ARGUMENTS, close_pattern, index)
