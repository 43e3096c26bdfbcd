import re
import xml.etree.ElementTree as ET

import pytest
from django.utils.safestring import SafeString

from dataplatform.charts import bar_chart, histogram

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script>'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def assert_no_active_content(svg: str) -> None:
    root = parse(svg)
    for element in root.iter():
        assert element.tag != f"{SVG}script" and element.tag != f"{SVG}foreignObject"
        for name in element.attrib:
            assert not name.lower().startswith("on"), name
            assert name != "style" and name != "href" and not name.endswith("}href"), name
    assert "<script" not in svg and "style=" not in svg


def texts(svg: str) -> list[str]:
    return [element.text or "" for element in parse(svg).iter() if element.tag in (f"{SVG}text", f"{SVG}title")]


def test_bar_chart_draws_one_bar_per_value_scaled_to_the_axis():
    svg = bar_chart(["a", "b", "c"], [1, 4, 2], title="Ranks")
    assert isinstance(svg, SafeString)
    root = parse(svg)
    heights = [float(rect.get("height")) for rect in root.iter(f"{SVG}rect")]
    assert len(heights) == 3
    assert heights[1] == pytest.approx(4 * heights[0]) and heights[2] == pytest.approx(2 * heights[0])
    assert {"Ranks", "a", "b", "c", "a: 1", "b: 4"} <= set(texts(svg))
    assert root.get("role") == "img" and root.get("aria-label") == "Ranks"


def test_hostile_labels_and_titles_come_out_escaped():
    svg = bar_chart([HOSTILE, 'x" onload="alert(1)', "&amp;"], [1, 2, 3], title=f"by {HOSTILE}")
    assert_no_active_content(svg)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert 'x" onload' not in svg and "x&quot; onload=&quot;alert(1)" in svg
    assert "&amp;amp;" in svg  # text is escaped as given, never treated as markup
    assert parse(svg).get("aria-label") == f"by {HOSTILE}"  # the parser recovers the exact text
    assert f"by {HOSTILE}" in texts(svg)
    assert f"{HOSTILE}: 1" in texts(svg)  # whole in the tooltip (the axis label is cut)


def test_histogram_escapes_its_title_and_parses():
    svg = histogram([0, 0.5, 1], [3, 1], title=HOSTILE)
    assert_no_active_content(svg)
    assert "&lt;script&gt;" in svg and HOSTILE in texts(svg)


def test_characters_xml_cannot_carry_are_dropped():
    svg = bar_chart(["nul\x00bell\x07", "emoji 🐼", "\ufffe"], [1, 1, 1], title="ctl\x1b")
    assert_no_active_content(svg)
    assert "nulbell" in texts(svg) and "emoji 🐼" in texts(svg) and "ctl" in texts(svg)


def test_long_labels_are_cut_on_the_axis_but_whole_in_the_tooltip():
    label = "annotator-with-a-very-long-name"
    svg = bar_chart([label], [5], title="t")
    assert "annotator-with-a-…" in texts(svg)
    assert f"{label}: 5" in texts(svg)


def test_many_bars_rotate_and_thin_their_labels():
    labels = [f"r{n}" for n in range(1, 101)]
    svg = bar_chart(labels, list(range(100)), title="many", width=400)
    root = parse(svg)
    axis_labels = [el for el in root.iter(f"{SVG}text") if el.get("class") == "chart-label"]
    assert 1 < len(axis_labels) < 100
    assert all(el.get("transform", "").startswith("rotate(-45") for el in axis_labels)
    assert len(list(root.iter(f"{SVG}rect"))) == 100


def test_missing_values_draw_no_bar_and_empty_data_says_so():
    svg = bar_chart(["ann", "bob"], [2.0, None], title="per hour")
    bars = [g for g in parse(svg).iter(f"{SVG}g") if g.get("class") == "chart-bar"]
    assert len(bars) == 1 and "bob: no data" in texts(svg)
    empty = bar_chart([], [], title="nothing yet")
    assert "No data" in texts(empty) and not list(parse(empty).iter(f"{SVG}rect"))
    assert "No data" in texts(histogram([0], [], title="none"))


def test_all_zero_values_still_draw_a_sane_axis():
    svg = bar_chart(["a", "b"], [0, 0], title="zeros")
    heights = [float(rect.get("height")) for rect in parse(svg).iter(f"{SVG}rect")]
    assert heights == [0, 0]
    assert "1" in texts(svg)  # the axis tops out at 1, not at 0 (no division by zero)


@pytest.mark.parametrize("top, ticks", [(1 / 3, ["0", "0.1", "0.2", "0.3", "0.4"]), (7, ["0", "2", "4", "6", "8"]),
                                        (99, ["0", "25", "50", "75", "100"]), (4000, ["0", "1k", "2k", "3k", "4k"])])
def test_the_value_axis_has_round_ticks(top, ticks):
    svg = bar_chart(["a"], [top], title="t")
    assert [el.text for el in parse(svg).iter(f"{SVG}text") if el.get("class") == "chart-tick"] == ticks


def test_histogram_bars_are_as_wide_as_their_bins():
    svg = histogram([0, 0.2, 0.4, 1.0], [1, 2, 3], title="fork position")
    rects = list(parse(svg).iter(f"{SVG}rect"))
    widths = [float(rect.get("width")) + 1 for rect in rects]  # one pixel gap between bars
    assert widths[2] == pytest.approx(3 * widths[0], abs=0.05) and widths[1] == pytest.approx(widths[0], abs=0.05)
    tooltips = [t for t in texts(svg) if t.startswith("[")]
    assert tooltips == ["[0, 0.2): 1", "[0.2, 0.4): 2", "[0.4, 1]: 3"]
    assert {"0", "0.2", "0.4", "1"} <= set(texts(svg))


def test_numbers_are_formatted_not_interpolated():
    svg = bar_chart(["a"], [1 / 3], title="t", width=641.7, height=300)
    assert re.search(r'viewBox="0 0 641 300"', svg)
    assert all(re.fullmatch(r"-?\d+(\.\d{1,2})?", value)
               for value in re.findall(r'\s(?:x|y|width|height)="([^"]*)"', svg))


@pytest.mark.parametrize("call, message", [
    (lambda: bar_chart(["a", "b"], [1], title="t"), "2 labels for 1 values"),
    (lambda: bar_chart(["a"], [-1], title="t"), "non-negative"),
    (lambda: bar_chart(["a"], [float("nan")], title="t"), "finite"),
    (lambda: bar_chart(["a"], ["1); alert(1"], title="t"), "could not convert"),
    (lambda: bar_chart(["a"], [1], title="t", width=10), "at least"),
    (lambda: histogram([0, 1], [1, 2], title="t"), "needs 3 edges"),
    (lambda: histogram([0, 1, 1], [1, 2], title="t"), "strictly increasing"),
])
def test_bad_input_is_refused(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()
