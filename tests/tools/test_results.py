"""A tool's result is bounded before it is stored: cut with a marker past TOOL_RESULT_MAX_CHARS, characters
no database can hold replaced, structured content dropped when it cannot be kept (issue 37)."""

import json
import re

from dataplatform.tools.results import bounded_result_text, bounded_structured


def test_a_result_within_the_limit_is_kept_as_it_is(settings):
    settings.TOOL_RESULT_MAX_CHARS = 100
    assert bounded_result_text("x" * 100) == "x" * 100


def test_a_long_result_keeps_its_head_and_tail_around_a_marker_that_counts_the_cut(settings):
    settings.TOOL_RESULT_MAX_CHARS = 1000
    text = "HEAD" + "." * 2_000_000 + "TAIL"
    cut = bounded_result_text(text)
    assert len(cut) <= 1000
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "1,999,128 characters cut: the result was longer than 1,000 characters" in cut
    marker = re.search(r"\n\[\.\.\. ([\d,]+) characters cut: .*? \.\.\.\]\n", cut)
    assert len(text) - (len(cut) - len(marker[0])) == int(marker[1].replace(",", ""))  # the count is exact


def test_a_result_cannot_bring_nul_or_lone_surrogates():
    assert bounded_result_text("a\x00b\ud800c") == "a\ufffdb\ufffdc"


def test_structured_content_is_kept_only_when_it_can_be_stored_and_fits(settings):
    settings.TOOL_RESULT_MAX_CHARS = 50
    assert bounded_structured({"a": 1}) == {"a": 1}
    assert bounded_structured(None) is None
    assert bounded_structured({"a": "x" * 60}) is None
    assert bounded_structured({"a": "\x00"}) is None
    assert bounded_structured({"a": float("inf")}) is None
    deep = json.loads("[" * 500 + "]" * 500)
    assert bounded_structured({"a": deep}) is None
