"""Clamping pile-up: the share of a noisy attribute's released values that sit on the
bounds of its declared domain (issue 11).

Noise larger than the domain, clamped to it, piles values onto the domain's ends (seen:
every age at 0 or 100, about 80 % of an expenditure at a bound); means and variances are
then biased and the release looks broken.  These shares are computed from the release and
the declared domain; they depend on the data, so they are *private* notes (audit trail,
assessment report), never part of a public file.

>>> import pandas as pd
>>> d = pd.DataFrame({"age": [0, 0, 100, 37]})
>>> s = bound_shares(d, ["age"], {"age": (0, 100)})
>>> s["age"]["lower"], s["age"]["upper"]
(0.5, 0.25)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: a note is written when at least this share of an attribute's values is on a bound
NOTE_THRESHOLD = 0.05

REMEDY = (
    "To reduce it: a larger ε (less noise), a larger k (the noise of a cluster mean "
    "shrinks with k), or a tighter declared domain (the noise scale grows with its width)."
)
REMEDY_NO_K = (
    "To reduce it: a larger ε (less noise), a tighter declared domain (the noise "
    "scale grows with its width), or a method that microaggregates first (its noise "
    "shrinks with k)."
)
#: for methods whose noise scale is each class's own range of values (k-eps): neither the
#: declared domain nor a larger k reduces it (a larger k widens the classes)
REMEDY_CLASS_RANGE = (
    "To reduce it: a larger ε (less noise). The noise scale here is each class's own range of "
    "the ε-quasi-identifiers (summed over them), not the declared domain: a larger k widens the "
    "classes and so raises it; fewer ε-quasi-identifiers, or k-quasi-identifiers that group "
    "records with similar values, lower it."
)


def bound_shares(
    data: pd.DataFrame, columns, domains: dict, precision: dict | None = None
) -> dict[str, dict]:
    """{column: {"lower", "upper", "total", "lb", "ub", "n"}} for every numeric column of
    ``data`` among ``columns`` that has a declared domain.  A value counts as on a bound when
    it is within half a grid step (``precision``) of it, else within 1e-9 of the width.
    """
    from dpstudio.engine.parallel import map_ordered

    precision = precision or {}
    todo = []
    for c in columns:  # the columns taken here, the counts in threads for a large release
        if c not in data.columns or c not in domains or not pd.api.types.is_numeric_dtype(data[c]):
            continue
        todo.append((c, data[c], precision.get(c), *(float(v) for v in domains[c])))
    shares = map_ordered(_bound_share, todo, cells=len(data) * len(todo))
    return {t[0]: sh for t, sh in zip(todo, shares) if sh is not None}


def _bound_share(item) -> dict | None:
    _c, s, g, lb, ub = item
    x = s.to_numpy(dtype=np.float64, na_value=np.nan)
    x = x[np.isfinite(x)]
    if x.size == 0 or not ub > lb:
        return None
    tol = 0.5 * float(g) if g else 1e-9 * (ub - lb)
    lo = float(np.mean(x <= lb + tol))
    hi = float(np.mean(x >= ub - tol))
    return {"lower": lo, "upper": hi, "total": lo + hi, "lb": lb, "ub": ub, "n": int(x.size)}


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %" if v < 0.995 else f"{100 * v:.0f} %"


def _num(v: float) -> str:
    return f"{v:g}"


def pileup_notes(
    shares: dict[str, dict],
    threshold: float = NOTE_THRESHOLD,
    uses_k: bool = True,
    remedy: str | None = None,
) -> list[str]:
    """One private note per attribute with at least ``threshold`` of its values on a bound,
    with what to do (``uses_k``: the method has a k to raise; ``remedy``: the method's own
    advice, e.g. :data:`REMEDY_CLASS_RANGE`, instead of the default).
    """
    notes = []
    for c, s in shares.items():
        if s["total"] < threshold:
            continue
        notes.append(
            f"Pile-up at the domain bounds: {_pct(s['total'])} of the released values of {c!r} "
            f"lie on a bound of its declared domain ({_pct(s['lower'])} at {_num(s['lb'])}, "
            f"{_pct(s['upper'])} at {_num(s['ub'])}): the noise is large against the domain and "
            "clamping piles values onto its ends, which biases the mean and the variance. "
            + (remedy or (REMEDY if uses_k else REMEDY_NO_K))
        )
    return notes


__all__ = [
    "bound_shares",
    "pileup_notes",
    "NOTE_THRESHOLD",
    "REMEDY",
    "REMEDY_NO_K",
    "REMEDY_CLASS_RANGE",
]
