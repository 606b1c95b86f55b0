"""The method registry: a declarative description of every protection method.

The app builds its forms from it, the command line its options, and
:func:`dpstudio.engine.protect` validates parameters against it.

Every method lives in one module of ``dpstudio/engine/protection/`` that holds its
guarantee text, its run function and its :class:`MethodSpec` (``SPEC``, or ``SPECS`` for a
module with several related methods).  :data:`METHOD_MODULES` lists those modules in menu
order; adding a method is one new module plus one line there.  A listed module that cannot
be imported is an error (never skipped).

What other layers need to know about a method is a flag of its spec, never a test of its id:
``k_anonymous`` (the release claims k-anonymity on the k-quasi-identifiers, so the ``kanon``
measure applies), ``generalises`` (numeric k-quasi-identifiers are released as interval
text, so measures compare them as categories), ``clusters`` (records are grouped into
clusters of at least k: columns released unchanged beside them can show the grouping) and
``recommended`` (the method a new user is offered first).

Two optional hooks serve the survey toolbox (issue 23): ``targets`` -- the method changes the
columns its parameters name (sdcMicro's style: recode AGE, top-code INCOME), not those of a
role -- and ``effects`` -- what it does to each column, for chains of steps
(:func:`dpstudio.engine.guarantee.compose`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.guarantee import Effect, Effects, Guarantee, GuaranteeContext
from dpstudio.engine.params import Param, check_params
from dpstudio.engine.roles import Role

# Modules that hold methods (order = order in menus).
METHOD_MODULES = (
    "dpstudio.engine.protection.mdav",
    "dpstudio.engine.protection.mdav_swap",
    "dpstudio.engine.protection.ir_swap",
    "dpstudio.engine.protection.laplace",
    "dpstudio.engine.protection.insensitive_dp",
    "dpstudio.engine.protection.ir_dp",
    "dpstudio.engine.protection.k_eps",
    "dpstudio.engine.protection.local_suppression",
    "dpstudio.engine.protection.categorical_dp",
    "dpstudio.engine.protection.t_close_dp",
    "dpstudio.engine.protection.recode",
    "dpstudio.engine.protection.top_bottom_coding",
    "dpstudio.engine.protection.pram",
)

#: method id -> the module of METHOD_MODULES that declares it.  Looking one method up
#: (get_method, the flags) imports only its module, not all ten: the command line's start-up
#: (issue 13).  Listing every method (all_methods, register) still imports them all, in menu
#: order; an id missing here is found that way too (tests check the map against the modules).
METHOD_IDS = {
    "mdav": "dpstudio.engine.protection.mdav",
    "mdav-swap": "dpstudio.engine.protection.mdav_swap",
    "ir-swap": "dpstudio.engine.protection.ir_swap",
    "laplace": "dpstudio.engine.protection.laplace",
    "insensitive-dp": "dpstudio.engine.protection.insensitive_dp",
    "ir-dp": "dpstudio.engine.protection.ir_dp",
    "idp-ls": "dpstudio.engine.protection.ir_dp",
    "idp-cbls": "dpstudio.engine.protection.ir_dp",
    "k-eps": "dpstudio.engine.protection.k_eps",
    "local-suppression": "dpstudio.engine.protection.local_suppression",
    "categorical-dp": "dpstudio.engine.protection.categorical_dp",
    "t-close-dp": "dpstudio.engine.protection.t_close_dp",
    "recode": "dpstudio.engine.protection.recode",
    "top-bottom-coding": "dpstudio.engine.protection.top_bottom_coding",
    "pram": "dpstudio.engine.protection.pram",
}


@dataclass(frozen=True)
class MethodSpec:
    """Description of one method, plus the function that runs it.

    ``run(job) -> Output`` does the work (see :mod:`dpstudio.engine.types`).
    ``guarantee(ctx) -> Guarantee`` states what the release guarantees, as data
    (:class:`~dpstudio.engine.guarantee.Guarantee`: model, ε, scope, covered columns, the
    clauses of the sentence), for a :class:`~dpstudio.engine.guarantee.GuaranteeContext`
    (the validated parameters, the protected attributes, the roles); whether the release is
    ε-DP is the guarantee's :attr:`~dpstudio.engine.guarantee.Guarantee.is_dp`.
    ``protects`` lists the roles whose columns the method changes; ``requires``
    the roles of which at least one column must be present.  Columns with a quasi
    role the method does not protect make it not applicable (it would release
    them unprotected).  The flags are described in the module docstring.
    """

    id: str
    name: str
    family: str
    description: str
    paper: str
    params: tuple[Param, ...]
    protects: tuple[Role, ...]
    requires: tuple[Role, ...]
    guarantee: Callable[[GuaranteeContext], Guarantee]
    run: Callable[[Any], Any]
    needs_domain: bool = False
    uses_k: bool = True
    uses_epsilon: bool = False
    numeric_only: bool = True
    min_k: int = 1
    #: the release claims k-anonymity on the k-quasi-identifiers (``kanon`` measure applies)
    k_anonymous: bool = False
    #: numeric k-quasi-identifiers are released generalised (interval text)
    generalises: bool = False
    #: records are grouped into clusters of at least k (for k ≥ 2)
    clusters: bool = False
    #: the method offered first to a new user
    recommended: bool = False
    #: key values are suppressed (set to missing) and a missing value matches any value
    #: (sdcMicro's rule): missing key values are allowed in the input, k-anonymity and the
    #: categorical measures (suppressed cells, expected re-identifications) use that rule
    missing_matches_any: bool = False
    #: missing values in the protected columns are allowed and stay missing in the release
    #: (the method maps values one by one: recoding, top-coding, PRAM)
    keeps_missing: bool = False
    #: the method puts the released records in order itself (random unless order='input'),
    #: and its guarantee says how; for the others the API applies the keyed random
    #: permutation of ``order`` after the run (issue 21 §3)
    orders_records: bool = False
    #: how the method runs out of core (the Dask backend), with its own calibration
    #: functions: a plan of :mod:`dpstudio.engine.outofcore`; None: in memory only
    outofcore: Any = None
    #: the columns the method changes are named by its parameters:
    #: ``targets(params, roles) -> [column, ...]`` (validated parameters; empty: none named,
    #: then the columns with a role in ``protects`` are the targets).  Such a method runs
    #: whatever the other columns' roles are (it is a step: what it leaves alone is released
    #: unchanged and its guarantee says so).  None: the targets are the columns of the roles
    #: in ``protects`` (every other method).
    targets: Callable[[dict, dict], list[str]] | None = None
    #: what the method does to its input as a step of a chain (``effects(ctx) -> Effects``:
    #: each changed column's :class:`~dpstudio.engine.guarantee.Effect`, the columns it
    #: reads, whether it removes records); None: every column it protects is perturbed record
    #: by record (see :meth:`step_effects`)
    effects: Callable[[GuaranteeContext], Effects] | None = None

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
            "k_anonymous": self.k_anonymous,
            "generalises": self.generalises,
            "clusters": self.clusters,
            "recommended": self.recommended,
            "missing_matches_any": self.missing_matches_any,
            "orders_records": self.orders_records,
            "keeps_missing": self.keeps_missing,
            "names_targets": self.targets is not None,
            "guarantee": self.describe(GuaranteeContext.of(self.defaults())).render(),
        }

    def defaults(self) -> dict:
        """Every parameter at its default."""
        return {p.name: p.default for p in self.params}

    def describe(self, ctx: GuaranteeContext) -> Guarantee:
        """The method's guarantee for ``ctx`` (a method that still returns a plain sentence
        gets a guarantee without structure: no claim).
        """
        g = self.guarantee(ctx)
        return g if isinstance(g, Guarantee) else Guarantee.plain(str(g))

    def step_effects(self, ctx: GuaranteeContext) -> Effects:
        """What this method does as a step of a chain (:func:`dpstudio.engine.guarantee.compose`):
        the method's own declaration (``effects``) or, by default, :attr:`Effect.PERTURB` on
        every column of ``ctx.roles`` with a role the method protects (the conservative
        reading: each value changed from the data).
        """
        if self.effects is not None:
            return self.effects(ctx)
        cols = ctx.columns(*self.protects) or list(ctx.attributes)
        released = set(ctx.released) if ctx.released is not None else None
        return Effects(
            changes={
                c: Effect.PERTURB for c in cols if released is None or c in released or c in ctx.attributes
            }
        )

    def check_params(self, given: dict) -> dict:
        """Every parameter validated through :mod:`dpstudio.engine.params` (the one path).

        ``shuffle`` (true/false), the old name of ``order`` in recipes and ``--param``, is
        read as order='random'/'input'.
        """
        given = dict(given)
        if "shuffle" in given and any(p.name == "order" for p in self.params):
            if given.get("order") is not None:
                raise ParameterError(
                    f"Method {self.id!r}: give 'order' only ('shuffle' is its old name); got both."
                )
            given = legacy_params(given, self.id)
        return check_params(self.params, given, self.id)


def legacy_params(params: dict, method_id: str | None = None) -> dict:
    """``params`` with the old ``shuffle`` (true/false, clustered DP methods before issue 21)
    read as ``order`` ('random'/'input'); a given ``order`` wins (the newer setting: an old
    recipe's ``shuffle`` next to a form's or command line's ``order``).  A ``shuffle`` that is
    not a boolean raises in the one format.
    """
    if "shuffle" not in params:
        return dict(params)
    from dpstudio.engine.protection._common import ORDER_INPUT, ORDER_RANDOM, SHUFFLE_PARAM

    out = dict(params)
    old = out.pop("shuffle")
    if old is not None and out.get("order") is None:
        out["order"] = ORDER_RANDOM if SHUFFLE_PARAM.check(old, method_id) else ORDER_INPUT
    return out


_REGISTRY: dict[str, MethodSpec] = {}
_LOADED = False


def register(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` (the listed modules are registered first, so menus keep their order)."""
    _load()
    if spec.id in _REGISTRY and _REGISTRY[spec.id] is not spec:
        raise RuntimeError(f"method {spec.id!r} registered twice")
    _REGISTRY[spec.id] = spec
    return spec


def module_specs(module: Any) -> tuple[MethodSpec, ...]:
    """The specs a method module declares (``SPECS`` or ``SPEC``)."""
    specs = getattr(module, "SPECS", None)
    if specs is None:
        specs = (module.SPEC,)
    return tuple(specs)


def _add_module(name: str, into: dict[str, MethodSpec]) -> None:
    for spec in module_specs(importlib.import_module(name)):
        for known in (into, _REGISTRY):
            if spec.id in known and known[spec.id] is not spec:
                raise RuntimeError(f"method {spec.id!r} registered twice")
        into[spec.id] = spec


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    try:
        ordered: dict[str, MethodSpec] = {}
        for name in METHOD_MODULES:  # an import error here is a bug: let it raise
            _add_module(name, ordered)
    except BaseException:
        _LOADED = False
        raise
    # menu order, also when _spec loaded a module first
    ordered.update((k, v) for k, v in _REGISTRY.items() if k not in ordered)
    _REGISTRY.clear()
    _REGISTRY.update(ordered)


def _check_listed_modules_exist() -> None:
    """A listed module missing from the installation fails every look-up loudly, as loading
    them all would (found, not imported: cheap).
    """
    for name in METHOD_MODULES:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _spec(method_id: str | None) -> MethodSpec | None:
    """The spec of ``method_id`` (None if unknown), importing only its module when known."""
    key = str(method_id)
    if key not in _REGISTRY and not _LOADED:
        if key in METHOD_IDS:
            _check_listed_modules_exist()
            _add_module(METHOD_IDS[key], _REGISTRY)
        if key not in _REGISTRY:
            _load()
    return _REGISTRY.get(key)


def all_methods() -> list[MethodSpec]:
    _load()
    return list(_REGISTRY.values())


def get_method(method_id: str) -> MethodSpec:
    spec = _spec(method_id) if isinstance(method_id, str) else None
    if spec is not None:
        return spec
    _load()
    try:
        return _REGISTRY[method_id]
    except KeyError:
        raise ParameterError(f"Unknown method {method_id!r}. Available: {', '.join(_REGISTRY)}.") from None


def is_k_anonymous(method_id: str | None) -> bool:
    """Whether the release of ``method_id`` claims k-anonymity (False for unknown ids)."""
    spec = _spec(method_id)
    return bool(spec and spec.k_anonymous)


def missing_matches_any(method_id: str | None) -> bool:
    """Whether ``method_id`` suppresses key values under the missing-matches-any rule."""
    spec = _spec(method_id)
    return bool(spec and spec.missing_matches_any)


def generalises(method_id: str | None) -> bool:
    """Whether ``method_id`` releases numeric k-quasi-identifiers as interval text."""
    spec = _spec(method_id)
    return bool(spec and spec.generalises)
