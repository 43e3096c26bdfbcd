"""lz-string (the onPanda app's `cache_tree`): compression, compiled, and decompression with a cap on how much
it writes.

Compression (`compress_to_base64`) is the Rust port in `hmt-lzma-pyo3` (~5x the pure-Python `lzstring` package, on
a session's ~20 KB cache 2.8 ms against 15 ms), whose output is lz-string's except for the base64 padding (it
adds one "=" too many, or none where lz-string adds some): the padding is put back as lz-string 1.x writes it,
so the text is the JavaScript original's, character for character. Where no wheel of it installs, the
pure-Python package writes the same text.

lz-string is LZW: each code stands for an earlier piece of the output plus one character, so a stream
that names its newest piece over and over grows by one character more per code, and a 30 KB string spells
~10^8 characters, a 380 KB one ~10^10. The `lzstring` package decompresses without a bound (minutes and
half a gigabyte for 10^8), one Python step per bit. This port of lz-string 1.x's `_decompress` stops as
soon as the output passes `max_chars`, so what it costs is bounded by the cap, not by what the input spells:
the output is one array of UTF-16 code units (2 bytes each) and every dictionary entry a (start, length)
into it (8 bytes), since every entry is a piece of the output. Bits are read from the whole input at once
(base64 decoding, a byte's bits reversed by `bytes.translate`), a code at a time.
"""

import base64
import sys
from array import array

# Each byte's bits in reverse order: lz-string reads a character's bits from the highest and builds a code
# from its lowest, so with every byte reversed a code is the next `width` bits of one little-endian integer.
_REVERSED = bytes(int(f"{byte:08b}"[::-1], 2) for byte in range(256))
MAX_CAP = 2**32 - 2  # positions are kept as 32-bit integers


try:
    from lzma_pyo3 import compressToBase64 as _compiled_compress
except ImportError:  # no wheel for this platform: the pure-Python package writes the same text, slower
    _compiled_compress = None


def compress_to_base64(text: str) -> str:
    """`LZString.compressToBase64(text)`, as lz-string 1.x's JavaScript writes it."""
    if _compiled_compress is None:
        from lzstring import LZString

        return LZString.compressToBase64(text)
    body = _compiled_compress(text).rstrip("=")
    return body + "=" * (-len(body) % 4)  # lz-string pads its base64 to a multiple of 4 characters


class TooLong(ValueError):
    """The output passed the cap; nothing past it was written."""


def decompress_from_base64(text: str, max_chars: int) -> str | None:
    """`LZString.decompressFromBase64`, or None if `text` is not lz-string's base64. Raises TooLong as soon
    as the output passes `max_chars` UTF-16 code units."""
    # lz-string's base64 alphabet is base64's; its "=" (the 65th sign) reads as six 0 bits, as "A" does.
    body = text.replace("=", "A")
    try:
        raw = base64.b64decode(body + "A" * (-len(body) % 4), validate=True)
    except ValueError:  # a character outside the alphabet (binascii.Error is a ValueError)
        return None
    return _decompress(raw, 6 * len(text), max_chars)


def decompress(text: str, max_chars: int) -> str | None:
    """`LZString.decompress` (the app's older "lz-string" caches: 16 bits per UTF-16 code unit)."""
    raw = text.encode("utf-16-be", "surrogatepass")
    return _decompress(raw, 8 * len(raw), max_chars)


def _decompress(raw: bytes, total_bits: int, max_chars: int) -> str | None:
    max_chars = min(max_chars, MAX_CAP)
    stream = raw.translate(_REVERSED)
    position = 0

    def read(width: int) -> int:
        # Past the end the bits are 0, as in lz-string; the main loop stops once the input is spent.
        nonlocal position
        start = position >> 3
        value = int.from_bytes(stream[start:start + 8], "little") >> (position & 7) & ((1 << width) - 1)
        position += width
        return value

    out = array("H")  # the output, in UTF-16 code units
    starts, lengths = array("I", [0, 0, 0]), array("I", [0, 0, 0])  # codes 0-2 are markers, not entries

    def literal(code: int) -> None:  # code 0: an 8-bit character follows; 1: a 16-bit one
        starts.append(len(out))  # where it is written next
        lengths.append(1)
        out.append(read(8 if code == 0 else 16))

    first = read(2)
    if first == 2:
        return ""
    if first > 2:  # lz-string 1.x writes "undefined" here; the lzstring package fails
        return None
    literal(first)
    if len(out) > max_chars:
        raise TooLong
    previous, previous_length = starts[3], 1  # the piece written last (lz-string's `w`)
    enlarge_in, width = 4, 3
    while True:
        if position >= total_bits:  # the input ended before the end marker
            return None
        code = read(width)
        if code == 2:
            break
        if code < 2:
            literal(code)  # the entry is written below, where the character already stands
            code = len(starts) - 1
            enlarge_in -= 1
            if enlarge_in == 0:
                enlarge_in, width = 1 << width, width + 1
            start, length = starts[code], 1
        elif code < len(starts):
            start, length = len(out), lengths[code]
            if start + length > max_chars:
                raise TooLong
            out.extend(out[starts[code]:starts[code] + length])
        elif code == len(starts):  # the entry being defined: the last piece and its own first character
            start, length = len(out), previous_length + 1
            if start + length > max_chars:
                raise TooLong
            out.extend(out[previous:previous + previous_length])
            out.append(out[previous])
        else:
            return None
        if len(out) > max_chars:
            raise TooLong
        # The new entry: the last piece plus this one's first character, which follows it in the output
        # (`start` is where this piece was written, not where its entry was first seen).
        starts.append(previous)
        lengths.append(previous_length + 1)
        enlarge_in -= 1
        if enlarge_in == 0:
            enlarge_in, width = 1 << width, width + 1
        previous, previous_length = start, length
    if sys.byteorder == "big":
        out.byteswap()
    try:
        return out.tobytes().decode("utf-16-le")  # a character outside the BMP comes as two code units
    except UnicodeDecodeError:  # an unpaired surrogate
        return None
