"""``recode``: global recoding (sdcMicro's ``globalRecode``, μ-ARGUS's global recoding;
docs/methods.md ``recode``).

* A numeric column becomes intervals: from the user's breaks ``b0 < b1 < … < bm``
  (``--recode AGE=0,15,25,…,100``) -- intervals (b_{i}, b_{i+1}] as R's ``cut()``, except that
  the lowest value b0 belongs to the first interval, [b0, b1] (sdcMicro makes it a missing
  value) -- or from a number of intervals (``AGE=5``, ``equal-width:5``, ``quantile:5``):
  equal-width intervals over the column's declared domain (a fixed map), or, without a
  declared domain, over the data's range as sdcMicro's "equidistant" (min − 1 … max + 1,
  rounded when the rounded breaks stay distinct); quantile breaks are the data's type-7
  quantiles (sdcMicro's "equalAmount"; tied breaks are merged, where sdcMicro jitters them).
  A value outside the breaks is refused (sdcMicro makes it missing); ``-inf``/``inf`` as the
  first/last break leave the ends open.  The released column holds the readable labels
  ``[0, 15]``, ``(15, 25]``, … as an ordered categorical (text in CSV; integer codes 1, 2, …
  with the labels as value labels in .sav/.dta).
* A categorical column gets merged categories: ``--merge MARSTAT=1+2:12,3+4:34`` or a mapping
  file (CSV ``column,from,to``); unnamed categories stay as they are.
* Missing values stay missing; a value is mapped the same wherever it occurs (a function of
  the value only -- of the data too when the breaks are computed from it).  Household
  variables: breaks computed from the data are computed over households (one value each).

No formal privacy guarantee: recoding reduces the detail of keys, its effect on risk is
measured afterwards (k-anonymity, SUDA2, individual risk).  Breaks computed from the data are
data-dependent parameters: said in the guarantee (they show in the released labels) and, with
their values, in the private notes only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    quantile7,
    read_csv_rows,
    text_key,
    value_key,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import NON_NUMERIC_TYPES, Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "recode"

#: Most breaks of one column, most intervals asked by number, most merge groups.
MAX_BREAKS = 10_000
MAX_GROUPS = 100_000

EQUAL_WIDTH = "equal-width"
QUANTILE = "quantile"


# --------------------------------------------------------------------------- grammar


@dataclass(frozen=True)
class Rule:
    """How one numeric column is recoded: given ``breaks``, or ``bins`` intervals computed
    ``how`` ('equal-width', 'quantile'; '' = the method's ``binning``).
    """

    breaks: tuple[float, ...] = ()
    bins: int = 0
    how: str = ""


def parse_breaks(text: str) -> Rule:
    """``'0,15,25,100'`` (breaks, strictly increasing; ``-inf``/``inf`` only at the ends), or
    ``'5'`` / ``'equal-width:5'`` / ``'quantile:5'`` (a number of intervals).

    >>> parse_breaks("0, 15, 100").breaks
    (0.0, 15.0, 100.0)
    >>> parse_breaks("quantile:4")
    Rule(breaks=(), bins=4, how='quantile')
    """
    t = str(text).strip()
    if "\x00" in t:
        raise ValueError("the text holds a NUL character")
    how = ""
    for prefix in (EQUAL_WIDTH, QUANTILE):
        if t.lower().startswith(prefix + ":"):
            how, t = prefix, t[len(prefix) + 1 :].strip()
    parts = [p.strip() for p in t.split(",")]
    if how or len(parts) == 1:
        v = parse_number(parts[0], "the number of intervals") if len(parts) == 1 else math.nan
        if not (len(parts) == 1 and v == int(v) and 1 <= v <= MAX_BREAKS):
            raise ValueError(
                f"a number of intervals must be one whole number in [1, {MAX_BREAKS}] "
                "(for intervals from breaks give at least two: 'a,b')"
            )
        return Rule(bins=int(v), how=how)
    if len(parts) > MAX_BREAKS + 1:
        raise ValueError(f"more than {MAX_BREAKS + 1} breaks")
    b = [parse_number(p, f"break {i + 1}") for i, p in enumerate(parts)]
    for i in range(1, len(b)):
        if not b[i] > b[i - 1]:
            raise ValueError(
                f"breaks must increase strictly; break {i + 1} ({number_text(b[i])}) is not above "
                f"break {i} ({number_text(b[i - 1])})"
            )
    if any(math.isinf(x) for x in b[1:-1]) or b[0] == math.inf or b[-1] == -math.inf:
        raise ValueError("only the first break may be -inf and only the last inf")
    return Rule(breaks=tuple(b))


def parse_merge(text: str) -> list[tuple[tuple[str, ...], str]]:
    """``'1+2:12,3+4:34'`` -> ``[(('1', '2'), '12'), (('3', '4'), '34')]``: groups separated by
    commas, each ``SOURCE+SOURCE+…:TARGET`` (a category in one group only).  Categories
    holding ``,`` ``+`` or ``:`` go in a mapping file.

    >>> parse_merge("1+2:12, 3:x")
    [(('1', '2'), '12'), (('3',), 'x')]
    """
    t = str(text).strip()
    if "\x00" in t:
        raise ValueError("the text holds a NUL character")
    groups = [g.strip() for g in t.split(",")]
    if len(groups) > MAX_GROUPS:
        raise ValueError(f"more than {MAX_GROUPS} groups")
    out: list[tuple[tuple[str, ...], str]] = []
    seen: set[str] = set()
    for g in groups:
        src, sep, target = g.rpartition(":")
        sources = tuple(s.strip() for s in src.split("+"))
        if not sep or not target.strip() or any(not s for s in sources):
            raise ValueError(f"group {g!r} is not SOURCE+SOURCE:TARGET")
        again = [s for s in sources if s in seen]
        if again or len(set(sources)) != len(sources):
            raise ValueError(f"category {(again or list(sources))[0]!r} is in two groups")
        seen.update(sources)
        out.append((sources, target.strip()))
    return out


BREAKS_PARAM = Param(
    "breaks",
    "per-column",
    None,
    "Numeric columns to recode into intervals: COLUMN=b0,b1,…,bm (intervals (b_i, b_i+1], the "
    "lowest value b0 in the first interval [b0, b1]; -inf / inf open the ends), or COLUMN=N "
    "(N intervals by 'binning'), COLUMN=equal-width:N, COLUMN=quantile:N. Equal-width "
    "intervals span the column's declared domain (else the data's range, computed from the "
    "data); quantile breaks are computed from the data.",
    label="intervals (numeric columns)",
    item=parse_breaks,
    item_help="breaks 'b0,b1,…' increasing, or a number of intervals 'N', 'equal-width:N', 'quantile:N'",
    option="recode",
)

MERGE_PARAM = Param(
    "merge",
    "per-column",
    None,
    "Categories to merge: COLUMN=A+B:AB,C+D:CD (A and B become AB, C and D become CD; the "
    "other categories stay). Categories holding ',', '+' or ':' go in a mapping file.",
    label="merge categories",
    item=parse_merge,
    item_help="groups 'A+B:AB' separated by commas",
    option="merge",
    join=",",
)

MERGE_FILE_PARAM = Param(
    "merge_file",
    "str",
    None,
    "A mapping file of merged categories: a CSV with the header 'column,from,to' and one row "
    "per category that changes (UTF-8; separator , ; or tab).",
    label="mapping file",
    advanced=True,
    reads_file=True,
)

BINS_PARAM = Param(
    "bins",
    "int",
    5,
    "When no column is named: the numeric k-quasi-identifiers are recoded into this many "
    "intervals (by 'binning').",
    label="intervals when no column is named",
    minimum=1,
    maximum=MAX_BREAKS,
    advanced=True,
)

BINNING_PARAM = Param(
    "binning",
    "choice",
    EQUAL_WIDTH,
    "How intervals asked by number are made: 'equal-width' (over the declared domain; without "
    "one over the data's range, computed from the data) or 'quantile' (about as many records "
    "in each; breaks computed from the data).",
    label="intervals by number",
    choices=(EQUAL_WIDTH, QUANTILE),
    choice_labels={EQUAL_WIDTH: "Equal width", QUANTILE: "Quantiles (equal counts)"},
)

_PARAMS = (
    BREAKS_PARAM,
    MERGE_PARAM,
    MERGE_FILE_PARAM,
    BINS_PARAM,
    BINNING_PARAM,
    HOUSEHOLD_VARS_PARAM,
    ORDER_PARAM,
)


def targets(params: dict, roles: dict) -> list[str]:
    """The columns named by the parameters (breaks, merges, the mapping file's columns)."""
    named = [*(params.get("breaks") or {}), *(params.get("merge") or {})]
    if params.get("merge_file"):
        named += list(read_merge_file(str(params["merge_file"])))
    return list(dict.fromkeys(named))


# --------------------------------------------------------------------------- intervals


def interval_labels(breaks) -> list[str]:
    """``[b0, b1]``, ``(b1, b2]``, … (the lowest value belongs to the first interval).

    >>> interval_labels([0, 15, 25, float("inf")])
    ['[0, 15]', '(15, 25]', '(25, inf]']
    """
    b = [number_text(x) for x in breaks]
    return [f"[{b[0]}, {b[1]}]"] + [f"({b[i]}, {b[i + 1]}]" for i in range(1, len(b) - 1)]


def assign(x: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """The interval of each value (0-based; −1 for a missing value), or −2 outside the breaks."""
    j = np.searchsorted(breaks, x, side="left")
    code = j - 1
    code[x == breaks[0]] = 0
    code[(x < breaks[0]) | (x > breaks[-1])] = -2
    code[np.isnan(x)] = -1
    return code


def equal_width(lo: float, hi: float, n: int) -> np.ndarray:
    """``n`` equal-width intervals over [lo, hi] (the last break exactly hi)."""
    b = lo + (hi - lo) * np.arange(n + 1, dtype=np.float64) / n
    b[-1] = hi
    return b


def equidistant_sdcmicro(x: np.ndarray, n: int) -> np.ndarray:
    """SdcMicro's "equidistant" breaks: min − 1 … max + 1 in ``n`` steps, rounded (half to
    even, as R) when the rounded breaks stay distinct.
    """
    b = np.linspace(np.nanmin(x) - 1, np.nanmax(x) + 1, n + 1)
    r = np.round(b)
    return r if np.unique(r).size == r.size else b


def quantile_breaks(x: np.ndarray, n: int) -> np.ndarray:
    """The type-7 quantiles at 0, 1/n, …, 1 (sdcMicro's "equalAmount"), ties merged."""
    return np.unique(quantile7(x, np.concatenate([[0.0], np.arange(1, n + 1) / n])))


# --------------------------------------------------------------------------- merging


def read_merge_file(path: str) -> dict[str, list[tuple[tuple[str, ...], str]]]:
    """The groups of a mapping file (CSV ``column,from,to``), per column."""
    rows = read_csv_rows(path, what="mapping file")
    if not rows:
        raise InputError(f"mapping file {path}: empty; it needs the header 'column,from,to'.")
    head = [h.lower() for h in rows[0]]
    if not {"column", "from", "to"} <= set(head):
        raise InputError(
            f"mapping file {path}: the first line must name the columns 'column', 'from' and "
            f"'to'. Got {', '.join(rows[0])!r} instead."
        )
    ic, i_from, i_to = head.index("column"), head.index("from"), head.index("to")
    per: dict[str, dict[str, list[str]]] = {}
    seen: dict[tuple[str, str], str] = {}
    for n, r in enumerate(rows[1:], start=2):
        if len(r) <= max(ic, i_from, i_to) or not r[ic] or not r[i_from] or not r[i_to]:
            raise InputError(f"mapping file {path}, line {n}: needs a column, a 'from' and a 'to' value.")
        col, src, dst = r[ic], r[i_from], r[i_to]
        if (col, src) in seen and seen[(col, src)] != dst:
            raise InputError(
                f"mapping file {path}, line {n}: category {src!r} of column {col!r} is mapped to "
                f"{seen[(col, src)]!r} and to {dst!r}."
            )
        seen[(col, src)] = dst
        per.setdefault(col, {}).setdefault(dst, [])
        if src not in per[col][dst]:
            per[col][dst].append(src)
    return {c: [(tuple(srcs), dst) for dst, srcs in groups.items()] for c, groups in per.items()}


def _merged_categories(s: pd.Series, mapping: dict[str, str]) -> pd.Series:
    """A pandas categorical with merged categories (order: each new category where its first
    member was; ordered stays ordered).
    """
    cats = [str(c) for c in s.cat.categories]
    new = [mapping.get(c, c) for c in cats]
    order = list(dict.fromkeys(new))
    pos = {c: i for i, c in enumerate(order)}
    remap = np.array([pos[c] for c in new] + [-1], dtype=np.int64)
    codes = remap[s.cat.codes.to_numpy()]  # code −1 (missing) -> remap[-1] = −1
    return pd.Series(
        pd.Categorical.from_codes(codes, categories=pd.Index(order), ordered=bool(s.cat.ordered)),
        index=s.index,
    )


def merge_column(s: pd.Series, groups: list[tuple[tuple[str, ...], str]]) -> tuple[pd.Series, dict, int]:
    """``s`` with its categories merged: the new column, the merged codes ``{target:
    [sources]}`` of a numeric column that stays numeric (for value labels), and how many of
    the named categories occur in the data (a fact about the data: private).
    """
    if isinstance(s.dtype, pd.CategoricalDtype):
        mapping = {src: dst for sources, dst in groups for src in sources}
        present = {str(c) for c in s.cat.categories[np.unique(s.cat.codes[s.cat.codes >= 0])]}
        return _merged_categories(s, mapping), {}, sum(src in present for src in mapping)
    numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
    mapping = {text_key(src, numeric): dst for sources, dst in groups for src in sources}
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    keys = [value_key(u) for u in uniques]
    found = sum(k in mapping for k in keys)
    targets_numeric = numeric and all(_is_number(d) for _, d in groups)
    if targets_numeric:
        vals = np.array(
            [float(mapping[k]) if k in mapping else float(u) for k, u in zip(keys, uniques)], dtype=np.float64
        )
        ok = codes >= 0
        out = np.full(len(s), np.nan)
        out[ok] = vals[codes[ok]]
        series = pd.Series(out, index=s.index)
        if pd.api.types.is_integer_dtype(s) and bool(np.all(out[ok] == np.round(out[ok]))):
            series = series.astype(s.dtype)  # int64 (never missing) or the nullable Int64
        merged = {number_text(float(d)): [number_text(float(x)) for x in srcs] for srcs, d in groups}
        return series, merged, found
    texts = np.array([mapping.get(k, k) for k in keys] + [None], dtype=object)
    out_obj = texts[np.where(codes >= 0, codes, len(keys))]
    return pd.Series(out_obj, index=s.index, dtype=object), {}, found


def _is_number(t: str) -> bool:
    try:
        return math.isfinite(float(t))
    except ValueError:
        return False


# --------------------------------------------------------------------------- the guarantee


def _rule_text(c: str, text: str, ctx: GuaranteeContext) -> tuple[str, bool]:
    """What is done to column ``c`` in words, and whether its breaks come from the data."""
    rule = parse_breaks(text)
    if rule.breaks:
        return f"{c} into the intervals {', '.join(interval_labels(rule.breaks))}", False
    how = rule.how or ctx.get("binning", EQUAL_WIDTH)
    run = ((ctx.run or {}).get("recode") or {}).get(c) or {}
    if how == QUANTILE:
        return f"{c} into {rule.bins} intervals at its quantiles (breaks computed from the data)", True
    if run.get("source") == "domain":
        return f"{c} into {rule.bins} equal-width intervals over its declared domain", False
    if run.get("source") == "data":
        return (
            f"{c} into {rule.bins} equal-width intervals over the range of its values (breaks "
            "computed from the data)",
            True,
        )
    return (
        f"{c} into {rule.bins} equal-width intervals over its declared domain (without one: over "
        "the range of its values, computed from the data)",
        True,
    )


def _columns_rules(ctx: GuaranteeContext) -> tuple[dict[str, str], dict[str, str]]:
    """The breaks and merges the guarantee describes (the named ones; else the fallback)."""
    breaks = dict(ctx.get("breaks") or {})
    merges = dict(ctx.get("merge") or {})
    if not breaks and not merges and not ctx.get("merge_file"):
        run = (ctx.run or {}).get("recode") or {}
        if run:
            breaks = {c: str(v["rule"]) for c, v in run.items() if v.get("rule")}
        else:
            breaks = {c: str(ctx.get("bins", 5)) for c in ctx.attributes}
    return breaks, merges


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    """No formal guarantee: what was recoded, how, and what that does not give."""
    breaks, merges = _columns_rules(ctx)
    parts: list[str] = []
    from_data = False
    for c, text in breaks.items():
        words, dd = _rule_text(c, text, ctx)
        parts.append(words)
        from_data = from_data or dd
    for c, text in merges.items():
        groups = parse_merge(text)
        parts.append(f"{c} with categories merged ({'; '.join('+'.join(s) + ' → ' + d for s, d in groups)})")
    if ctx.get("merge_file"):
        parts.append("the categories of the mapping file merged")
    what = "; ".join(parts) if parts else "the named columns"
    clauses = [
        Clause("claim", "Global recoding, no formal privacy guarantee"),
        Clause(
            "mechanism",
            f": {what}. Every value of a recoded column is replaced by its interval or merged "
            "category, the same for equal values (intervals (a, b], the lowest value in the "
            "first); missing values stay missing",
        ),
    ]
    hh = column_list(ctx.get("household_vars"), "household_vars", METHOD_ID)
    if hh:
        clauses.append(
            Clause(
                "mechanism",
                f"; household variables ({', '.join(hh)}) are recoded once per household",
            )
        )
    clauses.append(
        Clause(
            "meaning",
            ". Recoding reduces the detail of the keys; what it achieves is measured afterwards "
            "(k-anonymity, individual risk, SUDA2)",
        )
    )
    if from_data:
        clauses.append(
            Clause(
                "caveat",
                ". Breaks computed from the data show in the released labels",
            )
        )
    clauses += [
        Clause("not-dp", ". Not differential privacy;"),
        Clause("not-covered", " the other columns are released unchanged."),
    ]
    return Guarantee(model=Model.NONE, clauses=tuple(clauses), covered=ctx.attributes)


def effects(ctx: GuaranteeContext) -> Effects:
    """A fixed map for given breaks, merges and equal-width intervals over a declared domain;
    a data-dependent map for breaks computed from the data.
    """
    breaks, merges = _columns_rules(ctx)
    out: dict[str, Effect] = {}
    for c, text in breaks.items():
        out[c] = Effect.DATA_MAP if _rule_text(c, text, ctx)[1] else Effect.FIXED_MAP
    for c in merges:
        out[c] = Effect.FIXED_MAP
    for c in ctx.attributes:
        out.setdefault(c, Effect.FIXED_MAP)
    return Effects(changes=out)


# --------------------------------------------------------------------------- the run


def _numeric_values(s: pd.Series, c: str) -> np.ndarray:
    if not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
        raise ParameterError(
            f"Column {c!r} is not numeric: it cannot be recoded into intervals. Merge its "
            "categories instead (merge / --merge COL=A+B:AB)."
        )
    return s.to_numpy(dtype=np.float64, na_value=np.nan)


def recode_numeric(
    job: Job, c: str, rule: Rule, hh: Households | None, notes: list
) -> tuple[pd.Series, dict]:
    """Column ``c`` as ordered interval labels, and what was done (private info)."""
    s = job.data[c]
    x = _numeric_values(s, c)
    if np.isinf(x).any():
        raise InputError(f"Column {c!r} holds infinite values; recoding needs finite numbers or missing.")
    info: dict = {"rule": parse_breaks_text(rule)}
    if rule.breaks:
        b = np.asarray(rule.breaks, dtype=np.float64)
        info["source"] = "given"
    else:
        basis = x if hh is None else hh.values(s).to_numpy(dtype=np.float64, na_value=np.nan)
        if np.isnan(basis).all():
            raise InputError(f"Column {c!r} has no value to compute breaks from (all missing).")
        how = rule.how or job.params.get("binning", EQUAL_WIDTH)
        if how == QUANTILE:
            b = quantile_breaks(basis, rule.bins)
            info["source"] = "data"
            if b.size - 1 < rule.bins:
                notes.append(
                    notice(
                        "recode-ties",
                        f"Column {c!r}: {rule.bins} quantile intervals asked, {max(b.size - 1, 1)} "
                        "made (tied quantiles merged).",
                    )
                )
        elif c in job.domains:
            lo, hi = job.domains[c]
            b = equal_width(float(lo), float(hi), rule.bins)
            info["source"] = "domain"
        else:
            b = equidistant_sdcmicro(basis, rule.bins)
            info["source"] = "data"
        if b.size == 1:  # one value only: one interval [v, v]
            b = np.array([b[0], b[0]])
        if info["source"] == "data":
            notes.append(
                notice(
                    "recode-breaks-from-data",
                    f"Column {c!r}: breaks computed from the data"
                    + (" (over households)" if hh is not None else "")
                    + f": {', '.join(number_text(v) for v in b)}. They are data-dependent "
                    "parameters (and show in the released labels).",
                )
            )
    info["breaks"] = [float(v) for v in b]
    codes = assign(x, b)
    outside = codes == -2
    if outside.any():
        raise InputError(
            f"Column {c!r}: {int(outside.sum())} value(s) lie outside the breaks "
            f"[{number_text(b[0])}, {number_text(b[-1])}]. Give breaks that cover every value "
            "(or -inf / inf as the first / last break)."
        )
    labels = interval_labels(b) if b[0] != b[-1] else [f"[{number_text(b[0])}, {number_text(b[0])}]"]
    cat = pd.Categorical.from_codes(codes, categories=pd.Index(labels), ordered=True)
    return pd.Series(cat, index=s.index), info


def parse_breaks_text(rule: Rule) -> str:
    """The text of a rule (for the private info and the guarantee of a fallback run)."""
    if rule.breaks:
        return ",".join(number_text(v) for v in rule.breaks)
    return f"{rule.how}:{rule.bins}" if rule.how else str(rule.bins)


def run(job: Job) -> Output:
    p = job.params
    breaks = {c: parse_breaks(t) for c, t in (p.get("breaks") or {}).items()}
    merges: dict[str, list] = {c: parse_merge(t) for c, t in (p.get("merge") or {}).items()}
    if p.get("merge_file"):
        for c, groups in read_merge_file(str(p["merge_file"])).items():
            if c not in job.data.columns:
                raise ParameterError(
                    f"The 'merge_file' parameter of method {METHOD_ID!r}: the mapping file names "
                    f"column {c!r}, which is not in the data."
                )
            merges[c] = merges.get(c, []) + groups
    both = sorted(set(breaks) & set(merges))
    if both:
        raise ParameterError(
            f"Method {METHOD_ID!r}: column {both[0]!r} has both intervals and merged categories; "
            "give it one of them."
        )
    named = bool(breaks or merges)
    cols = list(dict.fromkeys([*breaks, *merges])) if named else []
    if not named:  # no column named: the numeric k-quasi-identifiers into `bins` intervals
        for c in job.columns(*SPEC.protects):
            s = job.data[c]
            if (
                job.types.get(c) not in NON_NUMERIC_TYPES
                and pd.api.types.is_numeric_dtype(s)
                and not pd.api.types.is_bool_dtype(s)
            ):
                breaks[c] = Rule(bins=int(p.get("bins") or 5))
                cols.append(c)
        if not cols:
            raise ParameterError(
                f"Method {METHOD_ID!r} has nothing to recode: name columns with intervals "
                "(breaks / --recode COL=0,10,20) or merged categories (merge / --merge "
                "COL=A+B:AB, or a mapping file)."
            )
    for c in cols:
        if c not in job.data.columns:
            raise ParameterError(f"Method {METHOD_ID!r}: column {c!r} is not in the data.")
        if c in breaks and job.types.get(c) in NON_NUMERIC_TYPES:
            raise ParameterError(
                f"Column {c!r} is typed {job.types[c]}: its codes are categories, not quantities. "
                "Merge its categories instead (merge / --merge COL=A+B:AB), or type it numeric."
            )
    hh_vars = column_list(p.get("household_vars"), "household_vars", METHOD_ID)
    hh = households_for(job, hh_vars, cols)
    new: dict[str, pd.Series] = {}
    notes: list = []
    info: dict = {"recode": {}, "relabel": {}}
    for j, c in enumerate(cols):
        job.check_cancel()
        if c in breaks:
            new[c], info["recode"][c] = recode_numeric(job, c, breaks[c], hh if c in hh_vars else None, notes)
        else:
            new[c], merged, found = merge_column(job.data[c], merges[c])
            info["recode"][c] = {"merged": [[list(s), d] for s, d in merges[c]]}
            if merged:
                info["relabel"][c] = merged
            named_n = sum(len(s) for s, _ in merges[c])
            if found < named_n:
                notes.append(
                    notice(
                        "recode-unknown-category",
                        f"Column {c!r}: {named_n - found} of the {named_n} categories named for "
                        "merging do not occur in the data.",
                    )
                )
        job.progress((j + 1) / len(cols))
    return Output(frame_with(job, new), info=info, warnings=notes, protected=cols)


SPEC = MethodSpec(
    id=METHOD_ID,
    name="Global recoding (intervals, merged categories)",
    family="survey toolbox",
    description="Recodes numeric columns into intervals (given breaks, equal-width or "
    "quantile intervals) and merges categories of categorical ones, as sdcMicro's "
    "globalRecode: the same interval or category for equal values, labels such as "
    "'(15, 25]'. A step of a survey release: measure the risk afterwards. No formal "
    "guarantee.",
    paper=(
        "M. Templ, A. Kowarik, B. Meindl: “Statistical Disclosure Control for Micro-Data Using the R Package sdcMicro”, Journal of Statistical Software 67(4), 2015 (function globalRecode); A. Hundepool et al.: “μ-ARGUS version 5.1 Software and User's Manual”, Statistics Netherlands, 2014"
    ),
    params=_PARAMS,
    protects=(Role.K_QUASI,),
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
