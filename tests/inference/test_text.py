from dataplatform.inference.text import group_pieces


def test_multi_token_characters_are_grouped():
    pieces = [b"\xe4\xbd", b"\xa0", b"ok", b"\xf0\x9f", b"\x99\x82"]
    groups = group_pieces(pieces)
    assert [(g.start, g.end, g.text) for g in groups] == [(0, 2, "你"), (2, 3, "ok"), (3, 5, "🙂")]


def test_a_truncated_character_at_the_end_is_replaced_not_lost():
    groups = group_pieces([b"a", b"\xe4\xbd"])
    assert [(g.start, g.end, g.text) for g in groups] == [(0, 1, "a"), (1, 2, "\ufffd")]


def test_invalid_bytes_in_the_middle_do_not_swallow_the_rest():
    groups = group_pieces([b"\xff", b"b", b"c"])
    assert [g.text for g in groups] == ["\ufffd", "b", "c"]
