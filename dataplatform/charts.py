"""Server-rendered SVG charts for the metrics dashboard.

Why by hand: the site's CSP (`script-src`/`style-src 'self'`) rules out chart
libraries that inject scripts or inline styles, and a small SVG is enough.

Safety rules, which the tests check:
- every piece of text (title, labels, tooltips) goes through `_text`, i.e.
  `django.utils.html.escape` after dropping characters XML cannot carry; labels
  may be user text (usernames, tags);
- numbers are formatted from floats, never interpolated as given;
- no <script>, no on* handlers, no style= attributes: colours and fonts are SVG
  presentation attributes (fill=, font-size=) plus class= hooks, which a
  stylesheet served from 'self' can override;
- `mark_safe` wraps only the finished SVG built here.
"""

import itertools
import math
import re
from collections.abc import Callable, Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

BAR_FILL = "#4c78a8"
TEXT_FILL = "#333333"
GRID_STROKE = "#dddddd"
AXIS_STROKE = "#888888"
LABEL_MAX_CHARS = 18  # longer labels are cut on the axis; the bar's tooltip keeps them whole
Y_TICKS = 4

# Characters that XML 1.0 does not allow even escaped (most C0 controls, lone surrogates, U+FFFE/F):
# left in, they would make the SVG unparsable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    """Escaped text for element content or an attribute value."""
    return escape(_NOT_XML.sub("", str(value)))


def _num(value: float) -> str:
    """A coordinate: a float with at most two decimals, no trailing zeros."""
    text = f"{float(value):.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def short_number(value: float) -> str:
    """Compact tick and tooltip text: 3, 0.25, 1.5k, 2M."""
    value = float(value)
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^n at or above value (0.25 for nothing)."""
    if value <= 0:
        return 0.25
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value - 1e-12:
            return step * magnitude
    return 10 * magnitude


def _check_values(values: Sequence[float | None]) -> list[float | None]:
    checked: list[float | None] = []
    for value in values:
        if value is None:
            checked.append(None)
            continue
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"Chart values must be finite and non-negative, not {value!r}.")
        checked.append(number)
    return checked


def _size(width: int, height: int) -> tuple[int, int]:
    width, height = int(width), int(height)
    if width < 120 or height < 80:
        raise ValueError("A chart needs at least 120 x 80 pixels.")
    return width, height


class _Frame:
    """Margins, the plot area and the value axis shared by both chart kinds."""

    left, right, top = 52, 16, 34

    def __init__(self, width: int, height: int, bottom: int, top_value: float):
        self.width, self.height, self.bottom = width, height, bottom
        self.plot_width = width - self.left - self.right
        self.plot_height = height - self.top - bottom
        # Ticks fall on round steps (1, 2, 2.5, 5 x 10^n); the axis ends on the last of Y_TICKS steps.
        self.top_value = Y_TICKS * _nice_ceiling(top_value / Y_TICKS)

    def y(self, value: float) -> float:
        return self.top + self.plot_height * (1 - value / self.top_value)

    @property
    def base(self) -> float:
        return self.top + self.plot_height

    def open(self, title: str) -> list[str]:
        w, h = self.width, self.height
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
            f'role="img" aria-label="{_text(title)}" font-family="sans-serif" font-size="11" fill="{TEXT_FILL}">',
            f"<title>{_text(title)}</title>",
            f'<text class="chart-title" x="{_num(w / 2)}" y="20" text-anchor="middle" font-size="14">'
            f"{_text(title)}</text>",
        ]
        for tick in range(Y_TICKS + 1):
            value = self.top_value * tick / Y_TICKS
            y = _num(self.y(value))
            parts.append(f'<line class="chart-grid" x1="{self.left}" y1="{y}" x2="{w - self.right}" y2="{y}" '
                         f'stroke="{GRID_STROKE}"/>')
            parts.append(f'<text class="chart-tick" x="{self.left - 6}" y="{y}" text-anchor="end" '
                         f'dominant-baseline="middle">{_text(short_number(value))}</text>')
        return parts

    def close(self, parts: list[str]) -> SafeString:
        base = _num(self.base)
        parts.append(f'<line class="chart-axis" x1="{self.left}" y1="{base}" x2="{self.width - self.right}" '
                     f'y2="{base}" stroke="{AXIS_STROKE}"/>')
        parts.append("</svg>")
        # Safe: every piece above is markup written here, with all text escaped by _text.
        return mark_safe("".join(parts))

    def bar(self, x: float, width: float, value: float, tooltip: str) -> str:
        y = self.y(value)
        return (f'<g class="chart-bar"><title>{_text(tooltip)}</title>'
                f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(max(width, 0.5))}" '
                f'height="{_num(self.base - y)}" fill="{BAR_FILL}"/></g>')

    def empty(self, parts: list[str]) -> None:
        no_data = gettext("No data")
        parts.append(f'<text class="chart-empty" x="{_num(self.width / 2)}" y="{_num(self.top + self.plot_height / 2)}" '
                     f'text-anchor="middle">{_text(no_data)}</text>')


def _label_step(count: int, room: float, per_label: float) -> int:
    """Show every n-th axis label so that labels do not overlap."""
    fits = max(1, int(room // per_label))
    return max(1, math.ceil(count / fits))


def bar_chart(labels: Sequence[object], values: Sequence[float | None], *, title: str, width: int = 640,
              height: int = 320, value_format: Callable[[float], str] = short_number) -> SafeString:
    """A vertical bar chart: one bar per label. A None value draws no bar (shown as "no data").

    Labels are escaped (they may be user text), marked translate="no" (usernames and tags are names, and
    the callers pass interface labels already translated) and cut to LABEL_MAX_CHARS on the axis;
    the full label and value are in each bar's tooltip (<title>).
    """
    if len(labels) != len(values):
        raise ValueError(f"{len(labels)} labels for {len(values)} values.")
    width, height = _size(width, height)
    checked = _check_values(values)
    frame = _Frame(width, height, bottom=72, top_value=max((v for v in checked if v is not None), default=0))
    parts = frame.open(title)
    if not checked:
        frame.empty(parts)
        return frame.close(parts)
    slot = frame.plot_width / len(checked)
    rotate = slot < 48  # horizontal labels only when each has room
    step = _label_step(len(checked), frame.plot_width, 14 if rotate else 48)
    for index, (label, value) in enumerate(zip(labels, checked, strict=True)):
        x = frame.left + index * slot
        full = str(label)
        if value is not None:
            parts.append(frame.bar(x + slot * 0.1, slot * 0.8, value, f"{full}: {value_format(value)}"))
        else:
            missing = gettext("%(label)s: no data") % {"label": full}
            parts.append(f'<g class="chart-missing"><title>{_text(missing)}</title>'
                         f'<rect x="{_num(x)}" y="{frame.top}" width="{_num(slot)}" '
                         f'height="{_num(frame.plot_height)}" fill="none"/></g>')
        if index % step:
            continue
        shown = full if len(full) <= LABEL_MAX_CHARS else full[: LABEL_MAX_CHARS - 1] + "…"
        cx, ly = _num(x + slot / 2), _num(frame.base + 14)
        if rotate:
            parts.append(f'<text class="chart-label" translate="no" x="{cx}" y="{ly}" text-anchor="end" '
                         f'transform="rotate(-45 {cx} {ly})">{_text(shown)}</text>')
        else:
            parts.append(f'<text class="chart-label" translate="no" x="{cx}" y="{ly}" '
                         f'text-anchor="middle">{_text(shown)}</text>')
    return frame.close(parts)


def histogram(edges: Sequence[float], counts: Sequence[float], *, title: str, width: int = 640, height: int = 320,
              edge_format: Callable[[float], str] = short_number) -> SafeString:
    """A histogram: bin i spans [edges[i], edges[i+1]) and is drawn as wide as that span.

    `edges` has one more entry than `counts` and must increase strictly. Tick labels
    sit on the edges; each bar's tooltip gives its range and count.
    """
    if len(edges) != len(counts) + 1:
        raise ValueError(f"A histogram of {len(counts)} bins needs {len(counts) + 1} edges, not {len(edges)}.")
    width, height = _size(width, height)
    bounds = [float(edge) for edge in edges]
    if not all(math.isfinite(edge) for edge in bounds) or any(b <= a for a, b in itertools.pairwise(bounds)):
        raise ValueError("Histogram edges must be finite and strictly increasing.")
    checked = [value or 0.0 for value in _check_values(counts)]  # an empty bin is a zero, not missing data
    frame = _Frame(width, height, bottom=36, top_value=max(checked, default=0))
    parts = frame.open(title)
    if not checked:
        frame.empty(parts)
        return frame.close(parts)
    low, span = bounds[0], bounds[-1] - bounds[0]

    def x_of(edge: float) -> float:
        return frame.left + frame.plot_width * (edge - low) / span

    for index, count in enumerate(checked):
        a, b = bounds[index], bounds[index + 1]
        last = index == len(checked) - 1
        tooltip = f"[{edge_format(a)}, {edge_format(b)}{']' if last else ')'}: {short_number(count)}"
        parts.append(frame.bar(x_of(a) + 0.5, x_of(b) - x_of(a) - 1, count, tooltip))
    step = _label_step(len(bounds), frame.plot_width, 40)
    last = len(bounds) - 1
    for index, edge in enumerate(bounds):
        # The last edge is worth showing (the range's end) when it does not crowd the label before it.
        if index % step and not (index == last and index % step * 2 >= step):
            continue
        parts.append(f'<text class="chart-label" x="{_num(x_of(edge))}" y="{_num(frame.base + 16)}" '
                     f'text-anchor="middle">{_text(edge_format(edge))}</text>')
    return frame.close(parts)
