"""The public engine API: ``methods``, ``check``, ``protect``, ``evaluate``.

``engine.sweep`` lives in :mod:`dpstudio.engine.sweeps`, which builds on this module (this
module does not import it: no import cycle).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings as _warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine import params as P
from dpstudio.engine import validation as V
from dpstudio.engine.codes import take_rows
from dpstudio.engine.errors import DPStudioError, InputError, NotApplicableError, ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model, Uncovered
from dpstudio.engine.io import check_decimal_ambiguity
from dpstudio.engine.notices import is_public, notice
from dpstudio.engine.protection._common import (
    INPUT_ORDER_WARNING,
    ORDER_HOUSEHOLDS,
    ORDER_RANDOM,
    block_frame,
    household_order,
    keep_order,
    ordering,
    record_permutation,
    separate_tables,
)
from dpstudio.engine.random import as_rng
from dpstudio.engine.registry import MethodSpec, all_methods, get_method
from dpstudio.engine.roles import NON_NUMERIC_TYPES, Role, normalize_roles, normalize_types, single_column
from dpstudio.engine.types import Job, Output, ProtectionResult

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
    precision_given: dict | None = None
    #: the user's column types (issue 10)
    types: dict = field(default_factory=dict)
    #: release the household id unchanged (default: it is not released)
    keep_household: bool = False
    #: the digest of the protected columns (computed once, on first use: :meth:`digest`)
    _digest: str | None = field(default=None, repr=False)
    #: the content digests of the declared hierarchies (computed once, on first use)
    _hierarchy_digests: dict | None = field(default=None, repr=False)
    #: the protected columns as one read-only float64 matrix when they are plain numbers and
    #: the table is small (:func:`~dpstudio.engine.validation.numeric_block`): checked,
    #: digested and handed to the method's ``job.matrix`` without per-column pandas work
    _matrix: np.ndarray | None = field(default=None, repr=False)
    #: the same values by column (:func:`~dpstudio.engine.validation.numeric_blocks`), read by
    #: the data digest and then let go
    _by_column: np.ndarray | None = field(default=None, repr=False)
    #: True when that block was checked to hold no missing and no infinite value (the digest
    #: then does not look for NaNs to canonicalise)
    _finite: bool = field(default=False, repr=False)
    #: ``data``'s column names as text, in order (read once by :func:`prepare`)
    names: list[str] | None = field(default=None, repr=False)

    def digest(self) -> str:
        """The data digest of the prepared records on the protected columns (what a run's
        randomness is keyed on with the parameters: :mod:`dpstudio.engine.keying`).
        """
        if self._digest is None:
            from dpstudio.engine.keying import data_digest

            self._digest = data_digest(
                self.data,
                list(self.protected),
                matrix=self._matrix,
                by_column=self._by_column,
                finite=self._finite and self._matrix is not None,
            )
            self._by_column = None
        return self._digest

    def _effective_hierarchies(self) -> dict:
        """The hierarchies a run uses: a generalising method builds the automatic hierarchy of
        a k-quasi-identifier that has none, so an explicit copy of that hierarchy (the app's
        "generate") and none at all (the command line) are the same settings and key the run
        alike.
        """
        hs = {c: h for c, h in (self.hierarchies or {}).items() if h is not None}
        if not self.spec.generalises:
            return hs
        from dpstudio.engine.algorithms.generalization import resolve_hierarchies

        kq = [c for c, r in self.roles.items() if r is Role.K_QUASI]
        try:
            return {**hs, **resolve_hierarchies(self.data, kq, hs)}
        except Exception:  # the method reports a bad hierarchy itself, with its message
            return hs

    def run_context(self, params: dict | None = None) -> bytes:
        """The key material of a run with ``params`` (default: the prepared ones)."""
        from dpstudio.engine.keying import hierarchy_ids, run_context

        if self._hierarchy_digests is None:
            self._hierarchy_digests = hierarchy_ids(self._effective_hierarchies())
        return run_context(
            method=self.spec.id,
            params=dict(self.params if params is None else params),
            roles=self.roles,
            domains=self.domains,
            precision=self.precision,
            types=self.types,
            hierarchies=self.hierarchies,
            keep_household=self.keep_household,
            digest=self.digest(),
            hierarchy_digests=self._hierarchy_digests,
        )


def check_applicable(
    df: pd.DataFrame, method: str, roles: dict | None, types: dict | None = None, params: dict | None = None
) -> None:
    """Raise :class:`NotApplicableError` saying why ``method`` cannot run on these roles (and,
    with ``types``, on these column types; with ``params``, on the columns they name: what
    :func:`prepare` refuses, said before a run).
    """
    spec = get_method(method)
    r = normalize_roles(df.columns, roles)
    p = None
    if spec.targets is not None and params:
        try:
            p = spec.check_params(params)
        except ParameterError:
            p = None  # the form says what is wrong with a parameter
    protected = _applicable(spec, r, p)
    if types and spec.numeric_only:
        _refuse_non_numeric_types(spec, r, normalize_types(df.columns, types), protected)


def missing_refused(
    df: pd.DataFrame, method: str, roles: dict | None, params: dict | None = None
) -> dict[str, int]:
    """{column: number of missing values} that :func:`prepare` would refuse for ``method`` on
    these roles: the protected columns with missing values when the method does not treat a
    missing key value as matching any value (``missing_matches_any``, the sdcMicro way) and
    ``drop_missing`` is off.  Empty when the run would go ahead.  Cheap (one pass of isna on
    the protected columns): the app says it before a run (issue 24 §4).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"x": [1.0, None, 3.0], "y": [1, 2, 3]})
    >>> missing_refused(df, "laplace", {"x": "eps-quasi"})
    {'x': 1}
    >>> missing_refused(df, "laplace", {"x": "eps-quasi"}, {"drop_missing": True})
    {}
    """
    spec = get_method(method)
    if spec.missing_matches_any or spec.keeps_missing or (params or {}).get("drop_missing"):
        return {}
    r = normalize_roles(df.columns, roles)
    try:
        protected = _applicable(spec, r, params)
    except DPStudioError:
        return {}  # the roles or parameters are refused: the run says why
    out = {}
    for c in protected:
        n = int(df[c].isna().sum())
        if n:
            out[c] = n
    return out


#: Roles whose columns a method never changes (the household id, the weight: read by the
#: survey measures; identifiers: not released).
_NOT_TARGETS = (Role.IDENTIFIER, Role.HOUSEHOLD, Role.WEIGHT)


def _targets(spec: MethodSpec, roles: dict[str, Role], params: dict | None) -> list[str]:
    """The columns a method whose parameters name them (``spec.targets``) changes: those named
    (each must exist and not be an identifier, household id or weight), else the columns of
    the roles in ``protects``.  ``params`` None (not known: a check of the roles alone) never
    refuses for want of a column: the parameters may name them.
    """
    assert spec.targets is not None
    named = list(dict.fromkeys(spec.targets(dict(params or {}), roles))) if params is not None else []
    for c in named:
        if c not in roles:
            raise ParameterError(
                f"Method {spec.id!r}: column {c!r} named in its parameters is not in the data. "
                f"Available columns: {', '.join(roles)}."
            )
        if roles[c] in _NOT_TARGETS:
            raise ParameterError(
                f"Method {spec.id!r}: column {c!r} is the {roles[c].label}; it cannot be changed "
                "by this method. Name another column or change its role."
            )
    if named:
        return named
    cols = [c for c, role in roles.items() if role in spec.protects]
    if not cols and params is None:
        # the parameters are not known here (a check of the roles alone: a chain's, the app's
        # before a run): they may name the columns; the run's own check refuses if none does
        return cols
    if not cols:
        need = " or ".join(r.label for r in spec.protects)
        raise NotApplicableError(
            f"Method {spec.id!r} ({spec.name}) has no column to change: name the columns in its "
            f"parameters, or mark the columns it should change as {need}."
        )
    return cols


def _applicable(spec: MethodSpec, roles: dict[str, Role], params: dict | None = None) -> list[str]:
    if spec.targets is not None:  # a step on the columns its parameters name
        return _targets(spec, roles, params)
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


def _plain_text_names(cols: pd.Index) -> bool:
    """True when ``cols`` is already what ``[str(c) for c in cols]`` would make: pandas'
    default text index without missing names (then renaming would change nothing).
    """
    return isinstance(cols.dtype, pd.StringDtype) and cols.dtype == _default_text_dtype() and not cols.hasnans


@functools.cache
def _default_text_dtype():
    return pd.Index(["a"]).dtype


def prepare(
    df: pd.DataFrame,
    method: str,
    roles: dict | None = None,
    domains: dict | None = None,
    hierarchies: dict | None = None,
    *,
    precision: dict | None = None,
    types: dict | None = None,
    keep_household: bool = False,
    **params: Any,
) -> Prepared:
    """Validate everything once (used by :func:`protect` and :func:`sweep`).

    ``precision`` maps a numeric noisy attribute to its output grid γ (default: 1 for columns
    declared ``integer``, else from the declared domain; never from the values or the dtype:
    see :func:`dpstudio.engine.algorithms.noise.default_precision`).
    ``types`` maps a column to ``numeric``, ``integer``, ``categorical``, ``ordinal`` or
    ``date`` (the user's choice; numeric-only methods refuse categorical/ordinal
    quasi-identifiers).
    ``keep_household``: release the household-id column unchanged (default: not released).
    """
    # the names as text, in one list (iterating pandas' text index yields its values one by
    # one through Arrow: several times the cost of the list, issue 27 §2)
    names = V.check_frame(df)
    spec = get_method(method)
    r = normalize_roles(names, roles)
    for role in (Role.WEIGHT, Role.HOUSEHOLD):
        single_column(r, role)
    ty = normalize_types(names, types)
    protected = _applicable(spec, r) if spec.targets is None else []
    p = spec.check_params(household_default(spec, r, params, keep_household=keep_household))
    if spec.targets is not None:  # the columns its parameters name
        protected = _applicable(spec, r, p)
    if spec.numeric_only:
        _refuse_non_numeric_types(spec, r, ty, protected)
    check_household_order(spec, r, p)
    warns: list[str] = []

    # a private copy: with copy-on-write (pandas >= 3) a shallow copy is one -- a change to
    # either frame copies the changed column first -- and costs nothing on small tables
    data = df.copy(deep=False)
    if not _plain_text_names(data.columns):
        data.columns = names
    ix = data.index
    if not (isinstance(ix, pd.RangeIndex) and ix.start == 0 and ix.step == 1):
        data = data.reset_index(drop=True)

    # None unless plain numbers on a small table: then the protected columns as one float
    # matrix X and by column XT, read by the checks, the data digest and the method
    X, XT = V.numeric_blocks(data, protected, names=names) or (None, None)
    finite = XT is not None and bool(np.isfinite(XT).all())  # no infinite, no missing value
    if spec.numeric_only:
        if X is not None:  # the column-by-column checks' answer, read off the matrix
            bad = None if finite else V.first_infinite(X, protected)
            if bad is not None:
                V.numeric_column(data, bad, r[bad].label)  # raises, naming the rows
        else:
            for c in protected:
                V.numeric_column(data, c, r[c].label)
                if not pd.api.types.is_numeric_dtype(data[c]):
                    check_decimal_ambiguity(c, data[c])  # 1.234: never guess the mark (issue 15)
                    data[c] = pd.to_numeric(data[c])
    dropped: list[int] = []
    # a method whose guarantee holds with missing key values (they match any value) keeps them
    keeps = spec.missing_matches_any or spec.keeps_missing
    miss = np.zeros(0, dtype=np.int64) if keeps or finite else V.missing_rows(data, protected, matrix=X)
    if miss.size:
        if not p.get("drop_missing"):
            raise InputError(V.missing_message(data, protected))
        dropped = [int(i) for i in miss]
        data = data.drop(index=dropped).reset_index(drop=True)
        warns.append(
            notice(
                "records-dropped",
                f"{len(dropped)} record(s) with missing values in protected attributes were "
                "dropped and are not in the release.",
            )
        )
        if len(data) < 2:
            raise InputError("After dropping records with missing values fewer than two records remain.")
        X, XT = V.numeric_blocks(data, protected, names=names) or (None, None)
    n = len(data)
    if "k" in p and spec.uses_k and p["k"] is not None:
        P.check_k(p["k"], n, spec.id, spec.min_k)
    if spec.uses_epsilon and p.get("epsilon") is not None:
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            p["epsilon"] = P.check_epsilon(
                p["epsilon"], m=len(protected) if p.get("budget") == "per-attribute" else 1, method_id=spec.id
            )
        warns.extend(notice("epsilon-large", str(w.message)) for w in caught)  # depends on ε only
    doms = V.check_domains(
        data,
        [c for c in protected if spec.numeric_only or pd.api.types.is_numeric_dtype(data[c])],
        domains or {},
        spec.needs_domain,
        spec.id,
    )
    # facts about the data are PRIVATE notes (issue 21 §3 N1): shown to the user, never in
    # the guarantee, the metadata or the release note
    derived = V.data_derived_domains(data, doms)
    warns.extend(V.data_derived_domain_warning(c, why) for c, why in derived.items())
    const = V.constant_columns(data, protected, matrix=X, by_column=XT, finite=finite)
    if const:
        warns.append(
            notice(
                "constant-column",
                f"Column(s) {', '.join(map(repr, const))} are constant in the data: "
                "they carry no information to mask but are still treated as protected.",
            )
        )
    noisy = [c for c in protected if r[c] is Role.EPS_QUASI and pd.api.types.is_numeric_dtype(data[c])]
    prec = V.check_precision(data, noisy, precision, doms, spec.uses_epsilon, ty)
    if spec.uses_epsilon:
        warns.extend(V.type_notes(data, noisy, ty, precision, prec))
    if keep_order(p):
        warns.append(notice("input-order", INPUT_ORDER_WARNING))
    if spec.uses_epsilon and p.get("epsilon") is not None:  # ε and grid combined (issue 15)
        from dpstudio.engine.algorithms.noise import check_grid_budget, make_grid
        from dpstudio.engine.roles import declared_integer

        for c, g in prec.items():  # every method's draw for c has sensitivity >= span, ε_c <= ε
            grid = make_grid(c, g, doms.get(c), declared_integer(ty, c), n)
            check_grid_budget(c, grid, float(p["epsilon"]))
    prep = Prepared(
        spec,
        data,
        r,
        doms,
        p,
        protected,
        dropped,
        warns,
        dict(hierarchies or {}),
        precision=prec,
        types=ty,
        keep_household=bool(keep_household),
        _matrix=X,
        _by_column=XT,
        _finite=finite,
        names=names,
    )
    prep.precision_given = {c: g for c, g in (precision or {}).items() if c in prec}
    return prep


def run_prepared(
    prep: Prepared,
    *,
    rng: np.random.Generator,
    epsilon: Any = "param",
    k: int | None = None,
    cache: dict | None = None,
    progress: Callable[[float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
    keep_original: bool = True,
    notes: bool = True,
) -> ProtectionResult:
    """Run a prepared method once.  ``rng``: the seed's generator (``as_rng(seed)``); the run
    draws from a generator derived from it AND from the method, the parameters (with the
    ``epsilon``/``k`` given here) and the data digest (:func:`dpstudio.engine.keying.keyed_rng`),
    so a reused seed never reuses noise across ε, methods or data.
    """
    spec = prep.spec
    params = dict(prep.params)
    if epsilon != "param":
        params["epsilon"] = epsilon
    if k is not None:
        params["k"] = k
    job = _job(prep, params, rng=rng, cache=cache, progress=progress, check_cancel=check_cancel)
    out = spec.run(job)
    if not spec.orders_records and not keep_order(params):
        out = _in_keyed_order(job, out)
    elif out.data is None:  # the release is the method's block, in input order
        out = dataclasses.replace(out, data=block_frame(job, out))
    assert out.data is not None
    if out.info.get("params_used"):  # parameters the method fixed itself (t-close-dp's k)
        params.update(out.info["params_used"])
    ident = [
        c
        for c, role in prep.roles.items()
        if role is Role.IDENTIFIER or (role is Role.HOUSEHOLD and not prep.keep_household)
    ]
    # (the names the API checked when the release has the job's own columns: not read again)
    out_names = job.column_names() if out.data.columns is job.data.columns else out.data.columns.tolist()
    drop = [c for c in ident if c in out_names]
    released = out.data.drop(columns=drop) if drop else out.data
    released_names = released.columns.tolist() if drop else out_names
    if not isinstance(released.index, pd.RangeIndex) or released.index.start != 0:
        released = released.reset_index(drop=True)
    warns = list(prep.warnings) + list(out.warnings)
    public_warns = [w for w in warns if is_public(w)]
    protected_cols = list(out.protected if out.protected is not None else prep.protected)
    tables = {name: t.drop(columns=[c for c in ident if c in t.columns]) for name, t in out.tables.items()}
    row_map = out.row_map
    info = out.info
    if separate_tables(params):
        released, tables, row_map, info = _separate_tables(job, released, protected_cols, out.info, warns)
        released_names = released.columns.tolist()
    if notes and spec.uses_epsilon and params.get("epsilon") is not None:
        # (notes=False: sweeps, whose points never show the run's private notes)
        # clamping pile-up per noisy attribute: data-dependent, so a private note (issue 11)
        from dpstudio.engine.pileup import bound_shares, pileup_notes

        warns.extend(
            notice("pile-up", w)
            for w in pileup_notes(
                bound_shares(released, protected_cols, prep.domains, prep.precision),
                uses_k=spec.uses_k,
                remedy=out.info.get("pileup_remedy"),
            )
        )
    g = with_grid_clause(
        release_guarantee(spec, params, prep.roles, released_names, protected_cols, run=out.info),
        prep,
        params,
    )
    return ProtectionResult(
        data=released,
        method=spec.id,
        method_name=spec.name,
        params={k_: v for k_, v in params.items()},
        guarantee=g.render(),
        is_dp=g.is_dp,
        roles={c: role.value for c, role in prep.roles.items()},
        domains=dict(prep.domains),
        protected_attributes=protected_cols,
        info=info,
        warnings=warns,
        public_warnings=public_warns,
        row_map=row_map,
        dropped_rows=list(prep.dropped_rows),
        tables=tables,
        original=prep.data if keep_original else None,
        precision=dict(prep.precision or {}) if params.get("epsilon") is not None else {},
        guarantee_info=g,
        types=dict(prep.types),
        hierarchies=dict(prep.hierarchies or {}),
    )


def _job(
    prep: Prepared,
    params: dict,
    *,
    rng: np.random.Generator,
    cache: dict | None,
    progress: Callable[[float], None] | None,
    check_cancel: Callable[[], None] | None,
) -> Job:
    """:func:`run_prepared`'s job: the prepared data and settings, ``params`` (with the run's
    ε and k) and a generator keyed on the run (:func:`dpstudio.engine.keying.keyed_rng`).
    """
    from dpstudio.engine.keying import keyed_rng

    job = Job(
        data=prep.data,
        roles=prep.roles,
        domains=prep.domains,
        params=params,
        rng=keyed_rng(rng, prep.run_context(params)),
        method=prep.spec.id,
        cache={} if cache is None else cache,
        hierarchies=prep.hierarchies,
        precision=dict(prep.precision or {}),
        types=dict(prep.types),
        names=list(prep.names) if prep.names is not None else None,
    )
    if prep._matrix is not None:
        # the prepared matrix of the protected columns is what job.matrix(protected) computes
        job.cache.setdefault(("matrix", tuple(prep.protected)), prep._matrix)
    if progress is not None:
        job.progress = progress
    if check_cancel is not None:
        job.check_cancel = check_cancel
    return job


def _in_keyed_order(job: Job, out: Output) -> Output:
    """``out`` with its records in keyed random order (issue 21 §3): input order would link
    records to the input file (sorted by name, households in adjacent rows).
    """
    if out.data is None:  # the release is the method's block: its one frame is built here
        assert out.block is not None
        n, columns = len(out.block), out.columns
    else:
        n, columns = len(out.data), out.data.columns
    perm = record_permutation(job, n, out.row_map)
    if out.block is not None:  # the release is one float block: one gather of it (issue 27 §2)
        # (np.take along the rows: the same rows as block[perm], in a third of its time)
        data = pd.DataFrame(np.take(out.block, perm, axis=0), columns=columns, copy=False)
    else:
        assert out.data is not None
        data = take_rows(out.data, perm)  # (text columns through their codes, issue 27)
    row_map = perm if out.row_map is None else np.asarray(out.row_map)[perm]
    return Output(
        data,
        info=out.info,
        warnings=out.warnings,
        row_map=row_map,
        tables=out.tables,
        protected=out.protected,
    )


def _separate_tables(
    job: Job, released: pd.DataFrame, protected_cols: list[str], out_info: dict, warns: list
) -> tuple[pd.DataFrame, dict, None, dict]:
    """Layout 'separate-tables': one one-column table per protected attribute, each in its
    own independent random order (drawn after the method's own draws: same clustering and
    noise as 'records'); returns (released, tables, row_map = None, info) and appends the
    layout's notices to ``warns``.
    """
    not_released = [c for c in released.columns if c not in protected_cols]
    tables = {
        c: released[[c]].iloc[job.rng.permutation(len(released))].reset_index(drop=True)
        for c in protected_cols
    }
    released = pd.DataFrame({c: tables[c][c] for c in protected_cols})
    row_map = None  # rows of different tables do not belong together
    info = {
        **out_info,
        "layout": "separate-tables",
        "tables": list(protected_cols),
        "columns_not_released": not_released,
    }
    if not_released:
        warns.append(
            notice(
                "layout-not-released",
                f"Layout 'separate-tables': column(s) {_shown(not_released)} are not "
                "released; only the protected attributes, each in its own table.",
            )
        )
    if len(protected_cols) > 1:
        warns.append(
            notice(
                "layout-unlinked",
                "Layout 'separate-tables': rows of different tables do not belong "
                "together, so record-level measures (SSE, record linkage, "
                "correlations) describe no real record; judge utility per attribute.",
            )
        )
    return released, tables, row_map, info


def _shown(cols: list[str]) -> str:
    """Every column, named: a published sentence must name each column it does not cover
    (issue 11: "sampling_weight and 1 more" was cut).
    """
    return ", ".join(map(str, cols))


#: Why a released column is not covered, by its role (other roles: 'released-unchanged').
_UNCOVERED_REASON = {Role.WEIGHT: "sampling-weight", Role.HOUSEHOLD: "household-id"}


def release_guarantee(
    spec: MethodSpec,
    params: dict,
    roles: dict,
    released_columns: list[str],
    protected: list[str],
    *,
    run: dict | None = None,
) -> Guarantee:
    """The guarantee of a release with ``released_columns``: the method's own
    (``spec.guarantee``), plus what the API knows -- the record order it applies, the
    columns released unchanged or not released, the survey roles.

    A clustered DP release (k ≥ 2) with columns released unchanged beside the protected ones
    is not ε-DP for the records: which records were grouped together shows in the unchanged
    columns (neighbours differing in one protected value can release different numbers of
    distinct rows).  The guarantee then holds per attribute only, and offers the remedies.
    ``run``: what the method's run reported (``Output.info``; None before a run).
    """
    roles = {c: (r if isinstance(r, Role) else Role(r)) for c, r in roles.items()}
    sep = separate_tables(params)
    ctx = GuaranteeContext.of(
        {**params, **({"order": ORDER_RANDOM} if sep else {})},  # each table shuffled on its own
        attributes=protected,
        roles=roles,
        released=released_columns,
        run=run,
    )
    g = spec.describe(ctx)
    if not spec.orders_records:  # the API orders these methods' records: it says how
        g = g.with_clauses(ordering(ctx, clustered=False)[0])
    if sep:
        gone = [c for c, r_ in roles.items() if c not in protected and r_ is not Role.IDENTIFIER]
        if gone:
            g = g.with_clauses(
                Clause(
                    "not-released",
                    f" Not released in this layout: the {len(gone)} other column(s) ({_shown(gone)}).",
                )
            )
        g = g.evolve(not_released=g.not_released + tuple(gone))
        return g.with_clauses(*survey_clauses(roles, released_columns))
    shielded = set(protected)
    unchanged = [
        c
        for c in released_columns
        if c not in shielded
        and c in roles
        and (spec.targets is not None or roles.get(c) not in spec.protects)
        and roles.get(c) is not Role.IDENTIFIER
    ]
    # (a column without a role was made by the method, e.g. Anatomy's group id)
    g = g.evolve(
        uncovered=g.uncovered
        + tuple(Uncovered(c, _UNCOVERED_REASON.get(roles[c], "released-unchanged")) for c in unchanged),
        not_released=g.not_released
        + tuple(c for c, r_ in roles.items() if r_ is Role.HOUSEHOLD and c not in released_columns),
    )
    g = _with_unchanged(spec, params, g, unchanged)
    return g.with_clauses(*survey_clauses(roles, released_columns))


def _with_unchanged(spec: MethodSpec, params: dict, g: Guarantee, unchanged: list[str]) -> Guarantee:
    """``g`` with what it says about the ``unchanged`` columns of a noisy release: narrowed
    to the attributes (with the remedies) when they show a clustered DP release's groups,
    else named as not covered.
    """
    if not (unchanged and spec.uses_epsilon and params.get("epsilon") is not None):
        return g
    clustered = spec.clusters and int(params.get("k") or 1) > 1
    dp_claim = g.model is Model.INDIVIDUAL_DP or (g.model is Model.EPSILON_DP and (g.is_dp or g.narrowed))
    if clustered and dp_claim:
        reason = (
            f"the {len(unchanged)} column(s) released unchanged beside the protected ones "
            f"({_shown(unchanged)}) show which records were grouped together "
            "(neighbouring data sets that differ in one protected value can release "
            "different numbers of distinct records)"
        )
        # the 'separate-tables' remedy, unless the guarantee offers it already
        offer_layout = any(q.name == "layout" for q in spec.params) and not g.has_clause("remedy-layout")
        remedy = (
            " Remedies: drop the column(s) released unchanged or protect them too"
            + (
                ", or choose the release layout 'separate-tables' (each protected "
                "attribute in its own independently shuffled one-column table, ε-DP by "
                "sequential composition; the other columns are then not released)"
                if offer_layout
                else ""
            )
            + "."
        )
        return g.narrowed_to_attributes(reason).with_clauses(
            Clause("remedy-layout" if offer_layout else "remedy", remedy)
        )
    return g.with_clauses(
        Clause(
            "not-covered",
            f" Not covered: the {len(unchanged)} column(s) released unchanged "
            f"({_shown(unchanged)}); they are not protected"
            + (
                ", and released beside the protected ones they can reveal which records were "
                "grouped together."
                if clustered
                else "."
            ),
        )
    )


def survey_clauses(roles: dict, released_columns: list[str]) -> list[Clause]:
    """The clauses naming the weight and household columns (none when there are none)."""
    roles = {c: (r if isinstance(r, Role) else Role(r)) for c, r in roles.items()}
    out: list[Clause] = []
    for c, r in roles.items():
        if r is Role.WEIGHT and c in released_columns:
            out.append(
                Clause(
                    "survey",
                    f" The sampling weight {c} is released unchanged (not protected; the "
                    "guarantee does not cover it).",
                )
            )
        elif r is Role.HOUSEHOLD:
            out.append(
                Clause(
                    "survey",
                    f" The household id {c} is released unchanged at the user's request: it "
                    "links the records of a household, which the guarantee does not cover."
                    if c in released_columns
                    else f" The household id {c} is not released.",
                )
            )
    return out


def survey_clause(roles: dict, released_columns: list[str]) -> str:
    """The sentence naming the weight and household columns (empty when there are none)."""
    return "".join(c.text for c in survey_clauses(roles, released_columns))


def describe(
    spec: MethodSpec,
    params: dict,
    roles: dict,
    released_columns: list[str],
    protected: list[str],
    *,
    run: dict | None = None,
) -> tuple[str, bool]:
    """The guarantee sentence and the ε-DP flag of :func:`release_guarantee` (its text and
    :attr:`~dpstudio.engine.guarantee.Guarantee.is_dp`).
    """
    g = release_guarantee(spec, params, roles, released_columns, protected, run=run)
    return g.render(), g.is_dp


def preview_guarantee(
    columns: list[str],
    method: str,
    roles: dict | None = None,
    *,
    data: pd.DataFrame | None = None,
    domains: dict | None = None,
    precision: dict | None = None,
    hierarchies: dict | None = None,
    **params: Any,
) -> Guarantee:
    """:func:`release_guarantee` for a data set with ``columns`` before it is protected (what
    the app's method panel shows); raises like :func:`prepare` on bad parameters.

    With ``data`` (and its ``domains``/``precision``) the guarantee is exactly the one
    :func:`protect` will publish, grid clause included (only a clause that depends on the
    method's run, such as t-close-dp's achieved t of an Anatomy release, can be added then).
    """
    if data is not None:
        prep = prepare(data, method, roles, domains, hierarchies, precision=precision, **params)
        released = _released_columns(
            prep.data.columns, prep.roles, prep.keep_household, prep.params, prep.protected
        )
        g = release_guarantee(prep.spec, prep.params, prep.roles, released, prep.protected)
        return with_grid_clause(g, prep, prep.params)
    spec = get_method(method)
    r = normalize_roles(list(columns), roles)
    keep_hh = bool(params.pop("keep_household", False))
    params.pop("types", None)
    p = spec.check_params(household_default(spec, r, params, keep_household=keep_hh))
    check_household_order(spec, r, p)
    protected = (
        _targets(spec, r, p)
        if spec.targets is not None
        else [c for c, role in r.items() if role in spec.protects]
    )
    released = _released_columns(list(map(str, columns)), r, keep_hh, p, protected)
    return release_guarantee(spec, p, r, released, protected)


def _released_columns(
    columns, roles: dict, keep_household: bool, params: dict, protected: list[str]
) -> list[str]:
    """The columns a release will hold: no identifier, no household id unless kept; with the
    layout 'separate-tables' only the protected attributes (as :func:`run_prepared` releases).
    """
    if separate_tables(params):
        return [c for c in columns if c in protected]
    return [
        c
        for c in columns
        if roles.get(c) is not Role.IDENTIFIER and (keep_household or roles.get(c) is not Role.HOUSEHOLD)
    ]


def describe_release(
    columns: list[str], method: str, roles: dict | None = None, **kw: Any
) -> tuple[str, bool]:
    """The sentence and ε-DP flag of :func:`preview_guarantee` (same arguments)."""
    g = preview_guarantee(columns, method, roles, **kw)
    return g.render(), g.is_dp


def with_grid_clause(g: Guarantee, prep: Prepared, params: dict) -> Guarantee:
    """``g`` plus the grid clause (noisy releases).  Nothing here depends on the data (issue
    21 §3 N1: the declared-domain note is a private note now).
    """
    if params.get("epsilon") is None:
        return g
    from dpstudio.engine.algorithms.noise import grid_clause

    return g.with_clauses(
        Clause("grid", grid_clause(dict(prep.precision or {}), getattr(prep, "precision_given", None)))
    )


def _with_clauses(guarantee: str, prep: Prepared, params: dict) -> str:
    """The sentence ``guarantee`` plus the grid clause (for callers holding text only)."""
    return with_grid_clause(Guarantee.plain(guarantee), prep, params).render()


def household_default(
    spec: MethodSpec, roles: dict[str, Role], params: dict, *, keep_household: bool = False
) -> dict:
    """``params`` with the default record order of data with a household id: households as
    units ('households', issue 23 §3) when a column has the role ``household``, the id is
    released (``keep_household``) and no order is given (an explicit order, 'random'
    included, is kept).

    When the household id is NOT released, the default stays 'random' (records shuffled one
    by one): members in adjacent rows would give back the household structure that
    withholding the id hides (issue 21 §3; ``tests/engine/test_public_independence.py``).
    'households' can still be chosen; the guarantee then says that households are released
    as units.
    """
    if params.get("order") is not None or "shuffle" in params:
        return params
    if not keep_household:
        return params
    if not any(q.name == "order" for q in spec.params):
        return params
    if not any(role is Role.HOUSEHOLD for role in roles.values()):
        return params
    return {**params, "order": ORDER_HOUSEHOLDS}


def default_params(
    method: str, roles: dict | None = None, columns=None, *, keep_household: bool = False
) -> dict:
    """Every parameter of ``method`` at its default for data with these ``roles`` (the app's
    form starts from it): the household order when a household id is declared and released.
    """
    spec = get_method(method)
    r = normalize_roles(list(columns) if columns is not None else list(roles or {}), roles)
    return {**spec.defaults(), **household_default(spec, r, {}, keep_household=keep_household)}


def check_household_order(spec: MethodSpec, roles: dict[str, Role], params: dict) -> None:
    """Households as units need a household-id column."""
    if household_order(params) and not any(role is Role.HOUSEHOLD for role in roles.values()):
        raise ParameterError(
            f"The 'order' parameter of method {spec.id!r} is {params.get('order')!r}, which "
            "releases households as units: give the household-id column the role 'household' "
            "(--role COL=household), or choose order 'random'."
        )


def _refuse_non_numeric_types(
    spec: MethodSpec, roles: dict[str, Role], types: dict[str, str], protected: list[str]
) -> None:
    """A numeric-only method would average category codes (sex 1.5): refuse, naming the
    column and the methods that fit its role.
    """
    bad = [c for c in protected if types.get(c) in NON_NUMERIC_TYPES]
    if not bad:
        return
    c = bad[0]
    fit = [m.id for m in all_methods() if not m.numeric_only and roles[c] in m.protects]
    raise NotApplicableError(
        f"Column {c!r} ({roles[c].label}) is typed {types[c]}, but method {spec.id!r} treats "
        f"values as numbers (it would release codes such as 1.5). Use a method for categorical "
        f"attributes ({', '.join(fit) or 'none protects this role'}), or type {c!r} numeric if "
        "its values are quantities."
    )


def _is_public_warning(w: str) -> bool:
    """A warning may be published only when its code is declared public
    (:mod:`dpstudio.engine.notices`); anything else is a fact about the data and stays
    private -- the safe default.
    """
    return is_public(w)


def protect(
    df: pd.DataFrame,
    method: str,
    roles: dict | None = None,
    domains: dict | None = None,
    *,
    seed: int | np.random.Generator | None = None,
    hierarchies: dict | None = None,
    precision: dict | None = None,
    types: dict | None = None,
    keep_household: bool = False,
    progress: Callable[[float], None] | None = None,
    check_cancel: Callable[[], None] | None = None,
    backend: str = "memory",
    client: Any = None,
    **params: Any,
) -> ProtectionResult:
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
        Column -> ARX hierarchy file path or :class:`~dpstudio.engine.hierarchies.hierarchy.Hierarchy`.
    precision : dict
        Column -> output grid γ of a noisy numeric attribute (e.g. ``{"FICA": 1}``): noise is
        drawn exactly on that grid and the release carries no more digits (default: 1 for
        integer columns, 10^(⌊log10(ub − lb)⌋ − 6) from the declared domain otherwise).
    types : dict
        Column -> ``numeric``, ``categorical``, ``ordinal`` or ``date`` (the user's choice;
        :func:`dpstudio.engine.roles.suggest_types` suggests them).  Numeric-only methods refuse
        a categorical or ordinal quasi-identifier.
    keep_household : bool
        Release the column with role ``household`` unchanged (default: it is not released).
    backend : {"memory", "dask"}
        ``"dask"``: run on Dask (issue 12; ``df`` may be a ``dask.dataframe`` or a Parquet/CSV
        path, ``client`` a ``distributed.Client``); returns a lazy
        :class:`~dpstudio.engine.backends.dask_backend.DaskRelease` equal to the in-memory
        release for the same seed.  Sort-based methods only; the others refuse, naming
        ``backend="memory"`` / ``--engine memory``.
    **params
        Method parameters (``k``, ``epsilon``, ``noise``, ``calibration``, …).

    >>> import pandas as pd
    >>> from dpstudio import engine
    >>> df = pd.DataFrame({"x": [1., 2., 3., 4., 5., 6.]})
    >>> res = engine.protect(df, "mdav", roles={"x": "k-quasi"}, k=3, seed=1)
    >>> sorted(res.data["x"].tolist())
    [2.0, 2.0, 2.0, 5.0, 5.0, 5.0]
    """
    if backend == "dask":
        return _protect_on_dask(
            df,
            method,
            roles,
            domains,
            seed=seed,
            precision=precision,
            client=client,
            hierarchies=hierarchies,
            types=types,
            keep_household=keep_household,
            **params,
        )
    if backend != "memory":
        raise ParameterError(f"backend must be 'memory' or 'dask'. Got {backend!r}.")
    prep = prepare(
        df,
        method,
        roles,
        domains,
        hierarchies,
        precision=precision,
        types=types,
        keep_household=keep_household,
        **params,
    )
    return run_prepared(prep, rng=as_rng(seed), progress=progress, check_cancel=check_cancel)


def _protect_on_dask(df, method, roles, domains, *, hierarchies=None, types=None, keep_household=False, **kw):
    """``protect(..., backend="dask")``: :func:`~dpstudio.engine.backends.dask_backend.protect_dask`."""
    from dpstudio.engine.backends import dask_backend as DB

    if hierarchies or keep_household:
        raise DB.NotOnDask(
            "Hierarchies and keep_household do not run on Dask; use backend='memory' (--engine memory)."
        )
    from dpstudio.engine.roles import parse_role

    has_household = any(parse_role(r, str(c)) is Role.HOUSEHOLD for c, r in (roles or {}).items())
    if household_order(kw) or (has_household and kw.get("order") is None):
        raise DB.NotOnDask(
            "Households released as units (order 'households', the default with a household-id "
            "column) do not run on Dask; use backend='memory' (--engine memory) or order "
            "'random' (--order random)."
        )
    if types:  # checked by prepare on the sample (numeric-only methods refuse categorical)
        kw["types"] = types
    return DB.protect_dask(df, method, roles, domains, **kw)


def evaluate(
    original: pd.DataFrame, protected: pd.DataFrame, attributes: list[str] | None = None, **options: Any
) -> dict:
    """Utility and risk measures of ``protected`` against ``original`` (see docs/measures.md).

    Rows are compared position by position (record j of ``protected`` protects record j of
    ``original``).  Pass ``result.aligned_original()`` when the method reorders rows, and the
    ``result`` and the ``hierarchies`` of the release: the engine's measurement policy then
    picks each attribute's distance (:func:`dpstudio.engine.measures.measurement_plan`).
    """
    if options.get("backend", "memory") == "dask":  # issue 12: measures on Dask
        from dpstudio.engine.backends.dask_measures import evaluate_dask

        options.pop("backend")
        options.pop("client", None)
        return evaluate_dask(original, protected, attributes, **options)
    options.pop("backend", None)
    from dpstudio.engine.measures import evaluate as _evaluate

    return _evaluate(original, protected, attributes, **options)


__all__ = [
    "methods",
    "protect",
    "evaluate",
    "check_applicable",
    "prepare",
    "run_prepared",
    "describe",
    "describe_release",
    "preview_guarantee",
    "release_guarantee",
    "InputError",
    "ParameterError",
    "NotApplicableError",
]
