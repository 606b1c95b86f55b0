"""The query desk's language: the filter parser and evaluator, queries, multicomponent
queries and the disjointness of their filters (decided from the text alone).

Parsed by a small operator-precedence parser with explicit stacks (no recursion, never
``eval``); limits: :data:`MAX_QUERY_CHARS`, :data:`MAX_FILTER_TERMS`,
:data:`MAX_FILTER_DEPTH`, :data:`MAX_NUMBER_CHARS`.  Numbers are compared exactly (an integer
literal never passes through a double).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError

#: What the desk answers: ``value(…)`` is an individual query, the others statistical.
AGGREGATES = (
    "count",
    "proportion",
    "mean",
    "sum",
    "median",
    "mode",
    "value",
    "variance",
    "quantile",
    "min",
    "max",
    "ratio",
)
STATISTICAL = tuple(a for a in AGGREGATES if a != "value")
#: Aggregates that answer a column (``mean(income)``); count and proportion count records.
NEEDS_COLUMN = ("mean", "sum", "median", "mode", "value", "variance", "quantile", "min", "max", "ratio")
#: Aggregates of a numeric column.
NUMERIC_AGGREGATES = ("mean", "sum", "median", "variance", "quantile", "min", "max", "ratio")


# =========================================================================== categories


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
    """``agg(column) [where filter] [by column[, column2]]``; ``agg`` one of :data:`AGGREGATES`.

    ``param``: the level p of ``quantile(x, p)``; ``column2``: the denominator of
    ``ratio(x, y)``; ``by2``: the second grouping column of a contingency table.
    """

    agg: str
    column: str | None = None
    where: str | None = None
    by: str | None = None
    text: str = ""
    param: float | None = None
    column2: str | None = None
    by2: str | None = None

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
    r"^\s*(?P<agg>[A-Za-z_]+)\s*(?:\((?P<args>(?:`[^`]+`|[^()`])*)\))?"
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
    col, param, col2 = _arguments(agg, m.group("args"))
    rest = m.group("rest").strip()
    where = by = by2 = None
    bm = re.search(
        r"\bby\s+(`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*)(?:\s*,\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_.]*))?\s*$", rest
    )
    if bm:
        by = bm.group(1).strip("`")
        by2 = bm.group(2).strip("`") if bm.group(2) else None
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
    if by2 is not None and by2 == by:
        raise ParameterError(f"Query: 'by {by}, {by2}' names the same column twice.")
    return Query(agg, col, where, by, " ".join(str(text).split()), param, col2, by2)


def _split_args(text: str) -> list[str]:
    """Arguments separated by commas outside backticks."""
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur).strip())
    return out


def _arguments(agg: str, args: str | None) -> tuple[str | None, float | None, str | None]:
    """(column, quantile level, second column) of ``agg(args)``."""
    parts = [a.strip("`") for a in _split_args(args)] if args is not None else []
    want = 2 if agg in ("quantile", "ratio") else 1
    if len(parts) > want or (len(parts) == 2 and want == 1):
        raise ParameterError(
            f"Query: {agg} takes {want} argument{'s' if want > 1 else ''}, got {len(parts)}."
        )
    col = parts[0] if parts else None
    if col in ("", "*"):
        col = None
    if agg in NEEDS_COLUMN and not col:
        raise ParameterError(f"Query: {agg} needs a column, e.g. {agg}(income).")
    if want == 1:
        return col, None, None
    second = parts[1] if len(parts) == 2 else ""
    if agg == "ratio":
        if not second:
            raise ParameterError(
                "Query: ratio needs two columns, e.g. ratio(FEDTAX, FICA) = ΣFEDTAX / ΣFICA."
            )
        return col, None, second
    try:
        p = float(second)
    except ValueError:
        p = math.nan
    if not (0.0 <= p <= 1.0):
        raise ParameterError(
            f"Query: quantile needs a level p in [0, 1], e.g. quantile({col}, 0.9); got {second!r}."
        )
    return col, p, None


# =========================================================================== multicomponent queries (§5.3)


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


def parse_any(text: str, *, allow_by: bool = False) -> Query | MultiQuery:
    """A one-component :class:`Query` or a :class:`MultiQuery` (components separated by commas
    before a shared ``where``, or by semicolons each with its own filter).  ``allow_by``:
    several aggregates of the same groups (``count, mean(x) by region``: noise mechanisms).

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
    if allow_by and any(q.by for q in comps):
        if len({(q.by, q.by2) for q in comps}) != 1:
            raise ParameterError("Query: every component must be grouped by the same columns ('… by COL').")
    elif any(q.by for q in comps):
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
