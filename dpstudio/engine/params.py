"""Method parameters (:class:`Param`) and the ONE validation path of the engine.

Every check of a parameter value -- the method's own parameters (:meth:`Param.check`), k
against the number of records (:func:`check_k`), ε (:func:`check_epsilon`), sweep grids and
the command line's ``--param`` text -- goes through this module, and every message has the
form of scikit-learn's parameter validation::

    The 'k' parameter of method 'mdav' must be an int in the range [2, inf). Got 1 instead.

A value of the wrong type raises :class:`ParameterTypeError` (a :class:`TypeError` and a
:class:`~dpstudio.engine.errors.ParameterError`), a value of the right type outside its
allowed range or set raises :class:`~dpstudio.engine.errors.ParameterError` (a
:class:`ValueError`).  Both print as one line for the user.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstudio.engine.errors import ParameterError, ParameterTypeError, PrivacyLeakWarning

#: Textual spellings of booleans accepted from the command line and project files.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

#: What each kind accepts, as said in messages.
KIND_WORDS = {
    "int": "an int",
    "float": "a float",
    "choice": "a str",
    "bool": "a bool",
    "mapping": "a dict (column -> value)",
    "per-column": "a dict (column -> text)",
    "str": "a str",
}

#: Longest text of one value of a ``per-column`` parameter (a list of breaks, merges, ...).
MAX_ITEM_CHARS = 100_000


#: The range of ε (total budget, and every sweep value).  Below 10⁻⁶ the discrete Laplace rate
#: ε_i/Δ_Z falls under the sampler's 2⁻⁶² for fine grids and the staircase's (1 − e^{-ε})³
#: heads for underflow; 10⁻⁶ releases (almost) only noise anyway.  The maximum 10⁴ is finite
#: for Laplace (rate ε_i/Δ_Z, e^{-rate} underflows harmlessly to 0) and leaves room for the
#: staircase split ε_i/n_c of clustered methods (ε = 10⁴, n_c = 100: 100 per draw); a single
#: staircase draw needs ε_draw ≲ 740 (e^{-ε} > 0), which the noise code must cap (see the
#: module notes of algorithms/noise.py).
EPSILON_MIN = 1e-6
EPSILON_MAX = 1e4

#: Budget weights (budget='weights') are relative: within [10⁻³, 10³] the smallest share is at
#: least ε/(1 + (m − 1)·10⁶), so the split never makes ε_i vanish or overflow.
WEIGHT_MIN = 1e-3
WEIGHT_MAX = 1e3


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a message stays one readable line)."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 1] + "…"


def where(name: str, method_id: str | None) -> str:
    """``The 'k' parameter of method 'mdav'`` (or ``The 'k' parameter`` without a method)."""
    return f"The {name!r} parameter" + (f" of method {method_id!r}" if method_id else "")


def invalid_value(name: str, method_id: str | None, constraint: str, value: Any) -> ParameterError:
    """The one message format, for a value of the right type that is not allowed."""
    return ParameterError(f"{where(name, method_id)} must be {constraint}. Got {shown(value)} instead.")


def invalid_type(name: str, method_id: str | None, constraint: str, value: Any) -> ParameterTypeError:
    """The one message format, for a value of the wrong type."""
    return ParameterTypeError(f"{where(name, method_id)} must be {constraint}. Got {shown(value)} instead.")


def interval_text(lo: float | None, hi: float | None, lo_closed: bool = True, hi_closed: bool = True) -> str:
    """``[2, inf)``, ``(0, inf)``, ``[0, 0.99]`` -- scikit-learn's interval notation."""
    lo_s = "-inf" if lo is None else f"{lo:g}"
    hi_s = "inf" if hi is None else f"{hi:g}"
    left = "[" if (lo_closed and lo is not None) else "("
    right = "]" if (hi_closed and hi is not None) else ")"
    return f"{left}{lo_s}, {hi_s}{right}"


def in_interval(
    v: float, lo: float | None, hi: float | None, lo_closed: bool = True, hi_closed: bool = True
) -> bool:
    if isinstance(v, float) and not math.isfinite(v):  # an int of any width compares exactly
        return False
    if lo is not None and (v < lo or (v == lo and not lo_closed)):
        return False
    if hi is not None and (v > hi or (v == hi and not hi_closed)):
        return False
    return True


def as_int(value: Any, name: str, method_id: str | None, constraint: str) -> int:
    """``value`` as an int (ints, integral floats and their text); else :class:`ParameterTypeError`."""
    if isinstance(value, (bool, np.bool_)):
        raise invalid_type(name, method_id, constraint, value)
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        f = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise invalid_type(name, method_id, constraint, value) from None
    if not math.isfinite(f) or f != int(f):
        raise invalid_type(name, method_id, constraint, value)
    return int(f)


def as_float(value: Any, name: str, method_id: str | None, constraint: str) -> float:
    """``value`` as a float (numbers and their text); else :class:`ParameterTypeError`."""
    if isinstance(value, (bool, np.bool_)):
        raise invalid_type(name, method_id, constraint, value)
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise invalid_type(name, method_id, constraint, value) from None


@dataclass(frozen=True)
class Param:
    """One method parameter.

    ``kind`` is one of ``int``, ``float``, ``choice``, ``bool``, ``mapping`` (a dict
    column -> value, e.g. budget weights or hierarchies), ``per-column`` (a dict column -> a
    text in the parameter's own grammar, e.g. recoding breaks ``AGE -> "0,15,25,100"``),
    ``str``.  ``minimum``/``maximum`` bound ``int`` and ``float`` values (``min_inclusive``:
    whether the minimum itself is allowed; the maximum always is), and, for a ``mapping`` that
    declares them, each of its values (a float).  A ``float`` must be finite.

    A ``per-column`` parameter declares its grammar: ``item`` parses one column's text (it
    raises ``ValueError`` when the text is wrong; :meth:`check` turns that into the one error
    format, naming the column), ``item_help`` says the grammar in words (the messages, the
    form's placeholder), ``option`` is the name of its own repeatable command-line option
    (``--option COL=TEXT``; empty: only ``--param``) and ``join`` the separator that joins the
    texts of one column given twice (empty: the later one wins).  The checked value keeps
    each column's text (stripped): it is what recipes and the public metadata hold, and the
    method parses it again with ``item``.
    """

    name: str
    kind: str
    default: Any
    help: str
    label: str = ""
    minimum: float | None = None
    maximum: float | None = None
    min_inclusive: bool = True
    choices: tuple = ()
    choice_labels: dict = field(default_factory=dict)
    log_scale: bool = False
    warning: dict = field(default_factory=dict)  # choice value -> warning text
    advanced: bool = False
    item: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)
    item_help: str = ""
    option: str = ""
    join: str = ""
    #: the value (a ``str``), or each column's text (``per-column``), is the path of a file
    #: the method reads: the command line adds it to the inputs the one writer never
    #: overwrites (:func:`input_paths`)
    reads_file: bool = False

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "label": self.label or self.name,
            "kind": self.kind,
            "default": self.default,
            "help": self.help,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "min_inclusive": self.min_inclusive,
            "choices": list(self.choices),
            "choice_labels": dict(self.choice_labels),
            "log_scale": self.log_scale,
            "warning": dict(self.warning),
            "advanced": self.advanced,
            "item_help": self.item_help,
            "option": self.option,
            "join": self.join,
            "reads_file": self.reads_file,
        }

    def constraint(self) -> str:
        """What a valid value is, in the words of the message (``an int in the range [2, inf)``).

        A function of this (frozen) parameter's fields only: worded once per parameter and
        kept on it (every call of a method checks its parameters with it, issue 27 §2).
        """
        text = self.__dict__.get("_constraint_text")
        if text is None:
            text = self.__dict__["_constraint_text"] = self._constraint()
        return text

    def _constraint(self) -> str:
        """:meth:`constraint`, worded from the fields."""
        if self.kind in ("int", "float"):
            return (
                f"{KIND_WORDS[self.kind]} in the range "
                f"{interval_text(self.minimum, self.maximum, self.min_inclusive)}"
            )
        if self.kind == "mapping" and (self.minimum is not None or self.maximum is not None):
            return (
                "a dict (column -> a float in the range "
                f"{interval_text(self.minimum, self.maximum, self.min_inclusive)})"
            )
        if self.kind == "per-column" and self.item_help:
            return f"a dict (column -> {self.item_help})"
        if self.kind == "choice":
            return "a str among {" + ", ".join(map(repr, self.choices)) + "}"
        if self.kind == "bool":
            return "a bool (or one of " + ", ".join(map(repr, TRUE_WORDS + FALSE_WORDS)) + ")"
        return KIND_WORDS.get(self.kind, "a value")

    def check(self, value: Any, method_id: str | None = None) -> Any:
        """Coerce and validate ``value`` (``None``: the default); raise naming the parameter."""
        if value is None:
            if self.default is None:
                return None
            value = self.default
        c = self.constraint()
        if self.kind == "int":
            v = as_int(value, self.name, method_id, c)
            if not in_interval(v, self.minimum, self.maximum, self.min_inclusive):
                raise invalid_value(self.name, method_id, c, value)
            return v
        if self.kind == "float":
            f = as_float(value, self.name, method_id, c)
            if not in_interval(f, self.minimum, self.maximum, self.min_inclusive):
                raise invalid_value(self.name, method_id, c, value)
            return f
        if self.kind == "choice":
            if value in self.choices:
                return value
            if not isinstance(value, str):
                raise invalid_type(self.name, method_id, c, value)
            raise invalid_value(self.name, method_id, c, value)
        if self.kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
            if isinstance(value, numbers.Integral) and int(value) in (0, 1):
                return bool(value)
            if isinstance(value, str):
                low = value.strip().lower()
                if low in TRUE_WORDS:
                    return True
                if low in FALSE_WORDS:
                    return False
                raise invalid_value(self.name, method_id, c, value)
            raise invalid_type(self.name, method_id, c, value)
        if self.kind == "mapping":
            if not isinstance(value, dict):
                raise invalid_type(self.name, method_id, c, value)
            if self.minimum is None and self.maximum is None:
                return dict(value)
            out = {}
            for key, v in value.items():
                try:
                    f = as_float(v, self.name, method_id, c)
                except ParameterTypeError:
                    raise invalid_type(self.name, method_id, c, {key: v}) from None
                if not in_interval(f, self.minimum, self.maximum, self.min_inclusive):
                    raise invalid_value(self.name, method_id, c, {key: v})
                out[str(key)] = f
            return out
        if self.kind == "per-column":
            return self._check_per_column(value, method_id, c)
        if self.kind == "str" and not isinstance(value, str):
            raise invalid_type(self.name, method_id, c, value)
        return value

    def _check_per_column(self, value: Any, method_id: str | None, c: str) -> dict[str, str]:
        """A dict column -> text, each text parsed by ``item`` (empty dict: not given)."""
        if not isinstance(value, dict):
            raise invalid_type(self.name, method_id, c, value)
        out: dict[str, str] = {}
        for key, v in value.items():
            if not isinstance(key, str) or not key.strip():
                raise invalid_value(self.name, method_id, c, {key: v})
            if isinstance(v, (list, tuple)) and all(isinstance(x, (str, numbers.Real)) for x in v):
                v = ",".join(map(str, v))  # a list of numbers / labels: its text
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, numbers.Real)):
                raise invalid_type(self.name, method_id, c, {key: v})
            text = str(v).strip()
            if not text or len(text) > MAX_ITEM_CHARS:
                raise invalid_value(self.name, method_id, c, {key: v})
            if self.item is not None:
                try:
                    self.item(text)
                except (ValueError, OverflowError) as exc:
                    why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    raise ParameterError(
                        f"{where(self.name, method_id)} must be {c}; column {key.strip()!r}: "
                        f"{why or 'not understood'}. Got {shown(text)} instead."
                    ) from None
            out[key.strip()] = text
        return out


def input_paths(params: tuple[Param, ...], values: dict) -> list[str]:
    """The paths of the files the parameters ``values`` name (the Params with
    ``reads_file``): settings files a run reads, never to be overwritten by its outputs.
    """
    out: list[str] = []
    for p in params:
        v = values.get(p.name)
        if not p.reads_file or v is None:
            continue
        if isinstance(v, dict):
            out += [str(x).strip() for x in v.values() if isinstance(x, str) and x.strip()]
        elif isinstance(v, str) and v.strip():
            out.append(v.strip())
    return out


def file_names(params: tuple[Param, ...], values: dict) -> dict:
    """``values`` with the paths of the files they name (Params with ``reads_file``) cut to
    the files' base names: what a public file shows (a local path says where the office keeps
    its files; the private recipe and audit trail keep the whole path).
    """
    import os.path

    out = dict(values)
    for p in params:
        v = out.get(p.name)
        if not p.reads_file or v is None:
            continue
        if isinstance(v, dict):
            out[p.name] = {c: os.path.basename(str(x).rstrip("/\\")) for c, x in v.items()}
        elif isinstance(v, str):
            out[p.name] = os.path.basename(v.rstrip("/\\"))
    return out


def check_params(params: tuple[Param, ...], given: dict, method_id: str) -> dict:
    """Every parameter of a method, validated (unknown names are refused)."""
    known = {p.name for p in params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ParameterError(
            f"Method {method_id!r} has no parameter(s) {', '.join(map(repr, unknown))}. "
            f"Its parameters are: {', '.join(sorted(known))}."
        )
    return {p.name: p.check(given.get(p.name), method_id) for p in params}


def check_k(k: Any, n: int, method_id: str | None, min_k: int = 1) -> int:
    """The k for ``n`` records: at least ``min_k``, and at most n/2 when k > 1 (two clusters)."""
    c = f"an int in the range [{min_k}, inf)"
    v = as_int(k, "k", method_id, c)
    if v < min_k:
        raise invalid_value("k", method_id, c, k)
    if v > 1 and v > n // 2:
        raise invalid_value(
            "k",
            method_id,
            f"an int in the range [{min_k}, {n // 2}] (at most n/2 for n = {n} "
            "records: at least two clusters are needed)",
            k,
        )
    return v


#: Above this composed total ε the guarantee is called weak.
LARGE_EPSILON = 20.0


def check_epsilon(eps: Any, m: int = 1, method_id: str | None = None, *, name: str = "epsilon") -> float:
    """Validate ε (a float in [:data:`EPSILON_MIN`, :data:`EPSILON_MAX`]); warn when the composed
    total is very large.  ``m`` > 1: each of m attributes gets the whole ε (budget
    'per-attribute'), so the release is (m·ε)-DP.  ``name``: the parameter's name in messages
    (the query desk's is 'ε').
    """
    c = f"a float in the range {interval_text(EPSILON_MIN, EPSILON_MAX)}"
    e = as_float(eps, name, method_id, c)
    if not in_interval(e, EPSILON_MIN, EPSILON_MAX):
        raise invalid_value(name, method_id, c, eps)
    m = max(int(m), 1)
    total = m * e
    if total > LARGE_EPSILON:
        what = (
            f"ε = {e:g} given whole to each of {m} attributes composes to a total of {m}·{e:g} = {total:g}"
            if m > 1
            else f"ε = {e:g}"
        )
        warnings.warn(
            f"{what}, which is very large: the differential-privacy guarantee is weak.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    return e


def check_grid(spec, ks, epsilons, n: int, baselines: bool) -> None:
    """The k × ε grid of a sweep for ``n`` records (the same checks as one run's k and ε)."""
    if spec.uses_k:
        if not ks:
            raise ParameterError(f"Method {spec.id!r} needs at least one k to sweep.")
        for k in ks:
            check_k(k, n, spec.id, spec.min_k)
    if spec.uses_epsilon:
        if not epsilons and not (baselines and spec.uses_k):
            raise ParameterError(
                f"Method {spec.id!r} needs at least one ε to sweep "
                "(or baselines=True for the noise-free points only)."
            )
        for e in epsilons:
            check_epsilon(e, method_id=spec.id)


def invalid_values(p: Param) -> list[tuple[Any, type]]:
    """Values that ``p`` must refuse, each with the exception type expected (like
    scikit-learn's ``generate_invalid_param_val``): for the contract test of every method.
    """
    out: list[tuple[Any, type]] = []
    if p.kind == "int":
        out += [("abc", TypeError), (2.5, TypeError), (True, TypeError), ([3], TypeError)]
        if p.minimum is not None:
            lo = math.floor(p.minimum)
            out.append((lo - 1 if p.min_inclusive else lo, ValueError))
        if p.maximum is not None:
            out.append((math.floor(p.maximum) + 1, ValueError))
    elif p.kind == "float":
        out += [("abc", TypeError), (True, TypeError), ([0.5], TypeError), (float("nan"), ValueError)]
        if p.minimum is not None:
            out.append((p.minimum - 1.0 if p.min_inclusive else p.minimum, ValueError))
        if p.maximum is not None:
            out.append((p.maximum + 1.0, ValueError))
        else:
            out.append((float("inf"), ValueError))
    elif p.kind == "choice":
        out += [("not-a-choice", ValueError), (3.5, TypeError)]
    elif p.kind == "bool":
        out += [("maybe", ValueError), (2.5, TypeError), ([True], TypeError)]
    elif p.kind == "mapping":
        out += [("x:1", TypeError), (3, TypeError)]
        if p.minimum is not None or p.maximum is not None:
            out += [({"a": "x"}, TypeError), ({"a": float("nan")}, ValueError)]
            if p.minimum is not None:
                out.append(({"a": p.minimum / 2 if p.minimum > 0 else p.minimum - 1.0}, ValueError))
            if p.maximum is not None:
                out.append(({"a": p.maximum * 2 if p.maximum > 0 else p.maximum + 1.0}, ValueError))
    elif p.kind == "per-column":
        out += [("x:1", TypeError), (3, TypeError), ({"a": [object()]}, TypeError), ({"a": " "}, ValueError)]
        if p.item is not None:
            out.append(({"a": "\x00not understood\x00"}, ValueError))
    elif p.kind == "str":
        out += [(3, TypeError)]
    return out
