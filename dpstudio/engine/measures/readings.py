"""Plain readings of the measures: one sentence a statistician can act on, next to the
number (issue 11).  Used by the CLI summary and the assessment report (and, later, the app).

``reading(measure, value, context)``: ``measure`` is a key of
:func:`dpstudio.engine.measures.evaluate` (``sse_normalized``, ``rl``, ...) or of the survey
risk assessment (``global_risk``, ...); ``context`` may give ``n`` (records compared; RL's
chance level is 100/n), ``k`` and ``attributes``.  Unknown measures, missing or non-finite
values read as ``""``.  The wording follows docs/glossary.md.

>>> reading("sse_normalized", 1.0)
"error about the size of the attribute's spread (typical error ≈ 1 standard deviation)"
>>> reading("rl", 2.5, {"n": 1000})
'2.5 % of records re-identified by nearest-neighbour linkage; chance level 0.1 % = 100/n (n = 1000), 25× chance'
"""

from __future__ import annotations

import math
from typing import Any


def _g(v: float, digits: int = 2) -> str:
    return f"{v:.{digits}g}"


def _pct(v: float) -> str:
    return f"{v:.3g} %"


def _sse_normalized(v: float, ctx: dict) -> str:
    rms = math.sqrt(max(v, 0.0))
    if v < 1e-4:
        what = "almost no error: released values are practically the original ones"
    elif v < 0.05:
        what = "small error against the attribute's spread"
    elif v < 0.5:
        what = "error a noticeable fraction of the attribute's spread"
    elif v < 2.0:
        what = "error about the size of the attribute's spread"
    else:
        what = "error larger than the attribute's spread: little of the original values survives"
    return f"{what} (typical error ≈ {_g(rms)} standard deviation{'s' if rms >= 1.5 else ''})"


def _sse_raw(v: float, ctx: dict) -> str:
    return (
        "sum of squared errors in the attributes' own units (squared); it grows with the "
        "number of records and the attributes' scale: compare releases of the same data only"
    )


def _rl(v: float, ctx: dict) -> str:
    n = ctx.get("n")
    out = f"{_pct(v)} of records re-identified by nearest-neighbour linkage"
    ka = ctx.get("k_anonymous")
    if ka:
        # a k-anonymous release: an intruder who knows a record's key values has at least k
        # candidates, so a guess among them succeeds at most 1/k of the time -- the level to
        # compare with, not 1/n (issue 24 §7: 7.75 % read as '1.1e+03× chance' on a
        # 3-anonymous release)
        lvl = 100.0 / float(ka)
        out += (
            f"; the release is {int(ka)}-anonymous: among the ≥ {int(ka)} records sharing a "
            f"record's key values a guess succeeds at most {_pct(lvl)} of the time"
        )
        out += (
            ", at or below that"
            if v <= lvl
            else f", {_g(v / lvl)}× that: the linkage tells apart records the groups share "
            "(other protected attributes, or suppressed values counted as mismatches)"
        )
        return out
    if n:
        chance = 100.0 / float(n)
        ratio = v / chance if chance > 0 else float("inf")
        out += f"; chance level {_pct(chance)} = 100/n (n = {int(n)})"
        out += f", {_g(ratio)}× chance" if ratio >= 1.5 else ", at or below chance level"
    return out


def _delta(what: str):
    def f(v: float, ctx: dict) -> str:
        return f"the {what} of the protected attributes moves by {_pct(100 * v)} on average (relative)"

    return f


def _corr_mean(v: float, ctx: dict) -> str:
    return f"correlations with the confidential attributes move by {_g(v)} on average (on the −1…1 scale)"


def _corr_std(v: float, ctx: dict) -> str:
    return f"spread of those changes: {_g(v)}"


def _k_min(v: float, ctx: dict) -> str:
    k = ctx.get("k")
    out = f"the smallest group of records sharing their k-quasi values has {int(v)} record(s)"
    if k:
        out += "; k-anonymity holds" if v >= int(k) else f"; fewer than k = {int(k)}: k-anonymity fails"
    return out


def _share_below(v: float, ctx: dict) -> str:
    return f"{_pct(100 * v)} of records are in groups smaller than k"


def _linking(v: float, ctx: dict) -> str:
    return (
        f"{_pct(100 * v)} of records are closest to their own released value within their "
        "equivalence class (an intruder who knows the class links them)"
    )


def _rel_error(v: float, ctx: dict) -> str:
    return f"released ε-quasi values are off by {_pct(100 * v)} of the value on average"


def _suppressed(v: float, ctx: dict) -> str:
    return f"{_pct(v)} of records suppressed"


def _global_risk(v: float, ctx: dict) -> str:
    return f"average re-identification probability {_pct(100 * v)} per record (mean individual risk)"


def _expected(v: float, ctx: dict) -> str:
    return f"about {_g(v, 3)} record(s) expected to be re-identified in the file"


def _sample_uniques(v: float, ctx: dict) -> str:
    return f"{int(v)} record(s) are unique on the key variables in the file (f_k = 1)"


_READERS = {
    "sse_normalized": _sse_normalized,
    "sse_raw": _sse_raw,
    "rl": _rl,
    "delta_mean_avg": _delta("mean"),
    "delta_var_avg": _delta("variance"),
    "corr_loss_mean": _corr_mean,
    "corr_loss_std": _corr_std,
    "k_min_class_size": _k_min,
    "keps_min_class_size": _k_min,
    "k_share_below": _share_below,
    "keps_share_below_k": _share_below,
    "keps_linking_risk": _linking,
    "keps_rel_error": _rel_error,
    "keps_conf_suppressed_pct": _suppressed,
    "keps_ola_suppressed_pct": _suppressed,
    "global_risk": _global_risk,
    "expected_reidentifications": _expected,
    "household_expected_reidentifications": _expected,
    "sample_uniques": _sample_uniques,
}


def reading_context(result: Any, measures: dict | None = None) -> dict:
    """The context of the readings of ``result``'s measures: ``n``, ``k`` and, for a release
    that is k-anonymous, ``k_anonymous`` = its smallest class (record linkage is then read
    against 1/k, not 1/n; issue 24 §7) -- from the measured k-anonymity check when there is
    one (it must hold), else from the method's k-anonymity claim.
    """
    from dpstudio.engine.registry import is_k_anonymous

    params = getattr(result, "params", None) or {}
    k = None if getattr(result, "steps", None) else params.get("k")  # a chain has no one k
    ctx: dict = {"n": len(result.data), "k": k}
    m = measures or {}
    smallest = m.get("k_min_class_size", m.get("keps_min_class_size"))
    share = m.get("k_share_below", m.get("keps_share_below_k", 0.0)) or 0.0
    if smallest is not None:
        if k and smallest >= k and share == 0:
            ctx["k_anonymous"] = int(smallest)
    elif k and not getattr(result, "steps", None) and is_k_anonymous(getattr(result, "method", None)):
        ctx["k_anonymous"] = int(k)
    return ctx


def reading(measure: str, value: Any, context: dict | None = None) -> str:
    """A plain-words reading of ``value`` of ``measure`` ("" when there is none)."""
    f = _READERS.get(str(measure))
    try:
        v = float(value)
    except (TypeError, ValueError):
        return ""
    if f is None or not math.isfinite(v):
        return ""
    return f(v, dict(context or {}))


def readings(measures: dict, context: dict | None = None) -> dict[str, str]:
    """{key: reading} for every scalar measure of an :func:`evaluate` dict that has one."""
    out = {}
    for k, v in (measures or {}).items():
        r = reading(k, v, context) if not isinstance(v, (dict, list, str)) else ""
        if r:
            out[k] = r
    return out


__all__ = ["reading", "readings"]
