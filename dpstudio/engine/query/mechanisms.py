"""Noise mechanisms of the query desk and the office's comparison with them.

:func:`laplace_sensitivity`: Δ of the Laplace mechanism that answers the same statistic (the
office's plot compares knowledge refinement with it at the same ε).
"""

from __future__ import annotations

import math

from dpstudio.engine.query.ranges import NumericRange


def laplace_sensitivity(
    agg: str,
    support,
    *,
    n: int | None = None,
    n_total: int | None = None,
    value_range: tuple[float, float] | None = None,
) -> tuple[float | None, str]:
    """Δ, the L1 sensitivity (one record added or removed) of the Laplace mechanism that
    answers the same statistic, for the office's comparison with knowledge refinement at the
    same ε (thesis ch. 5: Laplace's scale is Δ/ε; knowledge refinement does not depend on Δ).

    * ``count``: 1;
    * ``proportion``: 1 / ``n_total`` (all records);
    * ``sum``: the width of one record's value range (``value_range``, e.g. the column's
      declared domain; else the declared range of the answer, an upper bound);
    * ``mean``: ≈ width / ``n`` (``n``: the records the filter matched; width as for sum);
    * ``median`` and ``value`` (an individual query): the width of the range (one record can
      move them across it; thesis §5.5: "the sensitivity of the query equals the length of
      Range(f)");
    * ``mode`` and categorical ranges: ``None`` (Laplace noise does not apply).

    Returns (Δ or None, how it was chosen).  PRIVATE for a mean: it depends on ``n``.

    >>> laplace_sensitivity("count", NumericRange(0, 1000, 1))
    (1.0, 'count: Δ = 1')
    >>> laplace_sensitivity("mean", NumericRange(0, 12000, 10), n=600)[0]
    20.0
    """
    if agg == "mode" or not isinstance(support, NumericRange):
        return None, "Laplace noise does not apply to a categorical answer"
    width = float(support.hi - support.lo)
    src = "the declared range"
    if value_range is not None and agg in ("sum", "mean"):
        lo, hi = (float(value_range[0]), float(value_range[1]))
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            width, src = hi - lo, "the column's declared domain"
    if agg == "count":
        return 1.0, "count: Δ = 1"
    if agg == "proportion":
        if not n_total:
            return None, "proportion: no records"
        return 1.0 / n_total, f"proportion: Δ = 1/n = 1/{n_total:,}"
    if agg == "sum":
        return width, f"sum: Δ = width of {src} = {width:g}"
    if agg == "mean":
        if not n:
            return None, "mean: no record matches"
        return width / n, f"mean: Δ ≈ width/n = {width:g}/{n:,} (width of {src})"
    return width, f"{agg}: Δ = width of the declared range = {width:g}"
