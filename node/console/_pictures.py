"""The console's pictures, drawn on the server as SVG text: a key's history as a timeline and
its federation tally as bars against the consensus threshold.

Pure functions: plain values in (the client's dataclasses and the time `now`), a string
out. No clock, no I/O; the same input always draws the same picture."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from fractions import Fraction
from html import escape

from factnode.client._types import Tally, Version
from factnode.core.consensus import over_threshold

# The node's default `consensus_threshold`; a node's policy may set another (docs/operations/configuration.md).
DEFAULT_THRESHOLD = Fraction(66, 100)

WIDTH = 860
LABEL_WIDTH = 160  # the left column: each row's value
PLOT_WIDTH = 500  # the axis: WIDTH - LABEL_WIDTH - a right margin for end labels
ROW_HEIGHT = 28
BAR_HEIGHT = 16
TOP = 10
# A generous width per character of the 12px labels (console.css), to keep them off lines.
CHAR_WIDTH = Fraction(15, 2)
GAP = 4  # between a bar's end (or the threshold line) and its label


def _num(x: Fraction) -> str:
    """A coordinate in SVG text: exact to a tenth of a pixel, no float rounding."""
    tenths = round(x * 10)
    return str(tenths // 10) if tenths % 10 == 0 else f"{tenths / 10:.1f}"


def percent(threshold: Fraction) -> str:
    """A threshold as the percentage operators read ("66%", "66.7%")."""
    return f"{_num(threshold * 100)}%"


def _label(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _day(at: datetime, precise: bool) -> str:
    return at.strftime("%Y-%m-%d %H:%M") if precise else at.strftime("%Y-%m-%d")


def timeline_svg(versions: Sequence[Version], now: datetime) -> str:
    """Each version's validity intervals on one event-time axis, one row per version.

    The axis runs from the earliest interval start to the latest end or `now`, whichever is
    later; an interval still open ends at `now` and is drawn with the class `open`. A version
    that was served until an operator's resolution chose another (`served_until`) has a bar
    of the class `until-resolution` from its earliest evidence to that resolution; a version
    never believed has a row saying so. Each bar carries a <title> with its exact times."""
    spans = {v.version_id: _until_resolution(v) for v in versions}
    starts = [i.start for v in versions for i in v.intervals]
    starts += [span[0] for span in spans.values() if span is not None]
    ends = [i.end for v in versions for i in v.intervals if i.end is not None]
    ends += [span[1] for span in spans.values() if span is not None]
    if not starts:
        lo, hi = now - timedelta(days=1), now
    else:
        lo, hi = min(starts), max([*ends, now, *starts])
    if hi <= lo:
        hi = lo + timedelta(days=1)
    span = Fraction((hi - lo) // timedelta(microseconds=1))
    precise = hi - lo < timedelta(days=3)

    def x(at: datetime) -> Fraction:
        return LABEL_WIDTH + PLOT_WIDTH * Fraction((at - lo) // timedelta(microseconds=1)) / span

    height = TOP + ROW_HEIGHT * max(1, len(versions)) + 36
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        'aria-label="validity intervals per version on an event-time axis">'
    ]
    for row, v in enumerate(versions):
        y = TOP + ROW_HEIGHT * row
        status = v.status.lower()
        out.append(
            f'<g class="version {escape(status)}" data-version="{escape(v.version_id)}">'
            f'<text x="4" y="{y + 17}">{escape(_label(repr(v.object)))}</text>'
        )
        served = spans[v.version_id]
        if served is not None:
            x0, x1 = x(served[0]), x(max(served))
            out.append(
                f'<rect class="interval until-resolution" x="{_num(x0)}" '
                f'y="{y + (ROW_HEIGHT - BAR_HEIGHT) // 2}" width="{_num(max(x1 - x0, Fraction(2)))}" '
                f'height="{BAR_HEIGHT}"><title>{escape(repr(v.object))} ({escape(status)}): '
                f"believed until the operator's resolution at {escape(served[1].isoformat())}"
                "</title></rect>"
            )
        elif not v.intervals:
            out.append(
                f'<text class="never" x="{LABEL_WIDTH}" y="{y + 17}">never believed ({escape(status)})</text>'
            )
        for i in v.intervals:
            end = i.end if i.end is not None else now
            x0, x1 = x(i.start), x(max(end, i.start))
            width = max(x1 - x0, Fraction(2))  # an instant still shows
            until = i.end.isoformat() if i.end is not None else "now"
            out.append(
                f'<rect class="interval{" open" if i.end is None else ""}" x="{_num(x0)}" '
                f'y="{y + (ROW_HEIGHT - BAR_HEIGHT) // 2}" width="{_num(width)}" '
                f'height="{BAR_HEIGHT}"><title>{escape(repr(v.object))} ({escape(status)}): '
                f"{escape(i.start.isoformat())} .. {escape(until)}</title></rect>"
            )
        out.append("</g>")
    axis_y = TOP + ROW_HEIGHT * max(1, len(versions)) + 6
    right = LABEL_WIDTH + PLOT_WIDTH
    out.append(
        f'<line class="axis" x1="{LABEL_WIDTH}" y1="{axis_y}" x2="{right}" y2="{axis_y}"/>'
        f'<text class="tick" x="{LABEL_WIDTH}" y="{axis_y + 18}">{_day(lo, precise)}</text>'
        f'<text class="tick" x="{right}" y="{axis_y + 18}" text-anchor="end">{_day(hi, precise)}</text>'
    )
    if lo <= now <= hi:
        out.append(
            f'<line class="now" x1="{_num(x(now))}" y1="{TOP}" x2="{_num(x(now))}" '
            f'y2="{axis_y}"><title>now: {escape(now.isoformat())}</title></line>'
        )
    out.append("</svg>")
    return "".join(out)


def _until_resolution(v: Version) -> tuple[datetime, datetime] | None:
    """(from, until) for a version believed at no event time now that was served until an
    operator's resolution: from its earliest evidence's event time to the resolution."""
    if v.intervals or v.served_until is None or not v.evidence:
        return None
    return min(e.valid_from for e in v.evidence), v.served_until


def label_x(bar_end: Fraction, line_x: Fraction, label: str) -> Fraction:
    """Where a bar's share label starts: just after the bar, unless it would then cross the
    threshold line, in which case just after the line (so "62.5%" never overlaps "66%")."""
    start = bar_end + GAP
    if start < line_x + GAP and start + CHAR_WIDTH * len(label) > line_x - GAP:
        return line_x + GAP
    return start


def tally_svg(tallies: Sequence[Tally], threshold: Fraction = DEFAULT_THRESHOLD) -> str:
    """One bar per version, its length its share of the counted weight, and a line at the
    threshold. A bar whose weight is over the threshold (100·W_v > 66·W_total, the node's
    own integer test) has the class `over`; one exactly at it does not."""
    total = sum(t.weight for t in tallies)
    height = TOP + ROW_HEIGHT * max(1, len(tallies)) + 24
    line_x = LABEL_WIDTH + PLOT_WIDTH * threshold
    percent = threshold * 100
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="tally" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="federation tally per version, threshold {_num(percent)}%">'
    ]
    if total == 0:
        out.append(f'<text x="4" y="{TOP + 17}">no votes counted for this key</text></svg>')
        return "".join(out)
    for row, t in enumerate(tallies):
        y = TOP + ROW_HEIGHT * row
        width = PLOT_WIDTH * Fraction(t.weight, total)
        over = over_threshold(t.weight, total, threshold)
        share = f"{t.share_milli // 10}.{t.share_milli % 10}%"
        voters = ", ".join(t.voters) or "no voter"
        text = f"{share} ({voters})"
        out.append(
            f'<g class="bar{" over" if over else ""}{" local" if t.local_belief else ""}" '
            f'data-version="{escape(t.version_id)}">'
            f'<text x="4" y="{y + 17}">{escape(_label(repr(t.object) if t.object else t.version_id[:12]))}</text>'
            f'<rect x="{LABEL_WIDTH}" y="{y + (ROW_HEIGHT - BAR_HEIGHT) // 2}" '
            f'width="{_num(width)}" height="{BAR_HEIGHT}"><title>weight {t.weight:,} of '
            f"{total:,}; votes: {escape(voters)}</title></rect>"
            f'<text class="share" x="{_num(label_x(LABEL_WIDTH + width, line_x, text))}" '
            f'y="{y + 17}">{escape(text)}</text></g>'
        )
    bottom = TOP + ROW_HEIGHT * max(1, len(tallies))
    out.append(
        f'<line class="threshold" x1="{_num(line_x)}" y1="{TOP - 4}" x2="{_num(line_x)}" '
        f'y2="{bottom}"/><text class="threshold-label" x="{_num(line_x)}" y="{bottom + 16}" '
        f'text-anchor="middle">{_num(percent)}% consensus</text></svg>'
    )
    return "".join(out)
