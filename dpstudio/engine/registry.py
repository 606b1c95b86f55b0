"""The method registry: a declarative description of every protection method.

The app builds its forms from it, the command line its options, and
:func:`dpstudio.engine.protect` validates parameters against it.

A method is registered with :func:`register` by the module that implements it
(``dpstudio/engine/protection/*.py``); :data:`METHOD_MODULES` lists the modules that
are imported when the registry is first used.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.roles import Role

# Modules that register methods when imported (order = order in menus).
METHOD_MODULES = (
    "dpstudio.engine.protection.numeric",
    "dpstudio.engine.protection.k_eps",
    "dpstudio.engine.protection.categorical_dp",
    "dpstudio.engine.protection.t_close_dp",
)


@dataclass(frozen=True)
class Param:
    """One method parameter.

    ``kind`` is one of ``int``, ``float``, ``choice``, ``bool``, ``mapping`` (a
    dict column -> value, e.g. budget weights or hierarchies), ``str``.
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

    def to_dict(self) -> dict:
        d = {
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
        }
        return d

    def check(self, value: Any, method_id: str) -> Any:
        """Coerce and validate ``value``; raise :class:`ParameterError` naming the parameter."""
        where = f"The {self.name!r} parameter of method {method_id!r}"
        if value is None:
            if self.default is None:
                return None
            value = self.default
        if self.kind == "int":
            try:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise ValueError
                v = int(float(value))
            except (TypeError, ValueError):
                raise ParameterError(f"{where} must be a whole number. Got {value!r}.") from None
            self._range(v, where)
            return v
        if self.kind == "float":
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ParameterError(f"{where} must be a number. Got {value!r}.") from None
            if not math.isfinite(v):
                raise ParameterError(f"{where} must be a finite number. Got {value!r}.")
            self._range(v, where)
            return v
        if self.kind == "choice":
            if value not in self.choices:
                raise ParameterError(
                    f"{where} must be one of {', '.join(map(repr, self.choices))}. Got {value!r}."
                )
            return value
        if self.kind == "bool":
            if isinstance(value, str):
                low = value.strip().lower()
                if low in ("1", "true", "yes", "on"):
                    return True
                if low in ("0", "false", "no", "off"):
                    return False
                raise ParameterError(f"{where} must be true or false. Got {value!r}.")
            return bool(value)
        if self.kind == "mapping":
            if not isinstance(value, dict):
                raise ParameterError(f"{where} must be a mapping column -> value. Got {value!r}.")
            return dict(value)
        return value

    def _range(self, v: float, where: str) -> None:
        lo, hi = self.minimum, self.maximum
        bad = (lo is not None and (v < lo or (v == lo and not self.min_inclusive))) or (
            hi is not None and v > hi
        )
        if bad:
            lo_s = "-inf" if lo is None else f"{lo:g}"
            hi_s = "inf" if hi is None else f"{hi:g}"
            br = "[" if self.min_inclusive else "("
            close = ")" if hi is None else "]"
            raise ParameterError(f"{where} must be in the range {br}{lo_s}, {hi_s}{close}. Got {v!r}.")


@dataclass(frozen=True)
class MethodSpec:
    """Description of one method, plus the function that runs it.

    ``run(job) -> Output`` does the work (see :mod:`dpstudio.engine.types`).
    ``guarantee(params) -> str`` returns the sentence the UI and the report state
    for the given (validated) parameters.
    ``protects`` lists the roles whose columns the method changes; ``requires``
    the roles of which at least one column must be present.  Columns with a quasi
    role the method does not protect make it not applicable (it would release
    them unprotected).
    """

    id: str
    name: str
    family: str
    description: str
    paper: str
    params: tuple[Param, ...]
    protects: tuple[Role, ...]
    requires: tuple[Role, ...]
    guarantee: Callable[[dict], str]
    run: Callable[[Any], Any]
    is_dp: Callable[[dict], bool] = lambda p: False
    needs_domain: bool = False
    uses_k: bool = True
    uses_epsilon: bool = False
    numeric_only: bool = True
    min_k: int = 1

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "paper": self.paper,
            "params": [p.to_dict() for p in self.params],
            "protects": [r.value for r in self.protects],
            "requires": [r.value for r in self.requires],
            "needs_domain": self.needs_domain,
            "uses_k": self.uses_k,
            "uses_epsilon": self.uses_epsilon,
            "numeric_only": self.numeric_only,
            "guarantee": self.guarantee({p.name: p.default for p in self.params}),
        }

    def check_params(self, given: dict) -> dict:
        known = {p.name for p in self.params}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ParameterError(
                f"Method {self.id!r} has no parameter(s) {', '.join(map(repr, unknown))}. "
                f"Its parameters are: {', '.join(sorted(known))}."
            )
        return {p.name: p.check(given.get(p.name), self.id) for p in self.params}


_REGISTRY: dict[str, MethodSpec] = {}
_LOADED = False


def register(spec: MethodSpec) -> MethodSpec:
    if spec.id in _REGISTRY and _REGISTRY[spec.id] is not spec:
        raise RuntimeError(f"method {spec.id!r} registered twice")
    _REGISTRY[spec.id] = spec
    return spec


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in METHOD_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:  # a real missing dependency inside the module
                raise


def all_methods() -> list[MethodSpec]:
    _load()
    return list(_REGISTRY.values())


def get_method(method_id: str) -> MethodSpec:
    _load()
    try:
        return _REGISTRY[method_id]
    except KeyError:
        raise ParameterError(
            f"Unknown method {method_id!r}. Available: {', '.join(_REGISTRY)}."
        ) from None


# ---- shared parameter declarations (one place, used by several methods) ----

def k_param(default: int = 5, minimum: int = 1, help: str | None = None) -> Param:
    return Param(
        "k", "int", default,
        help or "Minimum cluster / equivalence-class size. Larger k: less risk, more information loss.",
        label="k", minimum=minimum, maximum=None,
    )


def epsilon_param(default: float = 1.0) -> Param:
    return Param(
        "epsilon", "float", default,
        "Total privacy budget ε (> 0). Smaller ε: stronger privacy, more noise.",
        label="ε", minimum=0.0, min_inclusive=False, log_scale=True,
    )


NOISE_PARAM = Param(
    "noise", "choice", "laplace",
    "Noise distribution. 'staircase' is the optimal (minimum-variance) ε-DP noise of "
    "thesis ch. 4 for ONE released number: the same guarantee as Laplace with less variance. "
    "When one record can move several released centroids of an attribute (ir-dp, "
    "insensitive-dp, categorical-dp with k ≥ 2) each staircase draw gets ε_i/n_c; Laplace then "
    "gives less noise for ir-dp.",
    label="noise", choices=("laplace", "staircase"),
    choice_labels={"laplace": "Laplace", "staircase": "Optimal (staircase)"},
)

BUDGET_PARAM = Param(
    "budget", "choice", "equal",
    "How the total ε is split over the protected attributes: 'equal' (ε/m each, release is "
    "ε-DP), 'weights' (user weights normalised to sum ε), 'per-attribute' (each attribute "
    "gets the whole ε: the release is only (m·ε)-DP; this is what the thesis's Census "
    "experiments did).",
    label="budget split", choices=("equal", "weights", "per-attribute"),
    choice_labels={"equal": "Equal (ε/m each)", "weights": "User weights",
                   "per-attribute": "Whole ε per attribute (m·ε-DP)"},
    warning={"per-attribute": "Each attribute gets the whole ε: the release is only (m·ε)-DP."},
)

WEIGHTS_PARAM = Param(
    "weights", "mapping", None,
    "Budget weights per attribute (used with budget='weights'); normalised so that they sum to ε.",
    label="budget weights", advanced=True,
)

DROP_MISSING_PARAM = Param(
    "drop_missing", "bool", False,
    "Drop records with missing values in the protected attributes (their number is reported). "
    "Off: such records are refused with a count.",
    label="drop records with missing values", advanced=True,
)

SHUFFLE_PARAM = Param(
    "shuffle", "bool", True,
    "Release the records in random order (default). Microaggregation gives the records of a "
    "cluster the same value; kept in input order, the release would show which rows share a "
    "cluster, which the noise does not hide and the ε-DP proof does not cover. Turn off only "
    "for internal comparisons: the release then does not satisfy its DP guarantee.",
    label="shuffle released records", advanced=True,
)


LAYOUT_PARAM = Param(
    "layout", "choice", "records",
    "How the protected attributes are released. 'records': one table with a row per record "
    "(the protected attributes side by side, other non-identifier columns beside them "
    "unchanged). When several attributes are clustered separately, or columns are released "
    "unchanged beside clustered ones, the rows show which records were grouped together and "
    "the records are NOT ε-DP (per attribute only). 'separate-tables': one one-column table per "
    "protected attribute, each in its own independent random order; columns that are not "
    "protected are NOT released. That release is ε-DP by sequential composition over the "
    "tables (ε_i each, total ε).",
    label="release layout", choices=("records", "separate-tables"),
    choice_labels={"records": "Records (one table)",
                   "separate-tables": "Separate table per attribute (ε-DP)"},
    warning={"separate-tables": "One table per protected attribute, each shuffled on its own: "
             "the rows of different tables do not belong together, and columns that are not "
             "protected are not released."},
)

#: How a guarantee that holds only per attribute starts (its scope comes first).
SCOPE_LEAD = "Per-attribute only — not {what} for the records: "
#: Separates the reasons of a scoped sentence from what holds per attribute.
SCOPE_HOLDS = ". What holds for each protected attribute's column on its own: "


def scoped_sentence(what: str, reasons: list[str], text: str) -> str:
    """A guarantee that leads with its scope: not ``what`` for the records, because of
    ``reasons``; then ``text``, which holds per attribute."""
    return SCOPE_LEAD.format(what=what) + "; ".join(reasons) + SCOPE_HOLDS + text


def add_scope_reason(sentence: str, what: str, reason: str) -> str:
    """Add ``reason`` to a scoped sentence, or scope an unscoped one."""
    if sentence.startswith("Per-attribute only — not") and SCOPE_HOLDS in sentence:
        head, tail = sentence.split(SCOPE_HOLDS, 1)
        return head + "; " + reason + SCOPE_HOLDS + tail
    return scoped_sentence(what, [reason], sentence)


def separate_tables(p: dict) -> bool:
    return p.get("layout", "records") == "separate-tables"


def order_clause(p: dict) -> str:
    if separate_tables(p):
        return (" Released as one table per protected attribute, each in its own independent "
                "random order (rows of different tables do not belong together).")
    if p.get("shuffle", True):
        return " Records are released in random order."
    return (" Records are released in INPUT ORDER (shuffle off), which shows which records share "
            "a cluster: as released this does not satisfy the stated guarantee.")
