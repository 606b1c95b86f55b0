"""The one assess path (issue 22 §2): protect → measure for the command line, the app, the
sweeps and the steps of a chain.

:func:`assess` measures a :class:`~dpstudio.engine.types.ProtectionResult` against the
original records it was made from (``result.original``, aligned through ``result.row_map``)
by the engine's measurement policy (:func:`~dpstudio.engine.measures.measurement_plan`, with
the result's own method(s), roles, column types and hierarchies), at one of the
:data:`LEVELS`:

* ``"summary"`` -- SSE and record linkage (``protect``'s one-line summary); record linkage
  is left out above :data:`RL_SUMMARY_MAX` records (a private notice says so);
* ``"full"`` -- SSE, record linkage, Δ mean/variance, correlation loss, k-anonymity classes
  and the difference of the correlation matrices (the app's Results tab, the private
  assessment report); with a sampling weight, the weighted estimates too;
* ``"step"`` -- what a statistical office reads after every step of a chain (sdcApp's habit):
  SSE, record linkage (left out above :data:`RL_STEP_MAX` records), suppressed key values, the release's
  re-identification risk on its categorical keys (records with f_k < 2, 3, 5, expected
  re-identifications, global risk) and the weighted estimates (totals, means and category
  shares, original vs release, with relative errors).

A method that suppresses key values always adds its suppression measures (the policy).
Everything here is computed against the original data: an :class:`Assessment` is PRIVATE
(the app, the private assessment report, the operator's terminal), never a public file.

A sweep measures many releases of one original: it passes a
:class:`~dpstudio.engine.measures.repeated.Measurer` (``measurer=``), which keeps the plan,
the original's arrays and the array fast path of SSE and record linkage
(:mod:`dpstudio.engine.measures.repeated`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.notices import Notice, notice

#: The measure sets of the levels (a method that suppresses key values adds its own).
LEVELS: dict[str, tuple[str, ...]] = {
    "summary": ("sse", "rl"),
    "full": ("sse", "rl", "delta", "corr", "kanon"),
    "step": ("sse", "rl", "kanon"),
}
#: Record linkage is not computed by the ``summary`` and ``step`` levels above this many
#: records (it is the slowest measure: run ``evaluate`` for it).
RL_SUMMARY_MAX = 300_000
#: The ``step`` level (after every step of a chain, while the user builds it) leaves record
#: linkage out above this many records: on categorical keys it is an exact quadratic search
#: (50,000 records: 2 minutes on a shared machine), and it runs once per step.
RL_STEP_MAX = 20_000

_DEFAULT = object()


@dataclass
class Assessment:
    """The measures of one release (see :func:`assess`).

    ``measures``: the flat dict of :func:`~dpstudio.engine.measures.evaluate` (its
    ``warnings`` included); ``notices``: what the assessment itself has to say (measures
    left out, notes of the weighted estimates), private; ``corr_difference``: (columns,
    corr(release) − corr(original)) at level ``full``; ``risk``: the release's
    re-identification figures on its categorical keys (level ``step``); ``weighted``: the
    weighted estimates.
    """

    level: str
    measures: dict
    notices: list[Notice] = field(default_factory=list)
    corr_difference: tuple[list[str], np.ndarray] | None = None
    risk: dict | None = None
    weighted: Any = None  # WeightedEstimates

    def figures(self) -> dict[str, float]:
        """The scalar figures of this assessment in one flat dict (a row of a step table):
        the scalar measures, the risk figures and the weighted estimates' largest
        relative errors.
        """
        out: dict[str, float] = {}
        for k, v in self.measures.items():
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
                out[k] = float(v)
        for k, v in (self.risk or {}).items():
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
                out[f"risk_{k}"] = float(v)
        if self.weighted is not None:
            out.update(self.weighted.summary())
        return out


def _result_methods(result: Any) -> tuple[str, ...]:
    ms = getattr(result, "methods", None)
    if ms:
        return tuple(ms)
    m = getattr(result, "method", None)
    return (m,) if m else ()


def measurement_plan_of(result: Any, original: pd.DataFrame | None = None):
    """The measurement plan of ``result`` (its method(s), roles, types and hierarchies)."""
    from dpstudio.engine.measures import measurement_plan

    methods = _result_methods(result)
    return measurement_plan(
        result.original if original is None else original,
        method=methods if len(methods) != 1 else methods[0],
        roles=result.roles,
        hierarchies=getattr(result, "hierarchies", None) or None,
        types=getattr(result, "types", None) or None,
    )


def assess(
    result: Any,
    *,
    level: str = "summary",
    measures: Iterable[str] | None = None,
    rl_limit: Any = _DEFAULT,
    weighted: Mapping[str, Iterable[str]] | bool | None = None,
    measurer: Any = None,
    check_cancel: Callable[[], None] | None = None,
) -> Assessment:
    """Measure ``result`` against its original records.

    Parameters
    ----------
    result : ProtectionResult
        A result of :func:`~dpstudio.engine.protect` or a chain (with its original kept).
    level : {"summary", "full", "step"}
        Which measures (see the module docstring and :data:`LEVELS`).
    measures : list of str, optional
        The measure names instead of the level's (a sweep's choice).
    rl_limit : int or None
        Records above which record linkage is left out (default: :data:`RL_SUMMARY_MAX` for
        ``summary``, :data:`RL_STEP_MAX` for ``step``, no limit for ``full``).
    weighted : dict, bool or None
        The weighted estimates' variables, ``{"totals": [...], "means": [...], "shares":
        [...]}``; None: the defaults (:func:`~dpstudio.engine.measures.weighted.default_variables`)
        at level ``step``, and at ``full`` when the data have a sampling weight; False: none.
    measurer : Measurer, optional
        Reuse the plan, caches and fast path of many releases of one original (sweeps).
    check_cancel : callable, optional
        Called between the measures (raises :class:`~dpstudio.engine.errors.Cancelled`).

    Returns
    -------
    Assessment

    Examples
    --------
    >>> import pandas as pd
    >>> from dpstudio import engine
    >>> df = pd.DataFrame({"x": [1., 2., 3., 4., 5., 6.]})
    >>> res = engine.protect(df, "mdav", roles={"x": "k-quasi"}, k=3, seed=1)
    >>> a = engine.assess(res, level="summary")
    >>> round(a.measures["sse_raw"], 6), round(a.measures["rl"], 1)  # records 2 and 5 are their cluster's mean
    (4.0, 33.3)
    """
    if level not in LEVELS:
        raise ParameterError(f"level must be one of {', '.join(LEVELS)}. Got {level!r} instead.")
    check = check_cancel or (lambda: None)
    wanted = tuple(measures) if measures is not None else LEVELS[level]
    notes: list[Notice] = []
    default_limit = {"full": None, "step": RL_STEP_MAX}.get(level, RL_SUMMARY_MAX)
    limit = default_limit if rl_limit is _DEFAULT else rl_limit
    if "rl" in wanted and limit is not None and len(result.data) > int(limit):
        notes.append(
            notice(
                "rl-not-computed",
                f"record linkage is not computed {'after every step' if level == 'step' else 'in the summary'} "
                f"for more than {int(limit):,} records; run 'dpstudio evaluate' for it.",
            )
        )
        wanted = tuple(m for m in wanted if m != "rl")
    if measurer is not None:
        ev = measurer.measure(result)
        return Assessment(level=level, measures=ev, notices=notes)
    orig = result.aligned_original()
    plan = None
    if level == "step":
        plan = measurement_plan_of(result, orig)
        if plan.keys and "suppressed" not in wanted:
            wanted = (*wanted, "suppressed")
    from dpstudio.engine.measures import evaluate

    methods = _result_methods(result)
    ev = evaluate(
        orig,
        result.data,
        result.protected_attributes,
        measures=wanted,
        result=result,
        hierarchies=getattr(result, "hierarchies", None) or None,
        types=getattr(result, "types", None) or None,
        plan=plan,
        method=methods if len(methods) > 1 else None,
    )
    out = Assessment(level=level, measures=ev, notices=notes)
    check()
    if level == "full":
        from dpstudio.engine.measures.utility import correlation_difference

        conf = [c for c, r in result.roles.items() if r == "confidential"]
        cols = list(dict.fromkeys(list(result.protected_attributes) + conf))
        out.corr_difference = correlation_difference(orig, result.data, cols)
    if level == "step":
        assert plan is not None
        if plan.keys:
            out.risk = release_risk_figures(result.data, plan.keys, plan.weight, plan.household)
            check()
    if weighted is not False and (weighted or level == "step" or (level == "full" and _weight_of(result))):
        out.weighted = weighted_of(result, weighted if isinstance(weighted, Mapping) else None)
        notes.extend(notice("weighted-estimates", n) for n in out.weighted.notes)
    return out


def _weight_of(result: Any) -> str | None:
    return next((c for c, r in result.roles.items() if str(getattr(r, "value", r)) == "weight"), None)


def weighted_of(result: Any, variables: Mapping[str, Iterable[str]] | None = None):
    """The weighted estimates of ``result`` (original vs release) for ``variables``
    (``{"totals": [...], "means": [...], "shares": [...]}``; None, or ``"default": True``
    among them: :func:`~dpstudio.engine.measures.weighted.default_variables`, with the
    variables given added).
    """
    from dpstudio.engine.measures.weighted import default_variables, weighted_estimates

    original = result.original
    if variables is None or variables.get("default"):
        plan = measurement_plan_of(result)
        base = default_variables(original, result.roles, getattr(result, "types", None), plan.keys)
        given = {k: list(v) for k, v in (variables or {}).items() if k != "default"}
        variables = {
            k: list(dict.fromkeys([*base.get(k, ()), *given.get(k, ())]))
            for k in ("totals", "means", "shares")
        }
    return weighted_estimates(
        original,
        result.data,
        weight=_weight_of(result),
        totals=variables.get("totals", ()),
        means=variables.get("means", ()),
        shares=variables.get("shares", ()),
    )


def original_figures(result: Any) -> dict[str, float]:
    """The "before" row of a chain's step table: the re-identification figures of the
    original records (the result's prepared original) on the release's categorical keys, in
    the keys of :meth:`Assessment.figures` (``risk_…``); empty without categorical keys.
    PRIVATE, like every assessment.
    """
    plan = measurement_plan_of(result)
    if not plan.keys:
        return {}
    risk = release_risk_figures(result.original, plan.keys, plan.weight, plan.household)
    return {f"risk_{k}": float(v) for k, v in risk.items()}


def release_risk_figures(
    df: pd.DataFrame, keys: Iterable[str], weight: str | None = None, household: str | None = None
) -> dict:
    """SdcMicro's risk figures of a file on its categorical ``keys`` (a missing value matches
    any value): records with f_k < 2, 3, 5, sample uniques, key combinations, expected
    re-identifications, global risk (and the household figure with a household column).
    Used for the original and for the release after every step of a chain.
    """
    from dpstudio.engine.measures.survey_risk import assess_risk

    keys = [str(k) for k in keys]
    w = weight if weight is not None and weight in df.columns else None
    h = household if household is not None and household in df.columns else None
    rep = assess_risk(df, keys, weight=w, household=h)
    d = rep.to_dict()
    out = {
        k: d[k]
        for k in (
            "records",
            "key_combinations",
            "sample_uniques",
            "records_fk_lt_2",
            "records_fk_lt_3",
            "records_fk_lt_5",
            "expected_reidentifications",
            "global_risk",
        )
    }
    if "household_expected_reidentifications" in d:
        out["household_expected_reidentifications"] = d["household_expected_reidentifications"]
    return out


__all__ = [
    "Assessment",
    "LEVELS",
    "RL_STEP_MAX",
    "RL_SUMMARY_MAX",
    "assess",
    "original_figures",
    "release_risk_figures",
    "weighted_of",
]
