"""Declared ranges of an answer and the researcher's priors over them (thesis Definition 10).

A range is DECLARED, never read from the data: :class:`NumericRange` (the grid lo, lo + step,
…, ≤ hi; at most :data:`MAX_SUPPORT` points) or :class:`CategoricalRange`.  A prior is
quantised once to integer weights (data independent, total ≈ :data:`PRIOR_TOTAL`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query.parser import (
    _INT_LITERAL,
    MAX_NUMBER_CHARS,
    Query,
    _col,
    _key,
    _plain,
)

PRIOR_TOTAL = 1 << 52  # the prior is quantised to integer weights summing to about this
MAX_SUPPORT = 200_001  # grid points of a numeric range


# =========================================================================== ranges and priors


@dataclass(frozen=True)
class NumericRange:
    """The declared range of a numeric answer: the grid lo, lo + step, …, ≤ hi."""

    lo: float
    hi: float
    step: float | None = None

    def __post_init__(self):
        lo, hi = float(self.lo), float(self.hi)
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
            raise ParameterError(
                f"Declared range {lo:g}:{hi:g} is empty: write LOWER:UPPER with LOWER < UPPER."
            )
        step = self.step
        if step is None:
            step = 10.0 ** (math.floor(math.log10(hi - lo)) - 3)
        step = float(step)
        if not step > 0 or not math.isfinite(step):
            raise ParameterError(f"The step of range {lo:g}:{hi:g} must be a number > 0.")
        n = math.floor((hi - lo) / step * (1 + 1e-12)) + 1
        if n > MAX_SUPPORT:
            raise ParameterError(
                f"Range {lo:g}:{hi:g} with step {step:g} has {n:,} points (at most "
                f"{MAX_SUPPORT:,}): declare a coarser step, e.g. {lo:g}:{hi:g}:"
                f"{(hi - lo) / (MAX_SUPPORT - 1):.3g}."
            )
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "step", step)

    @property
    def _step(self) -> float:
        """The grid step (``__post_init__`` always sets one: the declared or the default)."""
        assert self.step is not None
        return self.step

    @property
    def size(self) -> int:
        return math.floor((self.hi - self.lo) / self._step * (1 + 1e-12)) + 1

    def values(self) -> np.ndarray:
        return self.lo + self._step * np.arange(self.size)

    def value(self, i: int) -> float | int:
        if float(self.lo).is_integer() and float(self._step).is_integer():
            return int(self.lo) + int(self._step) * int(i)
        v = self.lo + self._step * int(i)
        d = max(0, -math.floor(math.log10(self._step)) + 1) if self._step < 1 else 0
        return round(v, d + 6) + 0.0

    def index_of(self, x: float) -> tuple[int, bool]:
        """Nearest grid index of x clamped into the range; and whether x had to be clamped."""
        clamped = not (self.lo <= x <= self.hi)
        x = min(max(float(x), self.lo), self.hi)
        return int(min(max(round((x - self.lo) / self._step), 0), self.size - 1)), clamped

    def describe(self) -> str:
        return f"[{self.lo:g}, {self.hi:g}] step {self.step:g}"

    def to_dict(self) -> dict:
        return {"type": "numeric", "lo": self.lo, "hi": self.hi, "step": self.step}


@dataclass(frozen=True)
class CategoricalRange:
    """Declared categories of a categorical answer; ``ordered`` uses the ordinal distance."""

    categories: tuple
    ordered: bool = False

    def __post_init__(self):
        cats = tuple(self.categories)
        if len(cats) < 2:
            raise ParameterError("Declare at least two categories for a categorical answer.")
        if len(set(map(_key, cats))) != len(cats):
            raise ParameterError("The declared categories contain duplicates.")
        object.__setattr__(self, "categories", cats)

    @property
    def size(self) -> int:
        return len(self.categories)

    def values(self) -> list:
        return list(self.categories)

    def value(self, i: int):
        return self.categories[int(i)]

    def index_of(self, x) -> tuple[int | None, bool]:
        k = _key(x)
        for i, c in enumerate(self.categories):
            if _key(c) == k:
                return i, False
        return None, True

    def describe(self) -> str:
        kind = "ordered " if self.ordered else ""
        return f"{kind}categories {{{', '.join(map(str, self.categories))}}}"

    def to_dict(self) -> dict:
        return {
            "type": "categorical",
            "categories": [_plain(c) for c in self.categories],
            "ordered": self.ordered,
        }


@dataclass(frozen=True)
class Prior:
    """The researcher's prior over a declared range (thesis Definition 10).

    ``kind``: 'uniform', 'normal' (``params`` mean, sd: density at the grid points, truncated
    to the range), 'histogram' (``params`` edges, weights: each bin's weight shared equally by
    its grid points) or 'categorical' (``params`` {value: probability}; values not listed get 0).
    """

    kind: str
    support: NumericRange | CategoricalRange
    params: tuple = ()

    @classmethod
    def uniform(cls, support) -> Prior:
        return cls("uniform", support)

    @classmethod
    def normal(cls, mean: float, sd: float, support: NumericRange) -> Prior:
        return cls("normal", support, (float(mean), float(sd)))

    @classmethod
    def histogram(cls, edges: Sequence[float], weights: Sequence[float], support: NumericRange) -> Prior:
        return cls("histogram", support, (tuple(map(float, edges)), tuple(map(float, weights))))

    @classmethod
    def categorical(cls, probs: dict, support) -> Prior:
        return cls("categorical", support, tuple((k, float(v)) for k, v in probs.items()))

    def probabilities(self) -> np.ndarray:
        """Float probabilities over the support (for display; the mechanism uses weights())."""
        w = np.array(self.weights(), dtype=np.float64)
        return w / w.sum()

    def weights(self) -> list[int]:
        """Integer weights over the support (data independent; sum ≈ 2⁵²); computed once per
        prior (a copy is returned).
        """
        try:
            return list(_weights_of(self))
        except TypeError:  # unhashable parameters (e.g. a list): computed each time
            return self._weights()

    def _weights(self) -> list[int]:
        sup = self.support
        n = sup.size
        if self.kind == "uniform":
            w = np.ones(n)
        elif self.kind == "normal":
            if not isinstance(sup, NumericRange):
                raise ParameterError("A normal prior needs a numeric range.")
            mean, sd = self.params
            if not (sd > 0 and math.isfinite(sd) and math.isfinite(mean)):
                raise ParameterError(
                    "The normal prior needs a finite mean and a standard deviation > 0 (normal:MEAN:SD)."
                )
            z = (sup.values() - mean) / sd
            logw = -0.5 * z * z
            w = np.exp(logw - logw.max())
        elif self.kind == "histogram":
            if not isinstance(sup, NumericRange):
                raise ParameterError("A histogram prior needs a numeric range.")
            edges, bw = self.params
            if len(edges) != len(bw) + 1 or len(bw) < 1:
                raise ParameterError("A histogram prior needs k + 1 increasing edges and k weights.")
            if any(b <= a for a, b in itertools.pairwise(edges)) or any(
                not (x >= 0 and math.isfinite(x)) for x in bw
            ):
                raise ParameterError("Histogram prior: edges must increase and weights be >= 0.")
            x = sup.values()
            b = np.searchsorted(np.asarray(edges), x, side="right") - 1
            b = np.where(x == edges[-1], len(bw) - 1, b)  # the last bin is closed
            inside = (b >= 0) & (b < len(bw))
            counts = np.bincount(b[inside], minlength=len(bw))
            w = np.zeros(n)
            bwa = np.asarray(bw, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                per = np.where(counts > 0, bwa / np.maximum(counts, 1), 0.0)
            w[inside] = per[b[inside]]
        elif self.kind == "categorical":
            w = np.zeros(n)
            for k, v in self.params:
                if not (v >= 0 and math.isfinite(v)):
                    raise ParameterError(f"Prior probability of {k!r} must be a number >= 0.")
                if isinstance(sup, NumericRange):
                    try:
                        if isinstance(k, (bool, np.bool_, str)):
                            raise ValueError
                        xk = float(k)
                    except (TypeError, ValueError, OverflowError):
                        raise ParameterError(
                            f"Prior value {k!r} is not a number, but the declared range of the answer "
                            f"is numeric ({sup.describe()}): give grid points, e.g. "
                            f"categorical:{sup.value(0)}=0.5,{sup.value(1)}=0.5."
                        ) from None
                    i = sup.index_of(xk)[0] if math.isfinite(xk) else None
                    if i is not None and abs(float(sup.value(i)) - xk) > 1e-9 * max(1.0, abs(xk)):
                        i = None
                else:
                    i, _ = sup.index_of(k)
                if i is None:
                    raise ParameterError(
                        f"Prior value {k!r} is not a point of the declared range ({sup.describe()})."
                    )
                w[i] += v
        else:
            raise ParameterError(
                f"Unknown prior {self.kind!r}: use uniform, normal, histogram or categorical."
            )
        total = float(w.sum())
        if not total > 0 or not math.isfinite(total):
            raise ParameterError(
                "The prior puts no probability on the declared range: widen the range or move the prior."
            )
        ints = [int(v) for v in np.rint(w / total * PRIOR_TOTAL)]
        if sum(ints) == 0:
            raise ParameterError("The prior puts no probability on the declared range.")
        return ints

    def describe(self) -> str:
        if self.kind == "uniform":
            p = "uniform"
        elif self.kind == "normal":
            p = f"normal(mean {self.params[0]:g}, sd {self.params[1]:g})"
        elif self.kind == "histogram":
            p = f"histogram({len(self.params[1])} bins)"
        else:
            p = "categorical(" + ", ".join(f"{k}: {v:g}" for k, v in self.params) + ")"
        return f"{p} over {self.support.describe()}"

    def to_dict(self) -> dict:
        params: Any = self.params
        if self.kind == "categorical":
            params = [[_plain(k), v] for k, v in self.params]
        elif self.kind == "histogram":
            params = [list(self.params[0]), list(self.params[1])]
        return {"kind": self.kind, "support": self.support.to_dict(), "params": list(params)}


@functools.lru_cache(maxsize=64)
def _weights_of(prior: Prior) -> tuple[int, ...]:
    return tuple(prior._weights())


# =========================================================================== text specs (CLI)


def parse_range(text: str, *, integer: bool = False, ordered: bool = False):
    """``LO:HI[:STEP]`` → :class:`NumericRange`; ``a,b,c`` → :class:`CategoricalRange`.

    >>> parse_range("0:1:0.25").size, parse_range("a,b,c").size
    (5, 3)
    """
    t = str(text).strip()
    if ":" in t:
        parts = t.split(":")
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            nums = [float(p) for p in parts]
        except ValueError:
            raise ParameterError(
                f"Range {t!r}: write LOWER:UPPER or LOWER:UPPER:STEP with "
                "numbers (e.g. 0:500000:100), or categories a,b,c."
            ) from None
        step = nums[2] if len(nums) == 3 else (1.0 if integer else None)
        return NumericRange(nums[0], nums[1], step)
    cats = [c.strip() for c in t.split(",") if c.strip()]
    return CategoricalRange(tuple(parse_literal(c) for c in cats), ordered)


def parse_literal(s: str):
    """A number (an exact int for an integer text) or the text without its quotes."""
    s = s.strip()
    if _INT_LITERAL.fullmatch(s) and len(s) <= MAX_NUMBER_CHARS:
        return int(s)  # exact: never through a double
    try:
        return float(s)
    except ValueError:
        return s.strip("'\"")


def parse_prior(text: str | None, support) -> Prior:
    """``uniform`` | ``normal:MEAN:SD`` | ``histogram:E0,E1,…,Ek:W1,…,Wk`` |
    ``categorical:A=0.2,B=0.8`` over the declared ``support``.

    >>> parse_prior("normal:30000:10000", NumericRange(0, 500000, 100)).kind
    'normal'
    """
    t = (text or "uniform").strip()
    head, _, rest = t.partition(":")
    head = head.lower()
    try:
        if head == "uniform" and not rest:
            return Prior.uniform(support)
        if head == "normal":
            mean, sd = (float(x) for x in rest.split(":"))
            return Prior.normal(mean, sd, support)
        if head == "histogram":
            e, wts = rest.split(":")
            return Prior.histogram(
                [float(x) for x in e.split(",")], [float(x) for x in wts.split(",")], support
            )
        if head == "categorical":
            probs = {}
            for part in filter(None, (p.strip() for p in rest.split(","))):
                k, sep, v = part.rpartition("=")
                if not sep:
                    raise ValueError
                probs[parse_literal(k.strip())] = float(v)
            if not probs:
                raise ValueError
            return Prior.categorical(probs, support)
    except ValueError:
        pass
    raise ParameterError(
        f"--prior {t!r}: use uniform, normal:MEAN:SD, "
        "histogram:E0,E1,…,Ek:W1,…,Wk or categorical:VALUE=P,VALUE=P."
    )


def resolve_range(
    query: Query,
    ranges: dict[str, str],
    df: pd.DataFrame | None = None,
    ordered: bool = False,
    *,
    types: dict | None = None,
):
    """The declared range of ``query``'s answer from ``{name: spec}`` (CLI ``--range``): the key
    is the query's column, or ``count`` / ``proportion`` / ``answer``.  A proportion defaults
    to 0:1:0.001; everything else must be declared (never read from the data).  Counts get
    step 1 unless a step is given, and so do ``value``/``median`` of a column DECLARED of type
    integer in ``types`` (``{column: 'integer'}``, as the release methods' ``--type``); the
    column's values or dtype never decide the grid (a public default must not depend on the
    data).  ``df`` is only used to check that the column exists.
    """
    from dpstudio.engine.roles import declared_integer

    if df is not None and query.column:
        _col(df, query.column)
    keys = [
        k for k in (query.column, query.agg if query.agg in ("count", "proportion") else None, "answer") if k
    ]
    spec = next((ranges[k] for k in keys if k in ranges), None)
    unknown = [k for k in ranges if k not in keys]
    if unknown:
        raise ParameterError(
            f"--range {unknown[0]}=…: the query {query.describe()!r} answers "
            f"{keys[0]!r}; declare --range {keys[0]}=LOWER:UPPER[:STEP]."
        )
    if spec is None:
        if query.agg == "proportion":
            return NumericRange(0.0, 1.0, 0.001)
        example = "1,2,3" if query.agg == "mode" else "LOWER:UPPER[:STEP]"
        raise ParameterError(
            f"Declare the range of the answer (never taken from the data): --range {keys[0]}={example}."
        )
    integer = query.agg == "count" or (
        query.agg in ("value", "median")
        and query.column is not None
        and declared_integer(types, query.column)
    )
    return parse_range(spec, integer=integer, ordered=ordered)
