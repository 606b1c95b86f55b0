"""``top-bottom-coding``: top and bottom coding of numeric columns (sdcMicro's
``topBotCoding``; docs/methods.md ``top-bottom-coding``).

``--top INCOME=900000:950000`` replaces every value above 900000 by 950000, ``--bottom
AGE=18`` every value below 18 by 18 (the replacement defaults to the threshold), exactly as
sdcMicro: ``x[x > value] <- replacement`` (``<`` for the bottom).  A threshold may be a
percentile of the data, ``p95``: a data-dependent parameter -- the guarantee says that it was
computed from the data, its value goes to the private notes only (with the replacement
defaulting to it, it shows in the release as the largest value).  Missing values stay
missing.  For a household variable the percentile is taken over households (one value each).

No formal privacy guarantee: top coding hides the extreme values that single out records;
the other values are released unchanged.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.guarantee import Clause, Effect, Effects, Guarantee, GuaranteeContext, Model
from dpstudio.engine.notices import notice
from dpstudio.engine.params import Param
from dpstudio.engine.protection._common import ORDER_PARAM, frame_with
from dpstudio.engine.protection._survey import (
    HOUSEHOLD_VARS_PARAM,
    Households,
    column_list,
    households_for,
    number_text,
    parse_number,
    parse_percentile,
    quantile7,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import NON_NUMERIC_TYPES, Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "top-bottom-coding"

#: Without a named column: the numeric confidential columns are top-coded at this percentile.
FALLBACK_TOP = "p99"


def parse_threshold(text: str) -> tuple[float | None, float | None, float | None]:
    """``'VALUE[:REPLACEMENT]'`` -> (value, percentile, replacement): VALUE a finite number or
    a percentile ``pNN`` (0 < NN < 100; then value is None), REPLACEMENT a finite number
    (None: the threshold).

    >>> parse_threshold("900000:950000")
    (900000.0, None, 950000.0)
    >>> parse_threshold("p95")
    (None, 95.0, None)
    """
    t = str(text).strip()
    if "\x00" in t:
        raise ValueError("the text holds a NUL character")
    head, sep, rep = t.partition(":")
    q = parse_percentile(head, "the threshold")
    value = None
    if q is None:
        value = parse_number(head, "the threshold")
        if not np.isfinite(value):
            raise ValueError("the threshold must be a finite number or a percentile pNN")
    replacement = None
    if sep:
        replacement = parse_number(rep, "the replacement")
        if not np.isfinite(replacement):
            raise ValueError("the replacement must be a finite number")
    return value, q, replacement


TOP_PARAM = Param(
    "top",
    "per-column",
    None,
    "Top coding: COLUMN=VALUE[:REPLACEMENT] -- every value above VALUE becomes REPLACEMENT "
    "(default VALUE). VALUE may be a percentile of the data, e.g. p99 (computed from the data: "
    "a data-dependent parameter).",
    label="top coding",
    item=parse_threshold,
    item_help="a threshold 'VALUE' or 'pNN' (a percentile), optionally ':REPLACEMENT'",
    option="top",
)

BOTTOM_PARAM = Param(
    "bottom",
    "per-column",
    None,
    "Bottom coding: COLUMN=VALUE[:REPLACEMENT] -- every value below VALUE becomes REPLACEMENT "
    "(default VALUE). VALUE may be a percentile of the data, e.g. p1.",
    label="bottom coding",
    item=parse_threshold,
    item_help="a threshold 'VALUE' or 'pNN' (a percentile), optionally ':REPLACEMENT'",
    option="bottom",
)

_PARAMS = (TOP_PARAM, BOTTOM_PARAM, HOUSEHOLD_VARS_PARAM, ORDER_PARAM)


def _rules(params) -> dict[str, dict[str, str]]:
    """Column -> {'top': text, 'bottom': text} as named."""
    out: dict[str, dict[str, str]] = {}
    for side in ("top", "bottom"):
        for c, t in (params.get(side) or {}).items():
            out.setdefault(c, {})[side] = t
    return out


def targets(params: dict, roles: dict) -> list[str]:
    return list(_rules(params))


def _effective_rules(ctx: GuaranteeContext) -> dict[str, dict[str, str]]:
    rules = _rules(ctx.params)
    return rules or {c: {"top": FALLBACK_TOP} for c in ctx.attributes}


# --------------------------------------------------------------------------- the guarantee


def _side_text(c: str, side: str, text: str) -> tuple[str, bool]:
    value, q, rep = parse_threshold(text)
    what = "above" if side == "top" else "below"
    if q is not None:
        at = f"its {number_text(q)}th percentile (a threshold computed from the data)"
        to = f"{number_text(rep)}" if rep is not None else "the threshold"
        return f"{c} {side}-coded at {at}, values {what} it replaced by {to}", True
    to = number_text(rep if rep is not None else value)  # type: ignore[arg-type]
    return f"{c} {side}-coded at {number_text(value)}, values {what} it replaced by {to}", False  # type: ignore[arg-type]


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    parts: list[str] = []
    from_data = False
    for c, sides in _effective_rules(ctx).items():
        for side in ("top", "bottom"):
            if side in sides:
                words, dd = _side_text(c, side, sides[side])
                parts.append(words)
                from_data = from_data or dd
    clauses = [
        Clause("claim", "Top and bottom coding, no formal privacy guarantee"),
        Clause("mechanism", f": {'; '.join(parts) or 'the named columns'}; missing values stay missing"),
    ]
    hh = column_list(ctx.get("household_vars"), "household_vars", METHOD_ID)
    if hh:
        clauses.append(
            Clause("mechanism", f"; household variables ({', '.join(hh)}) are coded once per household")
        )
    clauses.append(
        Clause(
            "meaning",
            ". The extreme values that single out records are hidden; the other values are "
            "released unchanged",
        )
    )
    if from_data:
        clauses.append(
            Clause(
                "caveat",
                ". A percentile threshold is computed from the data; replaced by it, the values "
                "show it in the release",
            )
        )
    clauses += [
        Clause("not-dp", ". Not differential privacy;"),
        Clause("not-covered", " the other columns are released unchanged."),
    ]
    return Guarantee(model=Model.NONE, clauses=tuple(clauses), covered=ctx.attributes)


def effects(ctx: GuaranteeContext) -> Effects:
    """A fixed map for declared thresholds, a data-dependent one for percentiles."""
    out: dict[str, Effect] = {}
    for c, sides in _effective_rules(ctx).items():
        dd = any(parse_threshold(t)[1] is not None for t in sides.values())
        out[c] = Effect.DATA_MAP if dd else Effect.FIXED_MAP
    return Effects(changes=out)


# --------------------------------------------------------------------------- the run


def threshold_value(x: np.ndarray, q: float) -> float:
    """The ``q``-th percentile of the non-missing values (R's type-7 quantile, as sdcMicro's
    reference: ``quantile(x, q / 100)``).
    """
    return float(quantile7(x, [q / 100.0])[0])


def code_column(
    job: Job, c: str, sides: dict[str, str], hh: Households | None, notes: list
) -> tuple[pd.Series | np.ndarray, dict]:
    """Column ``c`` top/bottom-coded, and the private facts of the run."""
    s = job.data[c]
    if (
        not pd.api.types.is_numeric_dtype(s)
        or pd.api.types.is_bool_dtype(s)
        or job.types.get(c) in NON_NUMERIC_TYPES
    ):
        raise ParameterError(
            f"Column {c!r} is not numeric (or typed categorical): top and bottom coding need "
            "quantities. Recode its categories instead (method 'recode')."
        )
    x = s.to_numpy(dtype=np.float64, na_value=np.nan)
    basis = x if hh is None else hh.values(s).to_numpy(dtype=np.float64, na_value=np.nan)
    out = x.copy()
    info: dict = {}
    limits: dict[str, float] = {}
    for side in ("bottom", "top"):
        if side not in sides:
            continue
        value, q, rep = parse_threshold(sides[side])
        if q is not None:
            try:
                value = threshold_value(basis, q)
            except InputError as exc:
                raise InputError(f"Column {c!r}: {exc}.") from None
            notes.append(
                notice(
                    "threshold-from-data",
                    f"Column {c!r}: the {side}-coding threshold p{number_text(q)} is "
                    f"{number_text(value)}, computed from the data"
                    + (" (over households)" if hh is not None else "")
                    + ": a data-dependent parameter.",
                )
            )
        assert value is not None
        limits[side] = value
        r = value if rep is None else rep
        hit = x > value if side == "top" else x < value  # NaN compares False: stays missing
        out[hit] = r
        info[side] = {
            "threshold": value,
            "replacement": r,
            "from_data": q is not None,
            "changed": int(hit.sum()),
        }
    if "top" in limits and "bottom" in limits and limits["bottom"] > limits["top"]:
        raise ParameterError(
            f"Column {c!r}: the bottom-coding threshold ({number_text(limits['bottom'])}) is above "
            f"the top-coding threshold ({number_text(limits['top'])})."
        )
    changed = ", ".join(f"{v['changed']} {k}" for k, v in info.items())
    notes.append(notice("values-coded", f"Column {c!r}: values replaced: {changed}."))
    whole = bool(np.all(np.isnan(out) | (out == np.round(out))))
    if pd.api.types.is_integer_dtype(s) and whole:  # whole replacements keep an integer column
        return pd.Series(out, index=s.index).astype(s.dtype), info
    return out, info


def run(job: Job) -> Output:
    rules = _rules(job.params)
    if not rules:
        cols = [
            c
            for c in job.columns(*SPEC.protects)
            if pd.api.types.is_numeric_dtype(job.data[c])
            and not pd.api.types.is_bool_dtype(job.data[c])
            and job.types.get(c) not in NON_NUMERIC_TYPES
        ]
        if not cols:
            raise ParameterError(
                f"Method {METHOD_ID!r} has nothing to code: name columns with a threshold "
                "(top / --top COL=VALUE[:REPLACEMENT], bottom / --bottom COL=VALUE)."
            )
        rules = {c: {"top": FALLBACK_TOP} for c in cols}
    cols = list(rules)
    hh_vars = column_list(job.params.get("household_vars"), "household_vars", METHOD_ID)
    hh = households_for(job, hh_vars, cols)
    new: dict = {}
    notes: list = []
    info: dict = {"coded": {}}
    for j, c in enumerate(cols):
        job.check_cancel()
        new[c], info["coded"][c] = code_column(job, c, rules[c], hh if c in hh_vars else None, notes)
        job.progress((j + 1) / len(cols))
    return Output(frame_with(job, new), info=info, warnings=notes, protected=cols)


SPEC = MethodSpec(
    id=METHOD_ID,
    name="Top and bottom coding",
    family="survey toolbox",
    description="Replaces every value above a threshold (top coding) or below one (bottom "
    "coding) by a replacement, the threshold by default, as sdcMicro's topBotCoding: "
    "incomes above 900,000 become 900,000. The threshold may be a percentile of the data "
    "(p99). A step of a survey release: measure the risk afterwards. No formal guarantee.",
    paper="M. Templ, A. Kowarik, B. Meindl: “Statistical Disclosure Control for Micro-Data Using the R Package sdcMicro”, Journal of Statistical Software 67(4), 2015 (function topBotCoding)",
    params=_PARAMS,
    protects=(Role.CONFIDENTIAL,),
    requires=(),
    guarantee=guarantee,
    run=run,
    uses_k=False,
    uses_epsilon=False,
    numeric_only=False,
    keeps_missing=True,
    targets=targets,
    effects=effects,
)
