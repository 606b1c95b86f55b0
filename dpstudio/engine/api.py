"""The public engine API: ``methods``, ``check``, ``protect``, ``evaluate``, ``sweep``."""

from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from dpstudio.engine import validation as V
from dpstudio.engine.errors import InputError, NotApplicableError, ParameterError
from dpstudio.engine.job import Job, ProtectionResult
from dpstudio.engine.registry import MethodSpec, all_methods, get_method
from dpstudio.engine.rng import as_rng
from dpstudio.engine.roles import Role, normalize_roles

QUASI_ROLES = (Role.K_QUASI, Role.EPS_QUASI)


def methods() -> list[dict]:
    """Descriptions of every registered method (what the app builds its forms from)."""
    return [m.to_dict() for m in all_methods()]


@dataclass
class Prepared:
    spec: MethodSpec
    data: pd.DataFrame
    roles: dict[str, Role]
    domains: dict[str, tuple[float, float]]
    params: dict[str, Any]
    protected: list[str]
    dropped_rows: list[int]
    warnings: list[str]
    hierarchies: dict
    precision: dict | None = None


def check_applicable(df: pd.DataFrame, method: str, roles: dict | None) -> None:
    """Raise :class:`NotApplicableError` saying why ``method`` cannot run on these roles."""
    spec = get_method(method)
    r = normalize_roles(df.columns, roles)
    _applicable(spec, r)


def _applicable(spec: MethodSpec, roles: dict[str, Role]) -> list[str]:
    present = {role for role in roles.values()}
    if spec.requires and not any(req in present for req in spec.requires):
        need = " or ".join(req.label for req in spec.requires)
        raise NotApplicableError(
            f"Method {spec.id!r} ({spec.name}) needs at least one {need} attribute; "
            f"none is marked. Mark the attributes it should protect as {need}."
        )
    unprotected = [c for c, role in roles.items() if role in QUASI_ROLES and role not in spec.protects]
    if unprotected:
        roles_here = sorted({roles[c].label for c in unprotected})
        raise NotApplicableError(
            f"Method {spec.id!r} ({spec.name}) does not protect {' or '.join(roles_here)} "
            f"attributes, so column(s) {', '.join(map(repr, unprotected))} would be released "
            f"unprotected. It protects: {', '.join(r.label for r in spec.protects)}. Change those "
            "roles or choose another method."
        )
    return [c for c, role in roles.items() if role in spec.protects]


def prepare(df: pd.DataFrame, method: str, roles: dict | None = None, domains: dict | None = None,
            hierarchies: dict | None = None, *, precision: dict | None = None,
            **params: Any) -> Prepared:
    """Validate everything once (used by :func:`protect` and :func:`sweep`).

    ``precision`` maps a numeric noisy attribute to its output grid γ (default: 1 for integer
    columns, else from the declared domain; see :func:`dpstudio.engine.noise.default_precision`).
    """
    V.check_frame(df)
    spec = get_method(method)
    r = normalize_roles(df.columns, roles)
    protected = _applicable(spec, r)
    p = spec.check_params(params)
    warns: list[str] = []

    data = df.copy()
    data.columns = [str(c) for c in data.columns]
    data = data.reset_index(drop=True)

    if spec.numeric_only:
        for c in protected:
            V.numeric_column(data, c, r[c].label)
            if not pd.api.types.is_numeric_dtype(data[c]):
                data[c] = pd.to_numeric(data[c])
    dropped: list[int] = []
    miss = V.missing_rows(data, protected)
    if miss.size:
        if not p.get("drop_missing"):
            raise InputError(V.missing_message(data, protected))
        dropped = [int(i) for i in miss]
        data = data.drop(index=miss).reset_index(drop=True)
        warns.append(f"{len(dropped)} record(s) with missing values in protected attributes were "
                     "dropped and are not in the release.")
        if len(data) < 2:
            raise InputError("After dropping records with missing values fewer than two records remain.")
    n = len(data)
    if "k" in p and spec.uses_k and p["k"] is not None:
        V.check_k(p["k"], n, spec.id, spec.min_k)
    if spec.uses_epsilon and p.get("epsilon") is not None:
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            p["epsilon"] = V.check_epsilon(p["epsilon"])
        warns.extend(str(w.message) for w in caught)
    doms = V.check_domains(data, [c for c in protected if spec.numeric_only
                                  or pd.api.types.is_numeric_dtype(data[c])],
                           domains or {}, spec.needs_domain, spec.id)
    const = V.constant_columns(data, protected)
    if const:
        warns.append(f"Column(s) {', '.join(map(repr, const))} are constant in the data: "
                     "they carry no information to mask but are still treated as protected.")
    prec = V.check_precision(data, [c for c in protected if r[c] is Role.EPS_QUASI
                                    and pd.api.types.is_numeric_dtype(data[c])],
                             precision, doms, spec.uses_epsilon)
    prep = Prepared(spec, data, r, doms, p, protected, dropped, warns, dict(hierarchies or {}),
                    prec)
    prep.precision_given = {c: g for c, g in (precision or {}).items() if c in prec}
    return prep


def run_prepared(prep: Prepared, *, rng: np.random.Generator, epsilon: Any = "param",
                 k: int | None = None, cache: dict | None = None,
                 progress: Callable[[float], None] | None = None,
                 check_cancel: Callable[[], None] | None = None, keep_original: bool = True
                 ) -> ProtectionResult:
    spec = prep.spec
    params = dict(prep.params)
    if epsilon != "param":
        params["epsilon"] = epsilon
    if k is not None:
        params["k"] = k
    job = Job(data=prep.data, roles=prep.roles, domains=prep.domains, params=params, rng=rng,
              method=spec.id, cache={} if cache is None else cache,
              hierarchies=prep.hierarchies, precision=dict(prep.precision or {}))
    if progress is not None:
        job.progress = progress
    if check_cancel is not None:
        job.check_cancel = check_cancel
    out = spec.run(job)
    ident = [c for c, role in prep.roles.items() if role is Role.IDENTIFIER]
    drop = [c for c in ident if c in out.data.columns]
    released = out.data.drop(columns=drop) if drop else out.data
    if not isinstance(released.index, pd.RangeIndex) or released.index.start != 0:
        released = released.reset_index(drop=True)
    warns = list(prep.warnings) + list(out.warnings)
    protected_cols = list(out.protected if out.protected is not None else prep.protected)
    unchanged = [c for c in released.columns if c not in protected_cols
                 and prep.roles.get(c) not in spec.protects
                 and prep.roles.get(c) is not Role.IDENTIFIER]
    eps_quasi = [c for c, r_ in prep.roles.items() if r_ is Role.EPS_QUASI]
    scope = ""
    if unchanged and spec.uses_epsilon and params.get("epsilon") is not None:
        shown = ", ".join(unchanged[:6]) + (f" and {len(unchanged) - 6} more" if len(unchanged) > 6 else "")
        scope = (f" Not covered: the {len(unchanged)} column(s) released unchanged ({shown}); "
                 "they are not protected"
                 + (", and released beside the protected ones they can reveal which records "
                    "were grouped together." if spec.uses_k and (params.get("k") or 1) > 1
                    else "."))
    return ProtectionResult(
        data=released,
        method=spec.id,
        method_name=spec.name,
        params={k_: v for k_, v in params.items()},
        guarantee=(spec.guarantee({**params, "_attributes": protected_cols,
                                   "_eps_quasi": eps_quasi})
                   + (out.info.get("guarantee_caveat") or "") + scope
                   + (_grid_clause(prep) if params.get("epsilon") is not None else "")),
        is_dp=bool(spec.is_dp({**params, "_attributes": protected_cols})),
        roles={c: role.value for c, role in prep.roles.items()},
        domains=dict(prep.domains),
        protected_attributes=protected_cols,
        info=out.info,
        warnings=warns,
        row_map=out.row_map,
        dropped_rows=list(prep.dropped_rows),
        tables={name: t.drop(columns=[c for c in ident if c in t.columns]) for name, t in out.tables.items()},
        original=prep.data if keep_original else None,
        precision=dict(prep.precision or {}) if params.get("epsilon") is not None else {},
    )


def _grid_clause(prep: Prepared) -> str:
    from dpstudio.engine.noise import grid_clause

    return grid_clause(dict(prep.precision or {}), getattr(prep, "precision_given", None))


def protect(df: pd.DataFrame, method: str, roles: dict | None = None, domains: dict | None = None,
            *, seed: int | np.random.Generator | None = None, hierarchies: dict | None = None,
            precision: dict | None = None, progress: Callable[[float], None] | None = None,
            check_cancel: Callable[[], None] | None = None, **params: Any) -> ProtectionResult:
    """Protect ``df`` with ``method``.

    Parameters
    ----------
    df : DataFrame
        The input; never modified.
    method : str
        A method id from :func:`methods`.
    roles : dict
        Column -> role (``identifier``, ``k-quasi``, ``eps-quasi``, ``confidential``,
        ``other``); unlisted columns are ``other``.
    domains : dict
        Column -> (lower, upper) for numeric protected attributes.
    seed : int or Generator
        Randomness; the same seed and input give the same output.  Keep it secret.
    hierarchies : dict
        Column -> ARX hierarchy file path or :class:`~dpstudio.engine.hierarchy.Hierarchy`.
    precision : dict
        Column -> output grid γ of a noisy numeric attribute (e.g. ``{"FICA": 1}``): noise is
        drawn exactly on that grid and the release carries no more digits (default: 1 for
        integer columns, 10^(⌊log10(ub − lb)⌋ − 6) from the declared domain otherwise).
    **params
        Method parameters (``k``, ``epsilon``, ``noise``, ``calibration``, …).

    >>> import pandas as pd
    >>> from dpstudio import engine
    >>> df = pd.DataFrame({"x": [1., 2., 3., 4., 5., 6.]})
    >>> res = engine.protect(df, "mdav", roles={"x": "k-quasi"}, k=3, seed=1)
    >>> sorted(res.data["x"].tolist())
    [2.0, 2.0, 2.0, 5.0, 5.0, 5.0]
    """
    prep = prepare(df, method, roles, domains, hierarchies, precision=precision, **params)
    return run_prepared(prep, rng=as_rng(seed), progress=progress, check_cancel=check_cancel)


def evaluate(original: pd.DataFrame, protected: pd.DataFrame, attributes: list[str] | None = None,
             **options: Any) -> dict:
    """Utility and risk measures of ``protected`` against ``original`` (see metrics.md).

    Rows are compared position by position (record j of ``protected`` protects record j of
    ``original``).  Pass ``result.aligned_original()`` when the method reorders rows.
    """
    from dpstudio.engine import metrics

    return metrics.evaluate(original, protected, attributes, **options)


def sweep(df: pd.DataFrame, method: str, roles: dict | None = None, domains: dict | None = None,
          *, ks=(2, 5, 10), epsilons=(1.0,), repeats: int = 1, seed: int | None = None,
          measures=("sse", "rl"), baselines: bool = True, hierarchies: dict | None = None,
          check_cancel: Callable[[], None] | None = None, evaluate_options: dict | None = None,
          **params: Any):
    """Run ``method`` over a k × ε grid; yield one :class:`~dpstudio.engine.tradeoff.SweepPoint` per cell.

    ``evaluate_options`` are passed to :func:`evaluate` (e.g. ``{"rl_distance": "raw"}``).
    """
    from dpstudio.engine.tradeoff import run_sweep

    return run_sweep(df, method, roles, domains, ks=ks, epsilons=epsilons, repeats=repeats,
                     seed=seed, measures=measures, baselines=baselines, hierarchies=hierarchies,
                     check_cancel=check_cancel, evaluate_options=evaluate_options, **params)


__all__ = ["methods", "protect", "evaluate", "sweep", "check_applicable", "prepare",
           "run_prepared", "InputError", "ParameterError", "NotApplicableError"]
