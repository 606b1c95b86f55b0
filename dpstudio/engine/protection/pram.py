"""``pram``: the post-randomisation method (sdcMicro's ``pram``; docs/methods.md ``pram``).

Each record's category of a PRAM variable is replaced by a category drawn from its row of a
transition matrix R (R[i, j] = the probability that category i is released as j),
independently per record (per household for a household variable), within each stratum.

sdcMicro's matrix, exactly (``pramWORK``'s ``calcTransitionMatrix``): the diagonal of a basic
matrix P is drawn uniformly in [pd, 1] per category, the rest of each row spread evenly,
P[i, j] = (1 − P[i, i]) / (L − 1); for the category frequencies p of the stratum,
Q[k, j] = P[j, k]·p_j / Σ_l p_l·P[l, k] and R = α·P·Q + (1 − α)·I.  Then p·R = p: invariant
PRAM keeps the expected category frequencies.  ``invariant=false`` uses P itself (no data in
the matrix; frequencies are then biased towards uniform); a user matrix from a file is used as
given (sdcMicro's ``pd = matrix``).

The transition matrix is published with the release (table ``transition_matrix``: variable,
stratum, from, to, probability), as is the norm, so that users can correct their estimates
for the perturbation; for invariant PRAM it is computed from the original category
frequencies of each stratum and reveals them (they are its invariant distribution), which the
guarantee says.  ``publish_matrix=false`` keeps it private.

Guarantee: plausible deniability (a released category is the original with the probability
of the diagonal only), never k-anonymity or differential privacy.
"""

from __future__ import annotations

import math

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
    check_columns,
    column_list,
    file_digest,
    household_column,
    households_for,
    number_text,
    read_csv_rows,
    step_spec,
    text_key,
    value_key,
)
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "pram"
#: The public extra table of the release.
MATRIX_TABLE = "transition_matrix"
#: Above this many categories a PRAM variable gets a private note (a matrix of L² entries).
MANY_CATEGORIES = 200
#: Most categories of a PRAM variable (the matrix has L² entries).
MAX_CATEGORIES = 5_000
#: A user matrix's rows must sum to 1 within this.
ROW_SUM_TOL = 1e-9


def _check_path_text(text: str) -> str:
    t = str(text).strip()
    if "\x00" in t:
        raise ValueError("the file name holds a NUL character")
    return t


PD_PARAM = Param(
    "pd",
    "float",
    0.8,
    "Minimum diagonal probability (sdcMicro's pd): the diagonal of the basic transition matrix "
    "is drawn uniformly in [pd, 1] per category. Larger: fewer changes.",
    label="pd (minimum diagonal)",
    minimum=0.0,
    maximum=1.0,
    min_inclusive=False,
)

ALPHA_PARAM = Param(
    "alpha",
    "float",
    0.5,
    "sdcMicro's alpha: the invariant matrix R is mixed with the identity, α·R + (1 − α)·I "
    "(smaller α: fewer changes). Used by invariant PRAM only.",
    label="α",
    minimum=0.0,
    maximum=1.0,
)

INVARIANT_PARAM = Param(
    "invariant",
    "bool",
    True,
    "Invariant PRAM (sdcMicro's): the matrix keeps the expected category frequencies; it is "
    "computed from the data's frequencies, which the published matrix reveals. Off: the basic "
    "matrix (diagonal in [pd, 1]) as is -- nothing from the data in it, frequencies biased.",
    label="invariant PRAM",
)

VARIABLES_PARAM = Param(
    "variables",
    "str",
    None,
    "The categorical columns to PRAM, comma-separated (e.g. 'EDUC1,MARSTAT'). Empty: the "
    "confidential columns (and those given a matrix file).",
    label="PRAM variables",
)

MATRIX_PARAM = Param(
    "matrix",
    "per-column",
    None,
    "A transition matrix of your own for a column: COLUMN=FILE, a CSV whose first row and "
    "first column name the categories and whose rows sum to 1 (row i: the probabilities that "
    "category i is released as each category). Used as given.",
    label="transition matrix files",
    item=_check_path_text,
    item_help="the path of a transition-matrix CSV",
    option="pram-matrix",
    advanced=True,
    reads_file=True,
)

STRATA_PARAM = Param(
    "strata",
    "str",
    None,
    "Strata, comma-separated columns (e.g. 'REGION,SEX'): the matrix is computed and the "
    "categories drawn within each combination of their values.",
    label="strata",
    advanced=True,
)

PUBLISH_PARAM = Param(
    "publish_matrix",
    "bool",
    True,
    "Publish the transition matrix with the release (table 'transition_matrix'), as is the "
    "norm: users need it to correct their estimates. For invariant PRAM it reveals the "
    "original category frequencies of each stratum (as proportions).",
    label="publish the transition matrix",
)

_PARAMS = (
    VARIABLES_PARAM,
    PD_PARAM,
    ALPHA_PARAM,
    INVARIANT_PARAM,
    MATRIX_PARAM,
    STRATA_PARAM,
    PUBLISH_PARAM,
    HOUSEHOLD_VARS_PARAM,
    ORDER_PARAM,
)


def targets(params: dict, roles: dict) -> list[str]:
    named = column_list(params.get("variables"), "variables", METHOD_ID)
    return list(dict.fromkeys([*named, *(params.get("matrix") or {})]))


# --------------------------------------------------------------------------- the matrix


def basic_matrix(diag: np.ndarray) -> np.ndarray:
    """SdcMicro's basic matrix P: ``diag`` on the diagonal, the rest of each row spread
    evenly over the other L − 1 categories.
    """
    L = diag.size
    if L == 1:
        return np.ones((1, 1))
    P = np.repeat(((1.0 - diag) / (L - 1))[:, None], L, axis=1)
    np.fill_diagonal(P, diag)
    return P


#: Up to this many categories the matrix product is summed in sdcMicro's order (R's
#: reference BLAS: one category l after the other), so the matrix equals sdcMicro's bit for
#: bit; above it numpy's product (differences of an ulp, O(L³) work in either case).
EXACT_ORDER_MAX = 512


def pram_matrix(counts: np.ndarray, diag: np.ndarray, alpha: float, invariant: bool = True) -> np.ndarray:
    """The transition matrix of sdcMicro's ``pram`` for the category ``counts`` of a stratum
    and the drawn diagonal ``diag`` (each in [pd, 1]): R = α·P·Q + (1 − α)·I with
    Q[k, j] = P[j, k]·p_j / Σ_l p_l·P[l, k] (invariant), or P itself (``invariant=False``).

    The operations follow sdcMicro's ``calcTransitionMatrix`` in order -- including its scale
    of p, the counts divided by the sum of the records' level numbers (which cancels), the
    sum s_k correctly rounded (R sums in extended precision) and the product summed over l in
    order -- so that the matrix equals sdcMicro's bit for bit (up to
    :data:`EXACT_ORDER_MAX` categories).

    >>> R = pram_matrix(np.array([30., 10.]), np.array([0.9, 0.8]), alpha=1.0)
    >>> np.allclose(np.array([30., 10.]) @ R, [30., 10.])
    True
    """
    P = basic_matrix(np.asarray(diag, dtype=np.float64))
    if not invariant:
        return P
    L = P.shape[0]
    c = np.asarray(counts, dtype=np.float64)
    scale = float(np.dot(np.arange(1, L + 1, dtype=np.float64), c))  # sdcMicro: sum(as.numeric(x))
    p = c / scale if scale > 0 else np.full(L, 1.0 / L)
    s = np.array([math.fsum(p * P[:, k]) for k in range(L)])  # s_k = Σ_l p_l P[l, k]
    Q = np.zeros((L, L))
    ok = s > 0
    Q[ok] = P.T[ok] * p[None, :] / s[ok, None]
    dead = np.flatnonzero(~ok)
    Q[dead, dead] = 1.0  # a category nobody is released as (pd = 1): its row stays put
    if L <= EXACT_ORDER_MAX:
        R = np.zeros((L, L))
        for k in range(L):  # R[i, j] = Σ_l P[i, l]·Q[l, j], summed l = 1, 2, … as R's BLAS
            R += np.multiply.outer(P[:, k], Q[k, :])
    else:
        R = P @ Q
    return alpha * R + (1.0 - alpha) * np.eye(L)


def draw(codes: np.ndarray, R: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The released category of each record (``codes``: 0..L−1, −1 missing stays −1): the
    category whose cumulative row probability first exceeds the record's uniform ``u``.
    """
    out = np.full(codes.size, -1, dtype=np.int64)
    ok = codes >= 0
    if not ok.any():
        return out
    cum = np.cumsum(R, axis=1)
    cum = cum / cum[:, -1:]  # exactly 1 at the end: u < 1 never falls past a zero tail
    idx = np.flatnonzero(ok)
    L = R.shape[0]
    # records grouped by category: a stable sort of small integer codes is a radix sort in
    # numpy (int16: at most MAX_CATEGORIES categories), linear in the records
    small = codes[idx].astype(np.int16 if L <= np.iinfo(np.int16).max else np.int32)
    order = idx[np.argsort(small, kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(small, minlength=L))))
    for i in range(R.shape[0]):
        rows = order[bounds[i] : bounds[i + 1]]
        if rows.size:
            out[rows] = np.minimum(np.searchsorted(cum[i], u[rows], side="right"), R.shape[0] - 1)
    return out


def read_matrix(path: str, column: str) -> tuple[list[str], np.ndarray]:
    """A user transition matrix: category labels and the L × L probabilities (rows ≥ 0,
    summing to 1 within 1e-9; the same categories in the first row and the first column).
    """
    what = f"transition matrix of column {column!r}"
    rows = read_csv_rows(path, what=what)
    if len(rows) < 2:
        raise InputError(f"{what} {path}: needs a header row of categories and one row per category.")
    labels = rows[0][1:]
    L = len(labels)
    if L == 0 or L > MAX_CATEGORIES or len(set(labels)) != L:
        raise InputError(
            f"{what} {path}: the first row must name each category once (1 to {MAX_CATEGORIES})."
        )
    if len(rows) - 1 != L:
        raise InputError(
            f"{what} {path}: {L} categories in the first row but {len(rows) - 1} rows; it must be square."
        )
    order = {lab: i for i, lab in enumerate(labels)}
    M = np.zeros((L, L))
    seen = set()
    for n, r in enumerate(rows[1:], start=2):
        if len(r) != L + 1 or r[0] not in order or r[0] in seen:
            raise InputError(
                f"{what} {path}, line {n}: a row starts with a category of the first row (each "
                f"once) and holds {L} probabilities."
            )
        seen.add(r[0])
        try:
            vals = [float(x) for x in r[1:]]
        except ValueError:
            raise InputError(f"{what} {path}, line {n}: the probabilities must be numbers.") from None
        if any(not (math.isfinite(v) and 0.0 <= v <= 1.0) for v in vals):
            raise InputError(f"{what} {path}, line {n}: every probability must be in [0, 1].")
        if abs(math.fsum(vals) - 1.0) > ROW_SUM_TOL:
            raise InputError(
                f"{what} {path}, line {n}: the row of category {r[0]!r} sums to "
                f"{math.fsum(vals):.12g}, not 1."
            )
        M[order[r[0]]] = vals
    return labels, M


# --------------------------------------------------------------------------- the guarantee


def _columns(ctx: GuaranteeContext) -> list[str]:
    return list(ctx.attributes) or targets(dict(ctx.params), {})


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    cols = _columns(ctx)
    named = f" of {', '.join(cols)}" if cols else ""
    own = set(ctx.get("matrix") or {})
    strata = column_list(ctx.get("strata"), "strata", METHOD_ID)
    hh = [c for c in column_list(ctx.get("household_vars"), "household_vars", METHOD_ID) if c in cols]
    inv = bool(ctx.get("invariant", True))
    how = (
        f"invariant PRAM as sdcMicro's (the diagonal of the basic matrix drawn in [pd, 1] = "
        f"[{number_text(ctx.get('pd', 0.8))}, 1] per category, mixed with the identity by "
        f"α = {number_text(ctx.get('alpha', 0.5))}: the expected category frequencies are kept)"
        if inv
        else f"the basic matrix (diagonal drawn in [{number_text(ctx.get('pd', 0.8))}, 1] per "
        "category, the rest of each row spread evenly; expected frequencies not kept)"
    )
    if own:
        how = f"the user's matrix for {', '.join(sorted(own))}" + (
            f", {how} for the others" if set(cols) - own else ""
        )
    clauses = [
        Clause("claim", f"Plausible deniability by post-randomisation (PRAM){named}"),
        Clause(
            "mechanism",
            ": each record's category is replaced by one drawn from its row of a transition "
            f"matrix, {how}, independently per record"
            + (f" (per household for {', '.join(hh)})" if hh else "")
            + (f", within the strata of {', '.join(strata)}" if strata else "")
            + "; missing values stay missing",
        ),
        Clause(
            "meaning",
            ". A released category is the original one only with the probability on the "
            "matrix's diagonal, so no released value proves a record's original category",
        ),
        Clause(
            "not-dp",
            ". Not k-anonymity and not differential privacy: a category that rarely changes "
            "still identifies, and the other columns are released unchanged.",
        ),
    ]
    if ctx.get("publish_matrix", True):
        reveal = (
            " For invariant PRAM it is computed from the original category frequencies of "
            "each stratum, which it reveals as proportions."
            if inv and set(cols) - own
            else ""
        )
        clauses.append(
            Clause(
                "caveat",
                f" The transition matrix is published with the release (table "
                f"'{MATRIX_TABLE}') so that users can correct their estimates.{reveal}",
            )
        )
    else:
        clauses.append(Clause("caveat", " The transition matrix is not published."))
    return Guarantee(model=Model.PLAUSIBLE_DENIABILITY, clauses=tuple(clauses), covered=tuple(cols))


def effects(ctx: GuaranteeContext) -> Effects:
    """PRAM perturbs each variable record by record; it reads the strata (and households)."""
    strata = column_list(ctx.get("strata"), "strata", METHOD_ID)
    reads = list(strata)
    if column_list(ctx.get("household_vars"), "household_vars", METHOD_ID):
        reads += ctx.columns(Role.HOUSEHOLD) or []
    return Effects(changes={c: Effect.PERTURB for c in _columns(ctx)}, reads=tuple(dict.fromkeys(reads)))


# --------------------------------------------------------------------------- the run


def _levels(s: pd.Series) -> tuple[np.ndarray, list, bool]:
    """Codes 0..L−1 of a column's categories (−1 missing), the category values (sorted as
    sdcMicro's factor levels: numbers by value, text by text; a pandas categorical keeps its
    categories), and whether they are numbers.
    """
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.cat.codes.to_numpy().astype(np.int64), list(s.cat.categories), False
    numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
    if numeric and pd.api.types.is_integer_dtype(s.dtype) and len(s) and not s.hasnans:
        # whole numbers without missing values: levels by counting (linear), the same levels
        # and codes as the sort below
        xi = s.to_numpy()
        lo, hi = int(xi.min()), int(xi.max())
        if hi - lo <= 4 * len(xi) + 1024:
            present = np.flatnonzero(np.bincount(xi - lo, minlength=hi - lo + 1) > 0)
            lookup = np.full(hi - lo + 1, -1, dtype=np.int64)
            lookup[present] = np.arange(present.size)
            return lookup[xi - lo], (present + lo).astype(np.float64).tolist(), True
    if numeric:
        x = s.to_numpy(dtype=np.float64, na_value=np.nan)
        ok = ~np.isnan(x)
        levels = np.unique(x[ok])
        codes = np.full(x.size, -1, dtype=np.int64)
        codes[ok] = np.searchsorted(levels, x[ok])
        return codes, levels.tolist(), True
    codes, uniques = pd.factorize(s.astype(object).where(s.notna(), None), use_na_sentinel=True)
    texts = [str(u) for u in uniques]
    order = np.argsort(np.array(texts, dtype=object), kind="stable") if texts else np.zeros(0, dtype=np.int64)
    rank = np.empty(len(texts), dtype=np.int64)
    rank[order] = np.arange(len(texts))
    out = np.where(codes >= 0, rank[np.maximum(codes, 0)] if len(texts) else -1, -1).astype(np.int64)
    return out, [texts[i] for i in order], False


def _strata(job: Job, cols: list[str], rows: np.ndarray | None) -> tuple[np.ndarray, list[str]]:
    """The stratum of each record (0..S−1; a missing value is a value of its own) and the
    stratum names ('SEX=1, REGION=3'; 'all' without strata), in order of their names.
    """
    n = job.n if rows is None else rows.size
    if not cols:
        return np.zeros(n, dtype=np.int64), ["all"]
    combined = np.zeros(n, dtype=np.int64)
    uniques = []
    for c in cols:
        s = job.data[c] if rows is None else job.data[c].iloc[rows]
        codes, u = pd.factorize(s, use_na_sentinel=False)
        uniques.append(u)
        combined, _ = pd.factorize(combined * max(len(u), 1) + codes.astype(np.int64))
    combined = combined.astype(np.int64)
    first = np.unique(combined, return_index=True)[1]
    per_col = []
    for c in cols:
        s = job.data[c] if rows is None else job.data[c].iloc[rows]
        per_col.append(s.iloc[first].tolist())
    names = [
        ", ".join(f"{c}={'NA' if pd.isna(v[i]) else value_key(v[i])}" for c, v in zip(cols, per_col))
        for i in range(first.size)
    ]
    order = np.argsort(np.array(names, dtype=object), kind="stable")
    rank = np.empty(first.size, dtype=np.int64)
    rank[order] = np.arange(first.size)
    return rank[combined], [names[i] for i in order]


def _pram_one(
    job: Job,
    c: str,
    rng: np.random.Generator,
    strata_cols: list[str],
    hh: Households | None,
    user: tuple[list[str], np.ndarray] | None,
    notes: list,
) -> tuple[pd.Series, pd.DataFrame, dict]:
    """PRAM of column ``c``: the released column, its transition matrices (long table) and
    the private facts.
    """
    s_all = job.data[c]
    rows = None if hh is None else hh.first
    codes, levels, numeric = _levels(s_all)
    if rows is not None:
        codes = codes[rows]
    if user is not None:  # the user's categories (a superset of the data's)
        labels, M = user
        pos = {text_key(lab, numeric): i for i, lab in enumerate(labels)}
        keys = [value_key(v) for v in levels]
        absent = [k for k in keys if k not in pos]
        if absent:
            raise InputError(
                f"Column {c!r}: category {absent[0]!r} of the data is not in its transition "
                "matrix; the matrix must have a row for every category."
            )
        remap = np.array([pos[k] for k in keys] + [-1], dtype=np.int64)
        codes = remap[np.where(codes >= 0, codes, len(keys))]
        out_levels: list = (
            [float(x) for x in labels] if numeric and all(_is_num(x) for x in labels) else labels
        )
        numeric = numeric and all(_is_num(x) for x in labels)
    else:
        out_levels = levels
    L = len(out_levels)
    if L > MAX_CATEGORIES:
        raise InputError(
            f"Column {c!r} has {L} categories; PRAM handles at most {MAX_CATEGORIES} (a matrix of "
            "L² entries). Recode it first (method 'recode')."
        )
    if L > MANY_CATEGORIES:
        notes.append(
            notice(
                "pram-many-categories",
                f"Column {c!r} has {L} categories: is it categorical? PRAM draws among all of them.",
            )
        )
    strat, names = _strata(job, strata_cols, rows)
    released = np.full(codes.size, -1, dtype=np.int64)
    frames = []
    pd_min = float(job.params.get("pd", 0.8))
    alpha = float(job.params.get("alpha", 0.5))
    inv = bool(job.params.get("invariant", True))
    for si, name in enumerate(names):
        job.check_cancel()
        members = np.flatnonzero(strat == si)
        sc = codes[members]
        if user is not None:
            R = user[1]
        else:
            diag = rng.uniform(pd_min, 1.0, L) if L else np.zeros(0)
            counts = np.bincount(sc[sc >= 0], minlength=L).astype(np.float64)
            R = pram_matrix(counts, diag, alpha, inv) if L else np.zeros((0, 0))
        u = rng.random(members.size)
        released[members] = draw(sc, R, u)
        if L:
            frm, to = np.meshgrid(np.arange(L), np.arange(L), indexing="ij")
            frames.append(
                pd.DataFrame(
                    {
                        "variable": c,
                        "stratum": name,
                        "from": [value_key(out_levels[i]) for i in frm.ravel()],
                        "to": [value_key(out_levels[j]) for j in to.ravel()],
                        "probability": R.ravel(),
                    }
                )
            )
    if numeric:
        lv = np.asarray(out_levels, dtype=np.float64)
        vals = np.where(released >= 0, lv[np.maximum(released, 0)] if L else np.nan, np.nan)
        series: pd.Series = pd.Series(vals)
        if pd.api.types.is_integer_dtype(s_all) and bool(np.all(np.isnan(vals) | (vals == np.round(vals)))):
            series = series.astype(s_all.dtype)
    elif isinstance(s_all.dtype, pd.CategoricalDtype) and user is None:
        series = pd.Series(pd.Categorical.from_codes(released, dtype=s_all.dtype))
    else:
        lv_obj = np.array(list(out_levels) + [None], dtype=object)
        series = pd.Series(lv_obj[np.where(released >= 0, released, L)], dtype=object)
    if hh is not None:
        series = pd.Series(hh.spread(series, s_all.index), index=s_all.index)
    else:
        series.index = s_all.index
    changed = int(np.sum((released != codes) & (codes >= 0)))
    unit = "households" if hh is not None else "values"
    notes.append(
        notice("pram-changed", f"Column {c!r}: PRAM changed {changed} of {int((codes >= 0).sum())} {unit}.")
    )
    if inv and user is None:
        notes.append(
            notice(
                "pram-matrix-from-data",
                f"Column {c!r}: the invariant transition matrix is computed from the category "
                "frequencies of the data" + (" in each stratum" if strata_cols else "") + ".",
            )
        )
    table = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["variable", "stratum", "from", "to", "probability"])
    )
    return series, table, {"categories": L, "strata": len(names), "changed": changed}


def _is_num(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def run(job: Job) -> Output:
    p = job.params
    cols = targets(p, job.roles) or job.columns(*SPEC.protects)
    if not cols:  # pragma: no cover - the API refuses a method without targets first
        raise ParameterError(f"Method {METHOD_ID!r} has no variable to PRAM.")
    check_columns(cols, job, "variables")
    strata = column_list(p.get("strata"), "strata", METHOD_ID)
    check_columns(strata, job, "strata")
    clash = sorted(set(strata) & set(cols))
    if clash:
        raise ParameterError(
            f"The 'strata' parameter of method {METHOD_ID!r} names {clash[0]!r}, a PRAM variable; "
            "strata must be other columns."
        )
    hid = household_column(job)
    if hid in strata:
        raise ParameterError(
            f"The 'strata' parameter of method {METHOD_ID!r} names the household id {hid!r}."
        )
    hh_vars = column_list(p.get("household_vars"), "household_vars", METHOD_ID)
    hh = households_for(job, hh_vars, cols)
    matrices = {c: read_matrix(str(path), c) for c, path in (p.get("matrix") or {}).items()}
    # the draws: the run's stream mixed with the content of the matrix files (a reused seed
    # never reuses draws across contents, as for hierarchies)
    words = [int(w) for w in job.rng.integers(0, 2**32, size=8, dtype=np.uint64)]
    for c in sorted(matrices):
        d = file_digest(str(p["matrix"][c]), what=f"transition matrix of column {c!r}")
        words += [int.from_bytes(d[i : i + 4], "little") for i in range(0, len(d), 4)]
    rng = np.random.default_rng(np.random.SeedSequence(words))
    new: dict = {}
    tables = []
    notes: list = []
    info: dict = {"pram": {}}
    for j, c in enumerate(cols):
        job.check_cancel()
        use_hh = hh if c in hh_vars else None
        if use_hh is not None:
            for sc in strata:
                use_hh.check_constant(job.data[sc], sc)
        new[c], table, info["pram"][c] = _pram_one(job, c, rng, strata, use_hh, matrices.get(c), notes)
        tables.append(table)
        job.progress((j + 1) / len(cols))
    out_tables = {}
    if p.get("publish_matrix", True):
        out_tables[MATRIX_TABLE] = pd.concat(tables, ignore_index=True)
    return Output(frame_with(job, new), info=info, warnings=notes, protected=cols, tables=out_tables)


SPEC = step_spec(
    id=METHOD_ID,
    name="PRAM (post-randomisation of categories)",
    description="Replaces each record's category of the PRAM variables by one drawn from a "
    "transition matrix, as sdcMicro's pram: invariant PRAM keeps the expected category "
    "frequencies; optional strata, a matrix of your own, households drawn as units. The "
    "matrix is published so that users can correct their estimates. Plausible deniability; "
    "not k-anonymity, not differential privacy.",
    paper=(
        "M. Templ, A. Kowarik, B. Meindl: “Statistical Disclosure Control for Micro-Data Using the R Package sdcMicro”, Journal of Statistical Software 67(4), 2015 (function pram); J. M. Gouweleeuw, P. Kooiman, L. C. R. J. Willenborg, P.-P. de Wolf: “Post Randomisation for Statistical Disclosure Control: Theory and Implementation”, Journal of Official Statistics 14(4), 1998"
    ),
    params=_PARAMS,
    protects=(Role.CONFIDENTIAL,),
    guarantee=guarantee,
    run=run,
    targets=targets,
    effects=effects,
)
