"""What the survey-toolbox steps (``recode``, ``top-bottom-coding``, ``pram``; issue 23) share:
lists of columns in a parameter, household variables (one value per household, protected once
per household), number formatting of labels, reading a small CSV settings file.

A *household variable* (household size, region, household income) is constant within a
household (the column with role ``household``).  A step that protects it works on one value
per household -- the first record's -- and gives every member of the household the result:
a data-dependent threshold or break is computed over households, not persons, and PRAM draws
once per household, so a household is never split across categories.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.params import Param
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job

HOUSEHOLD_VARS_PARAM = Param(
    "household_vars",
    "str",
    None,
    "Household variables, comma-separated (e.g. 'HHSIZE,REGION,HHINCOME'): constant within a "
    "household (the column with role 'household'), protected once per household -- breaks or "
    "thresholds computed from the data over households, PRAM drawn once per household -- so "
    "that a household is never split across categories. Each must be constant within every "
    "household.",
    label="household variables",
    advanced=True,
)

#: Most columns a list parameter may name (a data set's columns are far fewer).
MAX_LISTED = 10_000


def column_list(text: str | None, name: str, method_id: str) -> list[str]:
    """``'A, B'`` -> ``['A', 'B']`` (None or empty: ``[]``); a name given twice is refused."""
    if text is None or not str(text).strip():
        return []
    names = [t.strip() for t in str(text).split(",")]
    if any(not n for n in names) or len(names) > MAX_LISTED or len(set(names)) != len(names):
        raise ParameterError(
            f"The {name!r} parameter of method {method_id!r} must be a str of column names "
            f"separated by commas, each named once. Got {text!r} instead."
        )
    return names


def check_columns(cols: list[str], job: Job, name: str) -> None:
    """Every column of ``cols`` is in the data."""
    missing = [c for c in cols if c not in job.data.columns]
    if missing:
        raise ParameterError(
            f"The {name!r} parameter of method {job.method!r} names column(s) not in the data: "
            f"{', '.join(map(repr, missing))}. Available columns: {', '.join(map(str, job.data.columns))}."
        )


def household_column(job: Job) -> str | None:
    """The household-id column (role ``household``), or None."""
    return next((c for c, r in job.roles.items() if r is Role.HOUSEHOLD), None)


class Households:
    """The households of a job's records: ``codes`` (household of each record, 0..H−1; a
    record without a household id is a household of its own) and ``first`` (the first record
    of each household).  :meth:`values` and :meth:`spread` move a household variable between
    the records and the households.
    """

    def __init__(self, job: Job, hid: str):
        from dpstudio.engine.protection._common import household_ids

        self.column = hid
        codes = household_ids(job)
        self.codes = codes
        self.n = int(codes.max()) + 1 if codes.size else 0
        # the first record of each household (codes are 0..H−1 in order of appearance)
        self.first = np.unique(codes, return_index=True)[1].astype(np.int64)

    def values(self, s: pd.Series) -> pd.Series:
        """One value per household (its first record's)."""
        return s.iloc[self.first].reset_index(drop=True)

    def spread(self, per_household: pd.Series | np.ndarray, index: pd.Index) -> pd.Series | np.ndarray:
        """The households' values given to every member (a Series keeps its dtype)."""
        if isinstance(per_household, pd.Series):
            out = per_household.iloc[self.codes]
            out.index = index
            return out
        return np.asarray(per_household)[self.codes]

    def check_constant(self, s: pd.Series, column: str) -> None:
        """Refuse a household variable that differs between members of a household."""
        first = self.values(s).iloc[self.codes].reset_index(drop=True)
        own = s.reset_index(drop=True)
        same = (first == own) | (first.isna() & own.isna())
        if not bool(same.all()):
            bad = int((~same.to_numpy()).sum())
            raise InputError(
                f"Column {column!r} is declared a household variable but differs between the "
                f"members of a household ({bad} record(s) differ from their household's first "
                f"record, household id column {self.column!r}). Make it constant within each "
                "household, or do not declare it a household variable."
            )


def households_for(job: Job, household_vars: list[str], targets: list[str]) -> Households | None:
    """The households of ``job`` when some target is a household variable (checked constant
    within households); None otherwise.  Household variables need a household-id column.
    """
    if not household_vars:
        return None
    hid = household_column(job)
    if hid is None:
        raise ParameterError(
            f"The 'household_vars' parameter of method {job.method!r} needs a household-id "
            "column: give it the role 'household' (--role COL=household)."
        )
    if hid in household_vars:
        raise ParameterError(
            f"The 'household_vars' parameter of method {job.method!r} names the household id "
            f"{hid!r} itself; name the variables that are constant within a household."
        )
    check_columns(household_vars, job, "household_vars")
    hh = Households(job, hid)
    for c in household_vars:
        if c in targets:
            hh.check_constant(job.data[c], c)
    return hh


# --------------------------------------------------------------------------- numbers as text


def number_text(x: float) -> str:
    """A break or threshold as text, 15 significant digits at most (``15``, ``0.1``,
    ``-inf``, ``1e+20``; a quantile 460080.00000000006 reads 460080, as R prints it).
    """
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    t = f"{x:.15g}"
    return "0" if t == "-0" else t


def parse_number(text: str, what: str) -> float:
    """A number of a parameter's text (``ValueError`` naming ``what`` when it is not one)."""
    t = text.strip()
    if "\x00" in t:
        raise ValueError(f"{what} holds a NUL character")
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"{what} {t!r} is not a number") from None
    if math.isnan(v):
        raise ValueError(f"{what} is NaN")
    return v


def parse_percentile(text: str, what: str) -> float | None:
    """``'p95'`` -> 95.0 (a percentile in (0, 100)); None when ``text`` is not ``pNN``."""
    t = text.strip().lower()
    if not t.startswith("p") or len(t) < 2:
        return None
    v = parse_number(t[1:], what)
    if not 0 < v < 100:
        raise ValueError(f"{what} {text!r} must be a percentile p0 < pNN < p100")
    return v


def quantile7(x: np.ndarray, probs) -> np.ndarray:
    """R's type-7 quantiles of the non-missing values of ``x`` at ``probs`` (the default of
    R's ``quantile``, which sdcMicro's references use), computed with R's operations in R's
    order so that the results are equal to the last digit: index = 1 + (n − 1)·p,
    q = (1 − h)·x[lo] + h·x[hi] where the two order statistics differ.

    >>> quantile7(np.array([1.0, 2.0, 3.0, 4.0, np.nan]), [0, 0.5, 1])
    array([1. , 2.5, 4. ])
    """
    v = np.sort(x[~np.isnan(x)])
    n = v.size
    if n == 0:
        raise InputError("no value to compute a quantile from (all missing)")
    p = np.asarray(probs, dtype=np.float64)
    index = 1.0 + max(n - 1, 0) * p
    lo = np.floor(index).astype(np.int64)
    hi = np.ceil(index).astype(np.int64)
    qs = v[lo - 1].copy()
    xhi = v[hi - 1]
    i = (index > lo) & (xhi != qs)
    h = (index - lo)[i]
    qs[i] = (1.0 - h) * qs[i] + h * xhi[i]
    return qs


# --------------------------------------------------------------------------- settings files


def read_csv_rows(path: str, *, what: str, max_bytes: int = 64 * 2**20) -> list[list[str]]:
    """The rows of a small CSV settings file (a mapping of categories, a transition matrix):
    a regular file only (never a FIFO or device: :func:`dpstudio.engine.io.read_small_file`),
    UTF-8 (a BOM is skipped), separator ``,`` ``;`` or tab (sniffed from the first line).
    """
    from dpstudio.engine.io import read_small_file

    raw = read_small_file(path, what=what, max_bytes=max_bytes)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{what} {path}: not UTF-8 text; save it as UTF-8 CSV.") from None
    if "\x00" in text:
        raise InputError(f"{what} {path}: holds NUL characters; it is not a CSV text file.")
    first = text.split("\n", 1)[0]
    sep = max((",", ";", "\t"), key=first.count)
    try:
        rows = [r for r in csv.reader(io.StringIO(text), delimiter=sep) if any(x.strip() for x in r)]
    except csv.Error as exc:
        raise InputError(f"{what} {path}: not a readable CSV ({exc}).") from None
    return [[x.strip() for x in r] for r in rows]


def file_digest(path: str, *, what: str) -> bytes:
    """SHA-256 of a settings file's bytes (a run's randomness is keyed on the content of the
    files it reads, as on hierarchies: a reused seed never reuses draws across contents).
    """
    from dpstudio.engine.io import read_small_file

    return hashlib.sha256(read_small_file(path, what=what)).digest()


def value_key(v) -> str:
    """How a category value is compared with the text of a parameter: numbers by value
    (``1``, ``1.0`` and ``"1"`` are one category), everything else as its text.
    """
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return number_text(f) if math.isfinite(f) else str(f)
    return str(v)


def text_key(t: str, numeric: bool) -> str:
    """A parameter's category text as :func:`value_key` of the column's values: a number in a
    numeric column (``'01'`` and ``'1.0'`` are the category 1).
    """
    if numeric:
        try:
            f = float(t)
        except ValueError:
            return t
        if math.isfinite(f):
            return number_text(f)
    return t
