"""Query desk: answer single statistics under ε-DP by knowledge refinement (thesis ch. 5).

A researcher submits a query (``"mean(income) where region == 3"``) *and* her prior knowledge
of the answer: a distribution over a declared range (uniform if she knows nothing).  The office
computes the true answer f(D), refines the prior -- the points nearest f(D) get their mass
multiplied by αu, the farthest by αd, one distance level in between by αud so the total is
one (thesis Algorithm 5.1) -- and returns ONE draw of the refined distribution.

Guarantee.  The response's distribution is the prior times a factor in [αd, αu]:

* statistical queries (count, proportion, mean, sum, median, mode): αu/αd ≤ e^ε, so for ANY
  two data sets (not only neighbours) the probability of every response differs by at most
  e^ε -- ε-DP whatever the query's sensitivity (thesis Table 5.2, Proposition 2);
* individual queries (``value(col) where <filter>``: one record's value): αu ≤ e^ε,
  αd ≥ e^{-ε}.  When exactly one record matches the filter the prior is refined around its
  value, otherwise (none, or several) the response is a draw from the prior itself; adding or
  removing one record moves between these, so the ratio to the neighbour's distribution is at
  most e^ε (Proposition 3; changing the record's value is two steps: 2ε).

Decisions where the thesis is silent (see ``docs/query_desk.md``):

* Ranges are DECLARED, never read from the data.  A true answer outside the declared range is
  clamped into it (refusing would tell the researcher that it lies outside; clamping is part of
  the query function, which knowledge refinement does not need to bound).  It is then snapped to
  the nearest grid point (numeric ranges are discretised with a declared step).
* An empty filter (no records for a mean/median/mode, no or several records for an individual
  query) answers from the prior: also ε-DP, and it is not refused (a refusal would leak).
* The response support is finite: the declared categories, or the grid lo, lo+step, …, hi.
  Distances (Table 5.1) are exact integers: |i − j| grid steps (continuous and ordinal), 0/1
  (nominal).
* Exactness: the prior is quantised once to integer weights (data independent, total ≈ 2⁵²);
  αu, αd are dyadic rationals A/2⁶⁴ rounded towards privacy (αu down from e^{tε}, αd up from
  e^{-(1-t)ε}, with rigorous decimal bounds of e^x), so αu/αd ≤ e^ε holds exactly; the sets Uu,
  Ud and the factor αud are computed in integer arithmetic, and the draw uses only uniform
  integers (rejection from random bits).  No floating-point number enters the distribution
  that is sampled.

Thesis slips found while implementing (tests ``test_thesis_*``):

* §5.2 / Algorithm 5.1 steps a-b swap pu and pd: the mass condition αu·P(Uu) + αd·(1−P(Uu)) = 1
  gives P(Uu) = (1 − αd)/(αu − αd), not (αu − 1)/(αu − αd) (Table 5.5 uses the right one:
  size(Uu) = 0.269 at ε = 1).
* Algorithm 5.1 step iv divides by 1 − pu − pd, which is 0; the factor that makes the mass one
  is αud = (1 − αu·P(U'u) − αd·P(U'd)) / (1 − P(U'u) − P(U'd)).
* §5.5.1 writes 0.02182 for 0.027182 in the last sum and rounds e^{±1}/100 down
  (0.003678, 0.027182; 0.0036788 and 0.0271828 to 5 digits); P(K = 1) = 0.0039138, not 0.003912.
* Table 5.5's Laplace column "P(K ∈ [0, 1])" is not 1 − e^{−ε/2} (0.0488, 0.293, 0.393, 0.632
  for ε = 0.1, ln 2, 1, 2); the thesis prints 0.476, 0.549, 0.607, 0.684.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query_ledger import (  # noqa: F401 (the ledger's names, re-exported)
    DEFAULT_WAIT,
    LEDGER_FORMAT,
    BudgetExceeded,
    BudgetLedger,
    LedgerBusy,
    LedgerError,
    eps_fraction,
    load_ledger,
    locked_ledger,
    resolve_ledger_path,
    save_ledger,
)
from dpstudio.engine.random import as_rng

__all__ = [
    "BudgetExceeded",
    "BudgetLedger",
    "CategoricalRange",
    "LedgerBusy",
    "LedgerError",
    "MultiQuery",
    "NumericRange",
    "Prior",
    "Query",
    "QueryAnswer",
    "exp_bounds",
    "factors",
    "filter_columns",
    "disjoint_components",
    "joint_distances",
    "laplace_sensitivity",
    "load_ledger",
    "locked_ledger",
    "parse_any",
    "parse_filter",
    "parse_prior",
    "parse_query",
    "parse_range",
    "refine_multicomponent",
    "refine_query",
    "refine_weights",
    "save_ledger",
]

AGGREGATES = ("count", "proportion", "mean", "sum", "median", "mode", "value")
STATISTICAL = ("count", "proportion", "mean", "sum", "median", "mode")
PRIOR_TOTAL = 1 << 52  # the prior is quantised to integer weights summing to about this
ALPHA_BITS = 64  # αu, αd are A / 2^64
MAX_SUPPORT = 200_001  # grid points of a numeric range
MAX_EPSILON = 50.0


# =========================================================================== exact factors


def exp_bounds(x: Fraction, prec: int = 60) -> tuple[Fraction, Fraction]:
    """Rigorous rational bounds lo ≤ e^x ≤ hi for a rational x (any sign)."""
    from dpstudio.engine.algorithms.noise import _exp_neg_bounds

    if x >= 0:
        lo, hi = _exp_neg_bounds(x, prec)  # bounds of e^{-x}
        return 1 / hi, 1 / lo
    return _exp_neg_bounds(-x, prec)


def factors(epsilon: float | Fraction, kind: str, split: float = 0.5) -> tuple[int, int]:
    """Integer numerators (Au, Ad) of αu = Au/2⁶⁴ and αd = Ad/2⁶⁴ (Table 5.2).

    individual: αu ≤ e^ε, αd ≥ e^{-ε}; statistical: αu ≤ e^{tε}, αd ≥ e^{-(1-t)ε} with
    t = ``split`` ∈ [0, 1], so αu/αd ≤ e^ε.  Rounded towards privacy (αu down, αd up).

    >>> au, ad = factors(1.0, "individual")
    >>> round(au / 2**64, 6), round(ad / 2**64, 6)
    (2.718282, 0.367879)
    """
    eps = epsilon if isinstance(epsilon, Fraction) else eps_fraction(epsilon)
    if kind == "individual":
        up, down = eps, eps
    else:
        t = Fraction(float(split))
        up, down = t * eps, (1 - t) * eps
    one = 1 << ALPHA_BITS
    au = math.floor(exp_bounds(up)[0] * one)
    ad = math.ceil(exp_bounds(-down)[1] * one)
    return max(au, one), min(ad, one)


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


def _key(x):
    """Comparison key so that 3, 3.0, '3' and np.int64(3) are the same category.  Exact:
    integers never pass through a double (2**53 + 1 and 2**53 are different keys).
    """
    if isinstance(x, (bool, np.bool_)):
        return str(int(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return str(int(f)) if f.is_integer() else repr(f)
    s = str(x).strip()
    if _INT_LITERAL.fullmatch(s):
        return str(int(s)) if len(s) <= MAX_NUMBER_CHARS else s
    try:
        f = float(s)
    except ValueError:
        return s
    return str(int(f)) if f.is_integer() else repr(f)


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


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
        """Integer weights over the support (data independent; sum ≈ 2⁵²)."""
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


# =========================================================================== filter language

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<bq>`[^`]+`)
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|\*)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
)""",
    re.VERBOSE,
)

_KEYWORDS = {"and", "or", "not", "in", "where", "by"}
_BLANK_TO_END = re.compile(r"\s*\Z")
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_INT_LITERAL = re.compile(r"-?\d+")

#: Longest query text read (a filter of 1,000 comparisons is about 30,000 characters).
MAX_QUERY_CHARS = 100_000
#: Most comparisons in one filter (each value of an ``in (…)`` list counts as one).
MAX_FILTER_TERMS = 1_000
#: Deepest nesting of parentheses and ``not`` in a filter.
MAX_FILTER_DEPTH = 200
#: Longest number literal: every integer a double can hold written out in full has at most
#: 309 digits (int64: 19); longer ones are typing accidents.
MAX_NUMBER_CHARS = 400


def _check_length(text: str) -> None:
    if len(text) > MAX_QUERY_CHARS:
        raise ParameterError(
            f"Query: the text has {len(text):,} characters (at most {MAX_QUERY_CHARS:,}); "
            "split it into several queries."
        )


def _tokenize(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = str(text)
    _check_length(text)
    while pos < len(text):
        if _BLANK_TO_END.match(text, pos):
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParameterError(
                f"Query: cannot read {text[pos : pos + 40].strip()[:20]!r} (position "
                f"{pos + 1}); use column names, numbers, 'quoted text', "
                "==, !=, <, <=, >, >=, in (…), and, or, not."
            )
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group and one matched
        val = m.group(kind)
        if kind == "num":
            if len(val) > MAX_NUMBER_CHARS:
                raise ParameterError(
                    f"Query: the number {val[:12]}… has {len(val):,} characters (at most "
                    f"{MAX_NUMBER_CHARS}); no column holds such a number."
                )
            # an integer is kept exact (a float would turn 2^53 + 1 into 2^53: another record)
            out.append(("lit", int(val) if _INT_LITERAL.fullmatch(val) else float(val)))
        elif kind == "str":  # \' \" \\ (any backslash escape keeps the character after it)
            out.append(("lit", _ESCAPE.sub(r"\1", val[1:-1])))
        elif kind == "bq":
            out.append(("name", val[1:-1]))
        elif kind == "name" and val.lower() in _KEYWORDS:
            out.append(("kw", val.lower()))
        elif kind == "name" and val.lower() in ("true", "false"):
            out.append(("lit", val.lower() == "true"))
        else:
            out.append((kind, val))
    return out


class _Parser:
    """Operator precedence without recursion (so 10,000 nested parentheses or ``not``s give
    one line, never a RecursionError):  or_expr := and_expr ('or' and_expr)* ;
    and_expr := not_expr ('and' not_expr)* ; not_expr := 'not' not_expr | atom ;
    atom := '(' or_expr ')' | NAME OP LIT | NAME ['not'] 'in' (LIT, …).
    At most :data:`MAX_FILTER_DEPTH` levels of parentheses and ``not`` and
    :data:`MAX_FILTER_TERMS` comparisons.
    """

    _PREC = {"or": 1, "and": 2}

    def __init__(self, tokens):
        self.t, self.i = tokens, 0
        self.terms = 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            want = value or kind or "more"
            got = "the end" if tok[0] is None else repr(tok[1])
            raise ParameterError(f"Query filter: expected {want!r} but found {got}.")
        self.i += 1
        return tok

    def _count(self, n: int = 1) -> None:
        self.terms += n
        if self.terms > MAX_FILTER_TERMS:
            raise ParameterError(
                f"Query filter: more than {MAX_FILTER_TERMS:,} comparisons (each value of an "
                "'in (…)' list counts); split the query or use fewer values."
            )

    def parse(self):
        ops: list[str] = []  # '(' 'not' 'and' 'or'
        vals: list = []
        opened = 0  # '(' and 'not' on the stack

        def reduce_binary() -> None:
            op = ops.pop()
            b, a = vals.pop(), vals.pop()
            vals.append((op, a, b))

        def reduce_nots() -> None:
            nonlocal opened
            while ops and ops[-1] == "not":
                ops.pop()
                opened -= 1
                vals.append(("not", vals.pop()))

        expect_operand = True
        while True:
            tok = self.peek()
            if expect_operand:
                if tok in (("kw", "not"), ("op", "(")):
                    self.take()
                    ops.append("not" if tok[0] == "kw" else "(")
                    opened += 1
                    if opened > MAX_FILTER_DEPTH:
                        raise ParameterError(
                            f"Query filter: nested more than {MAX_FILTER_DEPTH} levels deep "
                            "(parentheses and 'not'); simplify it."
                        )
                    continue
                vals.append(self.atom())
                reduce_nots()
                expect_operand = False
                continue
            if tok in (("kw", "and"), ("kw", "or")):
                prec = self._PREC[tok[1]]
                while ops and ops[-1] in self._PREC and self._PREC[ops[-1]] >= prec:
                    reduce_binary()
                ops.append(tok[1])
                self.take()
                expect_operand = True
                continue
            if tok == ("op", ")"):
                while ops and ops[-1] != "(":
                    reduce_binary()
                if not ops:
                    raise ParameterError("Query filter: unexpected ')'.")
                ops.pop()
                opened -= 1
                self.take()
                reduce_nots()
                continue
            if tok[0] is None:
                break
            raise ParameterError(f"Query filter: unexpected {tok[1]!r}.")
        while ops:
            if ops[-1] == "(":
                raise ParameterError("Query filter: expected ')' but found the end.")
            reduce_binary()
        return vals[0]

    def atom(self):
        name = self.take("name")[1]
        neg = False
        if self.peek() == ("kw", "not"):
            self.take()
            neg = True
            if self.peek() != ("kw", "in"):
                raise ParameterError(f"Query filter: after '{name} not' write 'in (…)'.")
        if self.peek() == ("kw", "in"):
            self.take()
            close = ")" if self.peek() == ("op", "(") else "]"
            self.take("op", "(" if close == ")" else "[")
            vals = [self.take("lit")[1]]
            while self.peek() == ("op", ","):
                self.take()
                vals.append(self.take("lit")[1])
            self.take("op", close)
            self._count(len(vals))
            node = ("in", name, tuple(vals))
            return ("not", node) if neg else node
        op = self.take("op")[1]
        if op not in ("==", "!=", "<", "<=", ">", ">="):
            raise ParameterError(f"Query filter: {op!r} is not a comparison; use ==, !=, <, <=, >, >= or in.")
        self._count()
        return ("cmp", op, name, self.take("lit")[1])


def parse_filter(text: str | None):
    """Parse a filter (no eval): a tuple tree; ``None`` for an empty filter.  At most
    :data:`MAX_FILTER_TERMS` comparisons nested at most :data:`MAX_FILTER_DEPTH` levels
    (one-line :class:`ParameterError` beyond); integer literals are exact ints.

    >>> parse_filter("region == 3 and not age < 30")
    ('and', ('cmp', '==', 'region', 3), ('not', ('cmp', '<', 'age', 30)))
    """
    if text is None or not str(text).strip():
        return None
    return _Parser(_tokenize(text)).parse()


def _walk(node) -> Iterator:
    """Every node of a filter tree, parents before children, without recursion."""
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        yield n
        if n[0] in ("and", "or"):
            stack.append(n[2])
            stack.append(n[1])
        elif n[0] == "not":
            stack.append(n[1])


def filter_columns(node) -> set[str]:
    """The column names a parsed filter uses.

    >>> sorted(filter_columns(parse_filter("a == 1 or not b in (2, 3)")))
    ['a', 'b']
    """
    return {n[2] if n[0] == "cmp" else n[1] for n in _walk(node) if n[0] in ("cmp", "in")}


_columns_of = filter_columns


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        raise ParameterError(
            f"Query: column {name!r} is not in the data (columns: {', '.join(map(str, df.columns[:20]))})."
        )
    return df[name]


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _numeric_mask(s: pd.Series, op: str, lit: int | float) -> np.ndarray:
    """``s op lit`` for a numeric column, exact whatever the sizes: an integer literal is never
    rounded to a double (2^53 + 1 does not equal 2^53), a float is compared with integer
    values exactly (an int64 above 2^53 does not equal a nearby double), values beyond a
    dtype's range compare as they are.  Missing values match only ``!=``.
    """
    na = s.isna().to_numpy(dtype=bool)
    kind = s.dtype.kind
    if kind in "iu":
        np_dtype: Any = getattr(s.dtype, "numpy_dtype", s.dtype)
        arr = s.to_numpy(dtype=np_dtype, na_value=0)
        if isinstance(lit, float):
            if math.isnan(lit):
                return np.full(len(s), op == "!=")
            if math.isinf(lit):  # every integer lies below +inf and above -inf
                below = lit > 0
                res = {"==": False, "!=": True, "<": below, "<=": below, ">": not below, ">=": not below}
                return np.where(na, op == "!=", res[op])
            if lit.is_integer():
                lit_i = int(lit)
            elif op in ("==", "!="):
                return np.full(len(s), op == "!=")
            elif op in ("<", "<="):  # x < 2.5 <=> x <= 2
                lit_i, op = math.floor(lit), "<="
            else:  # x > 2.5 <=> x >= 3
                lit_i, op = math.ceil(lit), ">="
        else:
            lit_i = int(lit)
        info = np.iinfo(arr.dtype)
        if lit_i > info.max or lit_i < info.min:  # beyond every value the column can hold
            above = lit_i > info.max
            res = {"==": False, "!=": True, "<": above, "<=": above, ">": not above, ">=": not above}
            return np.where(na, op == "!=", res[op])
        return np.where(na, op == "!=", _OPS[op](arr, arr.dtype.type(lit_i)))
    arr = s.to_numpy(dtype=np.float64, na_value=np.nan)
    na = na | np.isnan(arr)
    if isinstance(lit, int) and not isinstance(lit, bool) and abs(lit) > 2**53:
        try:
            f = float(lit)
        except OverflowError:
            f = math.inf if lit > 0 else -math.inf
        exact = math.isfinite(f) and int(f) == lit
        if not exact:
            # f is the double nearest lit: no double lies strictly between them
            if op == "==":
                return np.zeros(len(s), dtype=bool)
            if op == "!=":
                return np.ones(len(s), dtype=bool)
            if f > lit:
                got = arr < f if op in ("<", "<=") else arr >= f
            else:
                got = arr <= f if op in ("<", "<=") else arr > f
            return got & ~na
        lit = f
    with np.errstate(invalid="ignore"):
        got = _OPS[op](arr, float(lit))
    return np.where(na, op == "!=", got)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def _compare(s: pd.Series, op: str, lit, keys: pd.Series | None = None) -> pd.Series:
    """``s op lit`` as a boolean Series (``keys``: the column's :func:`_key` values, when
    already computed).
    """
    numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
    if isinstance(lit, str) and numeric:
        try:
            lit = float(lit)
        except ValueError:
            raise ParameterError(
                f"Query filter: column {s.name!r} is numeric; compare it with a number, not {lit!r}."
            ) from None
    if numeric and s.dtype.kind in "iuf" and isinstance(lit, (bool, int, float)):
        return pd.Series(_numeric_mask(s, op, int(lit) if isinstance(lit, bool) else lit), index=s.index)
    if not numeric and op in ("==", "!="):
        k = _key(lit)
        if keys is None:
            keys = _keys_of(s)
        eq = (keys == k).to_numpy(dtype=bool)
        return pd.Series(eq if op == "==" else ~eq, index=s.index)
    if not numeric:
        if isinstance(lit, str):
            vals = s.astype("string")
        else:
            vals = pd.to_numeric(s, errors="coerce")
    else:
        vals = s
    ops: dict[str, Callable[[Any], pd.Series]] = {
        "==": vals.__eq__,
        "!=": vals.__ne__,
        "<": vals.__lt__,
        "<=": vals.__le__,
        ">": vals.__gt__,
        ">=": vals.__ge__,
    }
    try:
        return ops[op](lit).fillna(False).astype(bool)
    except (TypeError, OverflowError):
        raise ParameterError(f"Query filter: cannot compare column {s.name!r} with {lit!r}.") from None


def _keys_of(s: pd.Series) -> pd.Series:
    """:func:`_key` of every value (None for a missing one)."""
    return s.map(lambda v: None if pd.isna(v) else _key(v))


def evaluate_filter(df: pd.DataFrame, node) -> np.ndarray:
    """Boolean mask of the records matching a parsed filter (missing values never match a
    comparison, except ``!=``).  Without recursion (a filter of any depth); each text
    column's comparison keys are computed once.
    """
    if node is None:
        return np.ones(len(df), dtype=bool)
    keys: dict[str, pd.Series] = {}

    def keys_of(name: str, s: pd.Series) -> pd.Series | None:
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            return None
        if name not in keys:
            keys[name] = _keys_of(s)
        return keys[name]

    def atom(n) -> np.ndarray:
        if n[0] == "in":
            s = _col(df, n[1])
            k = keys_of(n[1], s)
            if k is not None:
                wanted = {_key(v) for v in n[2]}
                return k.isin(wanted).to_numpy(dtype=bool)
            m = np.zeros(len(df), dtype=bool)
            for v in n[2]:
                m |= _compare(s, "==", v).to_numpy(dtype=bool)
            return m
        _, op, name, lit = n
        s = _col(df, name)
        return _compare(s, op, lit, keys_of(name, s)).to_numpy(dtype=bool)

    stack: list[tuple[Any, bool]] = [(node, False)]
    out: list[np.ndarray] = []
    while stack:
        n, done = stack.pop()
        tag = n[0]
        if tag in ("and", "or"):
            if done:
                b, a = out.pop(), out.pop()
                out.append(a & b if tag == "and" else a | b)
            else:
                stack += [(n, True), (n[2], False), (n[1], False)]
        elif tag == "not":
            if done:
                out.append(~out.pop())
            else:
                stack += [(n, True), (n[1], False)]
        else:
            out.append(atom(n))
    return out[0]


# =========================================================================== queries


@dataclass(frozen=True)
class Query:
    """``agg(column) [where filter] [by column]``; ``agg`` one of :data:`AGGREGATES`."""

    agg: str
    column: str | None = None
    where: str | None = None
    by: str | None = None
    text: str = ""

    @property
    def kind(self) -> str:
        return "individual" if self.agg == "value" else "statistical"

    def describe(self) -> str:
        return self.text or (
            f"{self.agg}({self.column or '*'})"
            + (f" where {self.where}" if self.where else "")
            + (f" by {self.by}" if self.by else "")
        )


_QUERY = re.compile(
    r"^\s*(?P<agg>[A-Za-z_]+)\s*(?:\(\s*(?P<col>`[^`]+`|[^()\s]*)\s*\))?"
    r"(?P<rest>.*)$",
    re.DOTALL,
)


def parse_query(text: str) -> Query:
    """Parse ``"mean(income) where region == 3"`` (also ``count where …``, ``proportion where
    …``, ``median(x)``, ``sum(x)``, ``mode(x)``, ``value(x) where id == 17``, ``… by group``).

    >>> q = parse_query("mean(income) where region == 3 and age >= 30")
    >>> q.agg, q.column, q.where
    ('mean', 'income', 'region == 3 and age >= 30')
    """
    _check_length(str(text or ""))
    m = _QUERY.match(str(text or ""))
    if not m:
        raise ParameterError(
            "Query: write AGGREGATE(COLUMN) [where FILTER], e.g. 'mean(income) where region == 3'."
        )
    agg = m.group("agg").lower()
    if agg not in AGGREGATES:
        raise ParameterError(f"Query: unknown aggregate {agg!r}; use one of {', '.join(AGGREGATES)}.")
    col = m.group("col")
    col = col.strip("`") if col else None
    if col in ("", "*"):
        col = None
    if agg in ("mean", "sum", "median", "mode", "value") and not col:
        raise ParameterError(f"Query: {agg} needs a column, e.g. {agg}(income).")
    rest = m.group("rest").strip()
    where = by = None
    bm = re.search(r"\bby\s+(`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)\s*$", rest)
    if bm:
        by = bm.group(1).strip("`")
        rest = rest[: bm.start()].strip()
    if rest:
        if not re.match(r"where\b", rest, re.IGNORECASE):
            raise ParameterError(f"Query: expected 'where' before {rest[:20]!r}.")
        where = rest[5:].strip()
        if not where:
            raise ParameterError("Query: 'where' needs a filter, e.g. where region == 3.")
        parse_filter(where)  # syntax check now, before any spending
    if by and agg == "value":
        raise ParameterError("Query: an individual query (value) cannot be grouped with 'by'.")
    return Query(agg, col, where, by, " ".join(str(text).split()))


def true_answer(df: pd.DataFrame, query: Query, mask: np.ndarray | None = None):
    """f(D) for one component (``None`` when undefined: no records / no unique record).
    PRIVATE: never shown to the researcher.
    """
    if mask is None:
        mask = evaluate_filter(df, parse_filter(query.where))
    agg = query.agg
    if agg == "count":
        return int(mask.sum())
    if agg == "proportion":
        return float(mask.sum()) / len(df) if len(df) else None
    if query.column is None:
        raise ParameterError(f"Query: {agg}(…) needs a column.")
    s = _col(df, query.column)[mask]
    if agg == "value":
        if len(s) != 1 or pd.isna(s.iloc[0]):
            return None
        return _plain(s.iloc[0])
    if agg == "mode":
        s = s.dropna()
        if not len(s):
            return None
        return s.map(_key).value_counts()  # modal category chosen among the declared ones
    x = pd.to_numeric(s, errors="coerce")
    if x.isna().all() and len(x) and not pd.api.types.is_numeric_dtype(s):
        raise ParameterError(f"Query: {agg}({query.column}) needs a numeric column.")
    xs = x.dropna().to_numpy(dtype=np.float64)
    if agg == "sum":
        return _exact_sum(xs)
    if not len(xs):
        return None
    if agg == "mean":
        return _exact_sum(xs) / len(xs)
    return float(np.median(xs))


def _exact_sum(xs: np.ndarray) -> float:
    """``math.fsum`` of the values; ±inf when they include ±inf (or overflow), NaN when they
    include both +inf and -inf (an undefined answer: answered from the prior).
    """
    try:
        return float(math.fsum(xs))
    except ValueError:  # -inf + inf
        return math.nan
    except OverflowError:  # finite values whose sum exceeds 1.8e308
        return math.copysign(math.inf, float(np.sum(xs)))


# =========================================================================== refinement


def refine_weights(
    prior_w: Sequence[int], dist: Sequence[int], au: int, ad: int, one: int = 1 << ALPHA_BITS
) -> tuple[list[int], list[int], dict]:
    """Algorithm 5.1 in integer arithmetic.

    ``prior_w``: integer prior weights; ``dist``: integer distance of each point to f(D);
    factors αu = au/one ≥ 1, αd = ad/one ≤ 1.  Returns (class, mass, info): ``class[i]`` is
    0 (U'u, factor αu), 1 (middle level, factor αud) or 2 (U'd, factor αd); ``mass`` the three
    class totals over the common denominator one·W (exact; they sum to one·W).

    The sets Uu are balls {d ≤ r} (= {d < r'}), unions of whole distance levels: with
    pu = (1 − αd)/(αu − αd) (the prior mass that Uu must have), if a ball has mass exactly pu
    it gets αu and the rest αd; otherwise U'u is the largest ball with mass < pu, U'd the
    complement of the smallest ball with mass > pu, and the one level between them gets
    αud = (1 − αu·P(U'u) − αd·P(U'd)) / P(level) ∈ (αd, αu).
    """
    w = list(map(int, prior_w))
    d = list(map(int, dist))
    W = sum(w)
    if W <= 0:
        raise ParameterError("The prior has no mass.")
    if au == ad:  # ε so small that both factors round to 1
        return [2] * len(w), [0, 0, one * W], {"branch": "identity", "pu": None}
    levels: dict[int, int] = {}
    for wi, di in zip(w, d):
        levels[di] = levels.get(di, 0) + wi
    num, den = (one - ad), (au - ad)  # pu = num/den
    cum = 0
    r_mid = None
    exact = False
    inner = 0
    for r in sorted(levels):
        c = cum + levels[r]
        lhs, rhs = c * den, num * W  # compare P(ball r) = c/W with pu
        if lhs == rhs:
            r_mid, exact, inner = r, True, c
            break
        if lhs > rhs:
            r_mid, inner = r, cum
            break
        cum = c
    if r_mid is None:  # cannot happen (pu < 1); keep the prior
        return [2] * len(w), [0, 0, one * W], {"branch": "identity", "pu": None}
    if exact:
        cls = [0 if di <= r_mid else 2 for di in d]
        mass = [au * inner, 0, ad * (W - inner)]
        info = {"branch": "then", "radius": r_mid}
    else:
        mid = levels[r_mid]
        outer = W - inner - mid
        cls = [0 if di < r_mid else (1 if di == r_mid else 2) for di in d]
        m_mid = one * W - au * inner - ad * outer
        mass = [au * inner, m_mid, ad * outer]
        info = {"branch": "else", "radius": r_mid, "alpha_ud": Fraction(m_mid, one * mid) if mid else None}
    assert sum(mass) == one * W
    info.update(pu=Fraction(num, den), alpha_u=Fraction(au, one), alpha_d=Fraction(ad, one))
    return cls, mass, info


def refined_probabilities(prior_w, cls, mass) -> list[Fraction]:
    """Exact refined probability of every point (for tests and display)."""
    tot = [0, 0, 0]
    for wi, c in zip(prior_w, cls):
        tot[c] += int(wi)
    total = sum(mass)
    return [
        Fraction(mass[c] * int(wi), tot[c] * total) if tot[c] else Fraction(0) for wi, c in zip(prior_w, cls)
    ]


def _uniform_int(rng: np.random.Generator, n: int) -> int:
    """Exact uniform integer in [0, n) from random bits (rejection)."""
    if n <= 0:
        raise ValueError("n must be > 0")
    if n < (1 << 62):
        return int(rng.integers(0, n))
    bits = n.bit_length()
    nbytes = (bits + 7) // 8
    while True:
        v = int.from_bytes(rng.bytes(nbytes), "little") & ((1 << bits) - 1)
        if v < n:
            return v


def sample_refined(rng: np.random.Generator, prior_w, cls, mass) -> int:
    """One exact draw: a class ∝ its exact mass, then a point of it ∝ its prior weight.

    Weights may be arbitrarily large integers (a joint prior is the exact product of its
    components' weights): beyond int64 the cumulative sums are Python integers.
    """
    u = _uniform_int(rng, sum(mass))
    c = 0 if u < mass[0] else (1 if u < mass[0] + mass[1] else 2)
    idx = [i for i, k in enumerate(cls) if k == c and prior_w[i] > 0]
    ws = [int(prior_w[i]) for i in idx]
    if sum(ws) < (1 << 62):
        cw = np.cumsum(np.asarray(ws, dtype=np.int64))
        v = _uniform_int(rng, int(cw[-1]))
        return idx[int(np.searchsorted(cw, v, side="right"))]
    acc = list(itertools.accumulate(ws))
    v = _uniform_int(rng, acc[-1])
    return idx[bisect.bisect_right(acc, v)]


def _distances(support, center: int) -> list[int]:
    n = support.size
    if isinstance(support, CategoricalRange) and not support.ordered:
        return [0 if i == center else 1 for i in range(n)]
    return [abs(i - center) for i in range(n)]


# =========================================================================== the answer


@dataclass
class QueryAnswer:
    """The result of :func:`refine_query`.

    Public (for the researcher): ``response``, ``guarantee``, ``epsilon``, ``query``,
    ``prior`` (see :meth:`public`).  PRIVATE (the office only: they depend on the true answer
    and would disclose it): ``true_value``, ``refined`` and ``notes``.
    """

    query: str
    kind: str
    epsilon: float
    response: Any
    guarantee: str
    prior: str
    support: list = field(default_factory=list)
    prior_probs: list = field(default_factory=list)
    refined: list = field(default_factory=list)  # PRIVATE
    true_value: Any = None  # PRIVATE
    notes: list = field(default_factory=list)  # PRIVATE
    groups: list | None = None
    remaining: float | None = None
    components: list[str] | None = None  # a multicomponent answer: one text per component
    mode: str | None = None  # multicomponent: 'joint' or 'split'
    epsilons: list[float] | None = None  # split: εi per component
    #: PRIVATE: the number of records the filter matched (one per group or component); the
    #: office's comparison with Laplace noise uses it (a mean's sensitivity is ≈ width / n)
    records: Any = None

    def public(self) -> dict:
        if self.components is not None:
            resp: Any = {c: _plain(r) for c, r in zip(self.components, self.response)}
        elif self.groups is None:
            resp = _plain(self.response)
        else:
            resp = {str(g): _plain(r) for g, r in zip(self.groups, self.response)}
        return {
            "query": self.query,
            "kind": self.kind,
            "epsilon": self.epsilon,
            "response": resp,
            "prior": self.prior,
            "guarantee": self.guarantee,
            "remaining_budget": self.remaining,
        }


def _guarantee(kind: str, eps: float, support, groups: list | None, split: float) -> str:
    rng_txt = "the declared range " + support.describe()
    outside = (
        "a true answer outside it was clamped into it"
        if isinstance(support, NumericRange)
        else "a true answer that is not a declared category is answered from the prior"
    )
    if kind == "individual":
        core = (
            f"ε-differential privacy with ε = {eps:g} with respect to adding or removing one "
            "record (changing the queried record's value is covered with 2ε): the prior was "
            "refined with αu ≤ e^ε on the values nearest the record's value and αd ≥ e^−ε on "
            "the others (thesis Proposition 3); when no single record matches the filter the "
            "response is a draw from the prior."
        )
    else:
        core = (
            f"ε-differential privacy with ε = {eps:g}, independent of the query's "
            "sensitivity: the prior was refined with factors αu ≤ e^(tε), αd ≥ e^(−(1−t)ε) "
            f"(t = {split:g}), so for any two data sets the probability of every response "
            "differs by at most e^ε (thesis Proposition 2)."
        )
    grp = ""
    if groups is not None:
        grp = (
            f" The {len(groups)} group answers come from disjoint sets of records and are "
            "drawn independently, so together they are ε-DP with respect to adding or removing "
            "one record (thesis Proposition 4)."
        )
    return (
        "Answered by knowledge refinement (Soria-Comas, thesis ch. 5): one draw from the "
        "researcher's prior after refinement towards the true answer; "
        + core
        + grp
        + f" The response lies in {rng_txt}; {outside}. "
        "The draw is exact: integer arithmetic and uniform random integers only, no "
        "floating-point approximation of the distribution. Sequential composition: this "
        f"answer spends ε = {eps:g} of the data set's query budget."
    )


def _as_prior(prior, query: Query) -> Prior:
    if isinstance(prior, Prior):
        return prior
    raise ParameterError(
        "prior must be a dpstudio Prior (e.g. Prior.uniform(NumericRange(0, 1))) "
        "or parsed with parse_prior()."
    )


def _check_epsilon(epsilon) -> float:
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"ε must be a number > 0, got {epsilon!r}.") from None
    if not (e > 0 and math.isfinite(e)) or e < 1e-9 or e > MAX_EPSILON:
        raise ParameterError(f"ε must be between 1e-9 and {MAX_EPSILON:g}, got {epsilon!r}.")
    return e


def _validate(
    df: pd.DataFrame, query: Query, prior: Prior, kind: str | None, groups
) -> tuple[str, list | None]:
    if kind is None:
        kind = query.kind
    if kind not in ("statistical", "individual"):
        raise ParameterError(f"kind must be 'statistical' or 'individual', got {kind!r}.")
    if kind == "individual" and query.kind != "individual":
        raise ParameterError(
            f"{query.agg} is a statistical query (it depends on many records): "
            "answer it with kind='statistical'; the individual factors would "
            "spend 2ε."
        )
    cols = _columns_of(parse_filter(query.where))
    if query.column:
        cols.add(query.column)
    if query.by:
        cols.add(query.by)
    for c in cols:
        _col(df, c)
    sup = prior.support
    if query.agg in ("count", "proportion", "mean", "sum", "median") and not isinstance(sup, NumericRange):
        raise ParameterError(f"{query.agg} has a numeric answer: declare a numeric range LOWER:UPPER[:STEP].")
    if query.agg == "mode" and not isinstance(sup, CategoricalRange):
        raise ParameterError(
            f"mode({query.column}) answers a category: declare the categories "
            f"(e.g. --range {query.column}=1,2,3)."
        )
    if (
        query.agg in ("mean", "sum", "median") or (query.agg == "value" and isinstance(sup, NumericRange))
    ) and not pd.api.types.is_numeric_dtype(df[query.column]):
        raise ParameterError(f"{query.agg}({query.column}): column {query.column!r} is not numeric.")
    if query.by:
        if groups is None or len(list(groups)) == 0:
            raise ParameterError(
                f"'by {query.by}' needs the groups declared (not read from the "
                f"data), e.g. --groups {query.by}=1,2,3."
            )
        if query.agg == "proportion":
            raise ParameterError(
                f"proportion … by {query.by}: every group's proportion divides by the number of ALL "
                "records, so the groups are not disjoint (thesis Proposition 4 does not apply); ask "
                f"count … by {query.by} instead."
            )
        groups = list(groups)
        if len(set(map(_key, groups))) != len(groups):
            raise ParameterError(f"The declared groups of {query.by!r} contain duplicates.")
    else:
        groups = None
    prior.weights()  # prior errors now, before any spending
    return kind, groups


def _component(df, query: Query, sup, w, mask, au: int, ad: int):
    """(class, mass, center index, true value, operator note) of one query component."""
    center, tv, note = _center(df, query, sup, mask)
    if center is None:
        return [2] * len(w), [0, 0, (1 << ALPHA_BITS) * sum(w)], None, tv, note
    cls, mass, _ = refine_weights(w, _distances(sup, center), au, ad)
    return cls, mass, center, tv, note


def _center(df, query: Query, sup, mask):
    """(grid index of f(D) or None when undefined, true value, operator note). PRIVATE."""
    tv = true_answer(df, query, mask)
    center, note = None, ""
    if tv is not None:
        if query.agg == "mode":
            cnt = [int(tv.get(_key(c), 0)) for c in sup.values()]
            # the most frequent declared category (ties: the first declared)
            center = int(np.argmax(cnt)) if max(cnt) > 0 else None
            if center is None:
                note = "no record has a declared category: answered from the prior."
        elif isinstance(sup, CategoricalRange):
            center, _ = sup.index_of(tv)
            if center is None:
                note = f"the true value {tv!r} is not a declared category: answered from the prior."
        else:
            try:
                x = float(tv)
            except (TypeError, ValueError):
                x = float("nan")
            if math.isnan(x):
                note = f"the true value {tv!r} is not a number: answered from the prior."
            else:
                center, clamped = sup.index_of(x)
                if clamped:
                    note = (
                        f"the true answer {x:g} lies outside the declared range and was "
                        f"clamped to {sup.value(center):g}."
                    )
    else:
        why = "no single record matches" if query.agg == "value" else "no record matches"
        note = f"{why} the filter: answered from the prior."
    return center, tv, note


def exact_distribution(
    df: pd.DataFrame, query, prior: Prior, epsilon: float, kind: str | None = None, split: float = 0.5
) -> list[Fraction]:
    """The exact refined distribution (fractions over the support) that :func:`refine_query`
    samples for a query without groups.  PRIVATE: it discloses the true answer.
    """
    if not isinstance(query, Query):
        query = parse_query(query)
    eps = _check_epsilon(epsilon)
    kind, _groups = _validate(df, query, prior, kind, None)
    au, ad = factors(eps, kind, split)
    w = prior.weights()
    mask = evaluate_filter(df, parse_filter(query.where))
    cls, mass, *_ = _component(df, query, prior.support, w, mask, au, ad)
    return refined_probabilities(w, cls, mass)


def refine_query(
    df: pd.DataFrame,
    query,
    prior: Prior,
    epsilon: float,
    kind: str | None = None,
    rng=None,
    *,
    ledger: BudgetLedger | str | os.PathLike | None = None,
    groups: Iterable | None = None,
    split: float = 0.5,
    requester: str | None = None,
) -> QueryAnswer:
    """Answer ``query`` on ``df`` by knowledge refinement of ``prior`` (ε-DP, thesis ch. 5).

    ``query``: a :class:`Query` or its text (:func:`parse_query`); ``prior``: a :class:`Prior`
    over the declared range of the answer; ``kind``: 'statistical' or 'individual' (default
    from the query: ``value(…)`` is individual; claiming 'individual' for a statistical query
    is refused); ``split`` t ∈ [0, 1] for statistical queries (αu = e^{tε}, αd = e^{-(1-t)ε});
    ``groups``: declared groups of a ``… by COL`` query (one component per group, disjoint
    records: ε in total, Proposition 4).  With a ``ledger`` the ε is spent there; a query
    beyond the remaining budget raises :class:`BudgetExceeded` and spends nothing, as does
    any invalid query.  ``ledger`` may be the path of a ledger file: the whole answer then runs
    under the file's lock (:func:`locked_ledger`) and the file is written before the answer
    is returned.  ``rng``: a Generator or seed (default: OS entropy).
    """
    if isinstance(ledger, (str, os.PathLike)):
        with locked_ledger(ledger) as bound:
            return refine_query(
                df,
                query,
                prior,
                epsilon,
                kind,
                rng,
                ledger=bound,
                groups=groups,
                split=split,
                requester=requester,
            )
    if isinstance(query, str):
        query = parse_any(query)
    if isinstance(query, MultiQuery):  # a vector answer (thesis §5.3): jointly, one prior each
        if groups is not None:
            raise ParameterError("A multicomponent query has no groups (ask '… by COL' separately).")
        return refine_multicomponent(
            df, query, prior, epsilon, kind=kind, rng=rng, ledger=ledger, split=split, requester=requester
        )
    if not isinstance(query, Query):
        query = parse_query(query)
    prior = _as_prior(prior, query)
    eps = _check_epsilon(epsilon)
    if not (0.0 <= float(split) <= 1.0):
        raise ParameterError(f"split t must be in [0, 1], got {split!r}.")
    kind, groups = _validate(df, query, prior, kind, groups)
    if ledger is not None:
        ledger.check(eps)
    rng = as_rng(rng)
    au, ad = factors(eps, kind, split)
    w = prior.weights()
    sup = prior.support
    base_mask = evaluate_filter(df, parse_filter(query.where))
    comps = [None] if groups is None else groups
    responses, trues, refined_all, notes, counts = [], [], [], [], []
    for g in comps:
        mask = base_mask if g is None else base_mask & _compare(df[query.by], "==", g).to_numpy()
        counts.append(int(np.count_nonzero(mask)))
        label = "" if g is None else f"group {query.by} = {g}: "
        cls, mass, center, tv, note = _component(df, query, sup, w, mask, au, ad)
        if note:
            notes.append(label + note)
        i = sample_refined(rng, w, cls, mass)
        responses.append(sup.value(i))
        trues.append(
            tv if query.agg != "mode" or tv is None else (sup.value(center) if center is not None else None)
        )
        refined_all.append([float(p) for p in refined_probabilities(w, cls, mass)])
    support_vals = [_plain(v) for v in sup.values()]
    ans = QueryAnswer(
        query=query.describe(),
        kind=kind,
        epsilon=eps,
        response=responses[0] if groups is None else responses,
        guarantee=_guarantee(kind, eps, sup, groups, float(split)),
        prior=prior.describe(),
        support=support_vals,
        prior_probs=[float(x) for x in prior.probabilities()],
        refined=refined_all[0] if groups is None else refined_all,
        true_value=trues[0] if groups is None else trues,
        notes=notes,
        groups=None if groups is None else [_plain(g) for g in groups],
        records=counts[0] if groups is None else counts,
    )
    if ledger is not None:
        ledger.spend(
            eps,
            query=ans.query,
            kind=kind,
            prior=ans.prior,
            response=ans.public()["response"],
            requester=requester,
        )
        ans.remaining = ledger.remaining
    return ans


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


# =========================================================================== multicomponent (§5.3)

DISTANCES = ("max", "sum", "euclidean", "priority")
MODES = ("joint", "split")


@dataclass(frozen=True)
class MultiQuery:
    """A query whose answer is a vector (f1, …, fn) (thesis §5.3): one :class:`Query` per
    component; ``"mean(income), mean(age) where region == 3"`` (shared filter) or
    ``"mean(income) where region == 3; count where age > 30"`` (one filter each).
    """

    components: tuple[Query, ...]
    text: str = ""

    @property
    def kind(self) -> str:
        return "individual" if _same_record(self.components) else "statistical"

    def describe(self) -> str:
        return self.text or "; ".join(q.describe() for q in self.components)


def _split_top(text: str, sep: str, stop_words: tuple = ()) -> tuple[list[str], str]:
    """Split ``text`` at ``sep`` outside parentheses, quotes and backticks; stop (returning the
    rest) at the first top-level word of ``stop_words``.
    """
    parts, cur, depth, quote, i = [], [], 0, "", 0
    stop = re.compile(r"\b(" + "|".join(stop_words) + r")\b", re.IGNORECASE) if stop_words else None
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            cur.append(ch)
        elif ch in "([":
            depth += 1
            cur.append(ch)
        elif ch in ")]":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            # match at i without slicing (a slice per character made long queries quadratic)
            m = stop.match(text, i) if (stop is not None and depth == 0) else None
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                parts.append("".join(cur))
                return parts, text[i:]
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts, ""


def parse_any(text: str) -> Query | MultiQuery:
    """A one-component :class:`Query` or a :class:`MultiQuery` (components separated by commas
    before a shared ``where``, or by semicolons each with its own filter).

    >>> mq = parse_any("mean(income), count where region == 3")
    >>> [q.describe() for q in mq.components]
    ['mean(income) where region == 3', 'count where region == 3']
    """
    text = str(text or "")
    _check_length(text)
    parts, _ = _split_top(text, ";")
    parts = [p.strip() for p in parts]
    if len(parts) > 1:
        if any(not p for p in parts):
            raise ParameterError("Query: an empty component between ';' (write q1; q2).")
        comps = [parse_query(p) for p in parts]
    else:
        heads, rest = _split_top(text, ",", ("where", "by"))
        heads = [h.strip() for h in heads]
        if len(heads) == 1:
            return parse_query(text)
        if any(not h for h in heads):
            raise ParameterError("Query: an empty component between ',' (write mean(x), mean(y) where …).")
        comps = [parse_query(h + " " + rest) for h in heads]
    if any(q.by for q in comps):
        raise ParameterError(
            "Query: a multicomponent query cannot use 'by'; ask the groups as a separate '… by COL' query."
        )
    if len({q.describe() for q in comps}) != len(comps):
        raise ParameterError("Query: the same component is asked twice.")
    return MultiQuery(tuple(comps), " ".join(text.split()))


def _same_record(comps: Sequence[Query]) -> bool:
    """All components are ``value(…)`` of the records matching one and the same filter."""
    wh = {" ".join((q.where or "").split()) for q in comps}
    return all(q.agg == "value" for q in comps) and len(wh) == 1 and wh != {""}


def _conjuncts(node) -> list:
    """The operands of the top-level chain of ``and`` (without recursion)."""
    out, stack = [], ([node] if node is not None else [])
    while stack:
        n = stack.pop()
        if n[0] == "and":
            stack += [n[2], n[1]]
        else:
            out.append(n)
    return out


def _atom_set(atom):
    """(column, ('eq', {keys}) | ('iv', lo, lo_open, hi, hi_open)) of a comparison atom that
    constrains a column to a set or interval; None for atoms that do not (!=, not, or).
    """
    if atom[0] == "in":
        return atom[1], ("eq", {_key(v) for v in atom[2]})
    if atom[0] != "cmp":
        return None
    _, op, col, lit = atom
    if op == "==":
        return col, ("eq", {_key(lit)})
    if isinstance(lit, bool) or not isinstance(lit, (int, float)):
        return None
    # intervals of the extended line: ±inf are values a column can hold (x > 5 holds for
    # x = +inf, and so does x == 1e999), so the infinite ends are closed
    inf = math.inf
    return col, {
        "<": ("iv", -inf, False, lit, True),
        "<=": ("iv", -inf, False, lit, False),
        ">": ("iv", lit, True, inf, False),
        ">=": ("iv", lit, False, inf, False),
    }.get(op)


def _key_number(k: str) -> int | float:
    """The exact number of a :func:`_key` (an int for integers: Python compares ints and
    floats exactly); ValueError for a text key.
    """
    return int(k) if _INT_LITERAL.fullmatch(k) and len(k) <= MAX_NUMBER_CHARS else float(k)


def _atoms_disjoint(a, b) -> bool:
    """Whether two constraints on one column admit no common value (exact comparisons;
    NaN satisfies no interval and no number).
    """
    if a[0] == "eq" and b[0] == "eq":
        return not (a[1] & b[1])
    if a[0] == "iv" and b[0] == "iv":
        lo, lo_open = max((a[1], a[2]), (b[1], b[2]), key=lambda t: (t[0], t[1]))
        hi, hi_open = min((a[3], a[4]), (b[3], b[4]), key=lambda t: (t[0], not t[1]))
        return lo > hi or (lo == hi and (lo_open or hi_open))
    eq, iv = (a, b) if a[0] == "eq" else (b, a)
    vals = []
    for k in eq[1]:
        try:
            vals.append(_key_number(k))
        except ValueError:
            return False  # text against an interval: not provably disjoint
    for v in vals:
        above = v > iv[1] or (v == iv[1] and not iv[2])
        below = v < iv[3] or (v == iv[3] and not iv[4])
        if above and below:
            return False
    return True


def disjoint_components(comps: Sequence[Query]) -> bool:
    """Whether the components' filters select pairwise disjoint sets of records whatever the
    data (decided from the query text alone, never from the data): every pair has, in the
    conjunctions of their filters, constraints on one column that no value satisfies together
    (``region == 1`` / ``region == 2``, ``age < 30`` / ``age >= 30``, ``in (…)`` sets).
    Proportions divide by the number of all records and are never disjoint.
    """
    if len(comps) < 2 or any(q.agg == "proportion" for q in comps):
        return False
    atoms = []
    for q in comps:
        sets: dict[str, list] = {}
        for a in _conjuncts(parse_filter(q.where)):
            cs = _atom_set(a)
            if cs is not None and cs[1] is not None:
                sets.setdefault(cs[0], []).append(cs[1])
        atoms.append(sets)
    for i, j in itertools.combinations(range(len(comps)), 2):
        if not any(
            _atoms_disjoint(x, y)
            for col in atoms[i].keys() & atoms[j].keys()
            for x in atoms[i][col]
            for y in atoms[j][col]
        ):
            return False
    return True


def _component_distance(sup, center: int | None) -> tuple[list[int], int]:
    """Table 5.1 distance of every point of one component's range to its centre (0 for all
    when the component is undefined), and the largest possible distance.
    """
    if center is None:
        return [0] * sup.size, 1
    nominal = isinstance(sup, CategoricalRange) and not sup.ordered
    return _distances(sup, center), (1 if nominal else max(sup.size - 1, 1))


def joint_distances(dists: Sequence[Sequence[int]], dmax: Sequence[int], distance: str) -> list[int]:
    """Integer distance over the product range (row-major, last component fastest) from the
    components' Table 5.1 distances.  Each component is measured as a fraction of its largest
    distance (so income in euros and age in years weigh alike), scaled by the lcm to stay exact:
    'max' (Chebyshev), 'sum' (L1), 'euclidean' (the squared L2: the same balls), 'priority'
    (lexicographic: the first component decides, the next breaks ties -- thesis Example 7's
    asymmetric d).
    """
    if distance not in DISTANCES:
        raise ParameterError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}.")
    if distance == "priority":
        out = [0]
        for d, m in zip(dists, dmax):
            out = [o * (m + 1) + di for o in out for di in d]
        return out
    L = math.lcm(*map(int, dmax))
    scaled = [[di * (L // m) for di in d] for d, m in zip(dists, dmax)]
    out = [0]
    for d in scaled:
        if distance == "max":
            out = [max(o, di) for o in out for di in d]
        elif distance == "sum":
            out = [o + di for o in out for di in d]
        else:
            out = [o + di * di for o in out for di in d]
    return out


def _joint_weights(priors: Sequence[Prior], joint_weights) -> list[int]:
    if joint_weights is None:
        out = [1]
        for p in priors:
            w = p.weights()
            out = [a * b for a in out for b in w]  # exact product of the components' weights
        return out
    arr = np.asarray(joint_weights, dtype=np.float64)
    shape = tuple(p.support.size for p in priors)
    if arr.shape != shape:
        raise ParameterError(
            f"joint prior: weights of shape {shape} expected (one per point), got {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or not arr.sum() > 0:
        raise ParameterError("joint prior: the weights must be numbers >= 0, not all zero.")
    return [int(v) for v in np.rint(arr.ravel() / arr.sum() * PRIOR_TOTAL)]


def _unravel(i: int, sizes: Sequence[int]) -> list[int]:
    out = []
    for n in reversed(sizes):
        out.append(i % n)
        i //= n
    return out[::-1]


def _marginals(probs: Sequence, sizes: Sequence[int]) -> list[list[float]]:
    arr = np.asarray([float(p) for p in probs], dtype=np.float64).reshape(tuple(sizes))
    arr = arr / arr.sum()  # weights or probabilities: marginal probabilities
    axes = range(len(sizes))
    return [arr.sum(axis=tuple(a for a in axes if a != k)).tolist() for k in axes]


def _split_epsilons(epsilon, n: int, disjoint: bool) -> tuple[list[Fraction], Fraction]:
    """(εi per component, total ε spent) of a split answer: a list gives the εi (total Σεi,
    or max εi for disjoint components); one ε is the total: ε/n each, or ε each when disjoint.
    """
    if isinstance(epsilon, (list, tuple)):
        if len(epsilon) != n:
            raise ParameterError(f"ε: give one value per component ({n}), got {len(epsilon)}.")
        eps = [eps_fraction(_check_epsilon(e)) for e in epsilon]
        return eps, (max(eps) if disjoint else sum(eps, Fraction(0)))
    e = eps_fraction(_check_epsilon(epsilon))
    if disjoint:
        return [e] * n, e
    if e / n < Fraction(1, 10**9):
        raise ParameterError(f"ε = {float(e):g} split over {n} components is below 1e-9 each.")
    return [e / n] * n, e


def refine_multicomponent(
    df: pd.DataFrame,
    query,
    priors: Sequence[Prior] | Prior,
    epsilon,
    *,
    mode: str = "joint",
    distance: str = "max",
    kind: str | None = None,
    rng=None,
    ledger: BudgetLedger | str | os.PathLike | None = None,
    split: float = 0.5,
    requester: str | None = None,
    joint_weights=None,
) -> QueryAnswer:
    """Answer a vector query (f1, …, fn) by knowledge refinement, thesis §5.3.

    ``mode='joint'`` (§5.1's mechanism is independent of the number of components): one draw
    from the joint prior over the product of the declared ranges (the product of ``priors``,
    or ``joint_weights`` of that shape), refined with the ``distance`` over the product range
    (:func:`joint_distances`; Example 7: the choice is the office's).  One ε for the whole
    vector: statistical factors (any two data sets), or individual factors when every
    component is ``value(…)`` of the same filter (one record's vector, Proposition 3).

    ``mode='split'``: each component refined separately with its own εi and drawn
    independently; ε = Σεi by sequential composition (§5.3), or max εi when the components'
    filters select disjoint records (Proposition 4, :func:`disjoint_components`).
    ``epsilon``: the total, or one εi per component (split only).

    The ledger spends the composed ε; a query beyond the remaining budget or invalid spends
    nothing.  ``ledger`` may be the path of a ledger file (see :func:`refine_query`).
    ``response`` is the tuple of component answers.
    """
    if isinstance(ledger, (str, os.PathLike)):
        with locked_ledger(ledger) as bound:
            return refine_multicomponent(
                df,
                query,
                priors,
                epsilon,
                mode=mode,
                distance=distance,
                kind=kind,
                rng=rng,
                ledger=bound,
                split=split,
                requester=requester,
                joint_weights=joint_weights,
            )
    if not isinstance(query, MultiQuery):
        query = parse_any(query)
        if isinstance(query, Query):
            query = MultiQuery((query,), query.text)
    comps = query.components
    n = len(comps)
    if mode not in MODES:
        raise ParameterError(f"mode must be 'joint' or 'split', got {mode!r}.")
    if isinstance(priors, Prior):
        priors = [priors]
    priors = list(priors)
    if len(priors) != n:
        raise ParameterError(f"Give one prior per component: {n} components, {len(priors)} priors.")
    if not (0.0 <= float(split) <= 1.0):
        raise ParameterError(f"split t must be in [0, 1], got {split!r}.")
    kinds = []
    for q, p in zip(comps, priors):
        k, _ = _validate(df, q, _as_prior(p, q), None, None)
        kinds.append(k)
    sizes = [p.support.size for p in priors]
    disjoint = False
    if mode == "joint":
        if isinstance(epsilon, (list, tuple)):
            raise ParameterError(
                "ε: a joint answer takes one ε for the whole vector (per component: mode split)."
            )
        eps_total = eps_fraction(_check_epsilon(epsilon))
        jkind = kind or query.kind
        if jkind not in ("statistical", "individual"):
            raise ParameterError(f"kind must be 'statistical' or 'individual', got {jkind!r}.")
        if jkind == "individual" and not _same_record(comps):
            raise ParameterError(
                "A joint individual answer needs every component to be value(…) of the same "
                "filter (one record); answer it with kind='statistical'."
            )
        if distance not in DISTANCES:
            raise ParameterError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}.")
        if math.prod(sizes) > MAX_SUPPORT:
            raise ParameterError(
                f"The product of the declared ranges has {math.prod(sizes):,} points (at most "
                f"{MAX_SUPPORT:,}): declare coarser steps, or answer the components with mode split."
            )
        w = _joint_weights(priors, joint_weights)
        if sum(w) == 0:
            raise ParameterError("The joint prior puts no probability on the declared ranges.")
        eps_list = [eps_total]
        kinds_used = [jkind]
    else:
        if joint_weights is not None:
            raise ParameterError("A joint prior needs mode joint (split refines each component's own prior).")
        if kind is not None:
            raise ParameterError(
                "kind: in mode split each component has its own kind (value(…) is individual)."
            )
        disjoint = disjoint_components(comps)
        eps_list, eps_total = _split_epsilons(epsilon, n, disjoint)
        kinds_used = kinds
    if ledger is not None:
        ledger.check(eps_total)
    rng = as_rng(rng)
    masks = [evaluate_filter(df, parse_filter(q.where)) for q in comps]
    centers, trues, notes = [], [], []
    for i, (q, p, m) in enumerate(zip(comps, priors, masks)):
        c, tv, note = _center(df, q, p.support, m)
        if q.agg == "mode" and tv is not None:
            tv = p.support.value(c) if c is not None else None
        centers.append(c)
        trues.append(tv)
        if note:
            notes.append(f"component {i + 1} ({q.describe()}): {note}")
    if mode == "joint":
        au, ad = factors(eps_total, kinds_used[0], split)
        comp_d = [_component_distance(p.support, c) for p, c in zip(priors, centers)]
        if all(c is None for c in centers):
            cls, mass = [2] * len(w), [0, 0, (1 << ALPHA_BITS) * sum(w)]
        else:
            dist = joint_distances([d for d, _ in comp_d], [m for _, m in comp_d], distance)
            cls, mass, _ = refine_weights(w, dist, au, ad)
        idx = _unravel(sample_refined(rng, w, cls, mass), sizes)
        refined = _marginals(refined_probabilities(w, cls, mass), sizes)
        prior_probs = _marginals(w, sizes)
    else:
        idx, refined, prior_probs = [], [], []
        for p, c, e, k in zip(priors, centers, eps_list, kinds_used):
            wi = p.weights()
            au, ad = factors(e, k, split)
            if c is None:
                cls, mass = [2] * len(wi), [0, 0, (1 << ALPHA_BITS) * sum(wi)]
            else:
                cls, mass, _ = refine_weights(wi, _distances(p.support, c), au, ad)
            idx.append(sample_refined(rng, wi, cls, mass))
            refined.append([float(x) for x in refined_probabilities(wi, cls, mass)])
            prior_probs.append([float(x) for x in p.probabilities()])
    response = tuple(_plain(p.support.value(i)) for p, i in zip(priors, idx))
    ans = QueryAnswer(
        query=query.describe(),
        kind=kinds_used[0] if mode == "joint" else ("individual" if "individual" in kinds else "statistical"),
        epsilon=float(eps_total),
        response=response,
        guarantee=_multi_guarantee(
            comps,
            priors,
            mode,
            distance,
            kinds_used,
            eps_list,
            eps_total,
            disjoint,
            float(split),
            joint_weights,
        ),
        prior=("joint prior " if joint_weights is not None else "")
        + "; ".join(f"{q.describe()}: {p.describe()}" for q, p in zip(comps, priors)),
        support=[[_plain(v) for v in p.support.values()] for p in priors],
        prior_probs=prior_probs,
        refined=refined,
        true_value=trues,
        notes=notes,
        records=[int(np.count_nonzero(m)) for m in masks],
        components=[q.describe() for q in comps],
        mode=mode,
        epsilons=[float(e) for e in eps_list] if mode == "split" else None,
    )
    if ledger is not None:
        ledger.spend(
            eps_total,
            query=ans.query,
            kind=ans.kind,
            prior=ans.prior,
            response=ans.public()["response"],
            requester=requester,
        )
        ans.remaining = ledger.remaining
    return ans


def _multi_guarantee(comps, priors, mode, distance, kinds, eps_list, eps_total, disjoint, split, jw) -> str:
    n = len(comps)
    ranges = "; ".join(f"{q.describe()} in {p.support.describe()}" for q, p in zip(comps, priors))
    if mode == "joint":
        dname = {
            "max": "the largest of the components' distances",
            "sum": "the sum of the components' distances",
            "euclidean": "the Euclidean combination of the components' distances",
            "priority": "the components' distances in priority order (the first decides, the next breaks ties)",
        }[distance]
        if kinds[0] == "individual":
            core = (
                f"ε-differential privacy with ε = {float(eps_total):g} for the whole vector with respect to "
                "adding or removing one record (changing the record's values: 2ε): αu ≤ e^ε, αd ≥ e^−ε "
                "(thesis Proposition 3); when no single record matches the filter the response is a "
                "draw from the prior."
            )
        else:
            core = (
                f"ε-differential privacy with ε = {float(eps_total):g} for the whole vector, independent of "
                f"the query's sensitivity and of the number of components: αu ≤ e^(tε), αd ≥ e^(−(1−t)ε) "
                f"(t = {split:g}), so for any two data sets the probability of every response differs by at "
                "most e^ε (thesis Proposition 2, §5.3)."
            )
        body = (
            f"The {n} components were answered jointly (thesis §5.3): one draw from the researcher's "
            + ("joint prior" if jw is not None else "prior (the product of the components' priors)")
            + " over the product of the declared ranges, refined towards the true vector with the "
            f"distance {dname}, each measured as a fraction of its declared range (thesis Example 7: the "
            "distance over the product range is the office's choice); " + core
        )
    else:
        each = ", ".join(
            f"ε{i + 1} = {float(e):g} ({'individual' if k == 'individual' else 'statistical'})"
            for i, (e, k) in enumerate(zip(eps_list, kinds))
        )
        if disjoint:
            comp = (
                f"the components' filters select disjoint sets of records (read from the query, not the data), "
                f"so together they are ε-DP with ε = max εi = {float(eps_total):g} with respect to adding or "
                "removing one record (thesis Proposition 4)."
            )
        else:
            comp = (
                f"by sequential composition (thesis §5.3) the vector is ε-DP with ε = Σεi = {float(eps_total):g}"
                + (
                    " with respect to adding or removing one record (an individual component's record "
                    "changing its value: twice its εi)."
                    if "individual" in kinds
                    else " for any two data sets."
                )
            )
        body = (
            f"The {n} components were refined separately, each from its own prior and drawn "
            f"independently: {each}; " + comp
        )
    return (
        "Answered by knowledge refinement (Soria-Comas, thesis ch. 5). "
        + body
        + f" The responses lie in the declared ranges ({ranges}); a numeric true answer outside its range "
        "was clamped into it, a categorical one outside the declared categories does not move the draw. "
        "The draw is exact: integer arithmetic and uniform random integers only. Sequential "
        f"composition: this answer spends ε = {float(eps_total):g} of the data set's query budget."
    )


# =========================================================================== the ledger
# The ledger is its own module (dpstudio.engine.query_ledger); its names are re-exported above.


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
    return CategoricalRange(tuple(_literal(c) for c in cats), ordered)


def _literal(s: str):
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
                probs[_literal(k.strip())] = float(v)
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
    query: Query, ranges: dict[str, str], df: pd.DataFrame | None = None, ordered: bool = False
):
    """The declared range of ``query``'s answer from ``{name: spec}`` (CLI ``--range``): the key
    is the query's column, or ``count`` / ``proportion`` / ``answer``.  A proportion defaults
    to 0:1:0.001; everything else must be declared (never read from the data).  Integer
    columns and counts get step 1 unless a step is given.
    """
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
        df is not None
        and query.column in getattr(df, "columns", ())
        and query.agg in ("value", "median")
        and pd.api.types.is_integer_dtype(df[query.column])
    )
    return parse_range(spec, integer=integer, ordered=ordered)
