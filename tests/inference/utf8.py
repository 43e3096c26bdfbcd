def is_whole_utf8(piece: bytes) -> bool:
    """True if the bytes decode alone, i.e. the token is not part of a split character."""
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
