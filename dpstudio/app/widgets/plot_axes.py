"""Readable logarithmic axes for the trade-off plots (issue 11 defect 7).

pyqtgraph's log axis labels every minor tick when the range spans about a decade, so the labels
ran into each other ("0.0020.0030.004…"), and it drew none when the data sat inside one decade.
:class:`LogAxis` labels 1, 2, 3, 5 × 10ⁿ, 1, 2, 5 × 10ⁿ or 10ⁿ only (every few decades when they
crowd), whichever fits the axis length, and always at least two values; the other 1…9 × 10ⁿ are
unlabelled minor ticks.  Linear axes are pyqtgraph's own.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

#: Mantissas labelled, densest first; the first whose labels fit the axis is used.
LABEL_SETS = ((1, 2, 3, 5), (1, 2, 5), (1,))


def fmt_number(v: float) -> str:
    """A tick label: 0.002, 20, 5000, 1e-05, 2e+06 (no "2·10⁻³" to decode)."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    if 1e-4 <= abs(v) < 1e6:
        return f"{v:.6g}"
    return f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e+")


def log_ticks(lo: float, hi: float, size_px: float, label_px: float) -> tuple[list[float], list[float]]:
    """(labelled, unlabelled) tick positions in log10 units for the view range [lo, hi]
    (log10 units) on an axis ``size_px`` long whose labels need ``label_px`` each.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo or size_px <= 0:
        return [], []
    decades = hi - lo
    px_per_decade = size_px / decades
    d0, d1 = math.floor(lo), math.ceil(hi)
    all_ticks = [d + math.log10(m) for d in range(d0, d1 + 1) for m in range(1, 10)]
    inside = [t for t in all_ticks if lo <= t <= hi]
    labelled: list[float] = []
    for mset in LABEL_SETS:
        cand = [d + math.log10(m) for d in range(d0, d1 + 1) for m in mset]
        cand = [t for t in cand if lo <= t <= hi]
        gaps = np.diff(cand) * px_per_decade if len(cand) > 1 else np.array([np.inf])
        if len(cand) >= 2 and gaps.min() >= label_px:
            labelled = cand
            break
    if not labelled:  # decades crowd: every n-th decade
        step = max(1, math.ceil(label_px / max(px_per_decade, 1e-9)))
        labelled = [float(d) for d in range(d0, d1 + 1) if d % step == 0 and lo <= d <= hi]
    if len(labelled) < 2:  # inside one decade (or less): two or three round values
        a, b = 10**lo, 10**hi
        step = 10 ** math.floor(math.log10((b - a) / 2)) if b > a else 1.0
        vals = np.arange(math.ceil(a / step) * step, b + step / 2, step)
        if len(vals) > 4:
            vals = vals[:: math.ceil(len(vals) / 3)]
        labelled = sorted({math.log10(v) for v in vals if v > 0 and lo <= math.log10(v) <= hi})
    lab = {round(t, 9) for t in labelled}
    minor = [t for t in inside if round(t, 9) not in lab]
    return labelled, minor


class LogAxis(pg.AxisItem):
    """An axis whose log mode labels only values that fit (see the module docstring)."""

    def __init__(self, orientation: str, **kw) -> None:
        super().__init__(orientation, **kw)
        self._labelled: set[float] = set()

    def logTickValues(self, minVal, maxVal, size, stdTicks):  # noqa: N802,N803 - pyqtgraph API
        vertical = self.orientation in ("left", "right")
        label_px = 18.0 if vertical else 52.0
        labelled, minor = log_ticks(float(minVal), float(maxVal), float(size), label_px)
        self._labelled = {round(t, 9) for t in labelled}
        return [(1.0, labelled), (None, minor)]

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph API
        return [
            fmt_number(float(10**v) * scale) if round(float(v), 9) in self._labelled else "" for v in values
        ]


def log_plot_widget() -> pg.PlotWidget:
    """A white PlotWidget whose axes use :class:`LogAxis`."""
    return pg.PlotWidget(axisItems={"bottom": LogAxis("bottom"), "left": LogAxis("left")})
