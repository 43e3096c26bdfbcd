"""Turning token byte pieces into displayable text.

Byte-level BPE splits one emoji or CJK character over several tokens, and each
of those decodes alone to U+FFFD. The display groups consecutive tokens into
whole characters; the ids and bytes stay the truth.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class CharGroup:
    start: int  # index of the first token in the group
    end: int  # one past the last token
    text: str


def group_pieces(pieces: list[bytes]) -> list[CharGroup]:
    """Group token pieces so that every group decodes to whole characters.

    A group closes as soon as its bytes decode cleanly. Bytes that never form a
    valid character (a truncated sequence at the end) decode with U+FFFD.
    """
    groups: list[CharGroup] = []
    start = 0
    buffer = b""
    for index, piece in enumerate(pieces):
        buffer += piece
        try:
            text = buffer.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Incomplete at the end: wait for the next token. Invalid in the middle: give up on it.
            if exc.reason == "unexpected end of data" and index + 1 < len(pieces):
                continue
            text = buffer.decode("utf-8", errors="replace")
        groups.append(CharGroup(start=start, end=index + 1, text=text))
        start = index + 1
        buffer = b""
    return groups
