"""What a method receives (:class:`Job`) and returns (:class:`Output`), and the
public :class:`ProtectionResult` that :func:`dpstudio.engine.protect` returns.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.roles import Role

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from dpstudio.engine.guarantee import Guarantee
    from dpstudio.engine.notices import Notice


def _no_progress(fraction: float) -> None:  # pragma: no cover - trivial
    pass


def _never_cancel() -> None:  # pragma: no cover - trivial
    pass


def listener(fn: Callable | None) -> Callable | None:
    """``fn``, or None when it is a :class:`Job`'s default progress or cancel callback (no one
    listens): a compiled loop then runs without stopping to call it (issue 27 §2).
    """
    return None if fn is None or fn is _no_progress or fn is _never_cancel else fn


@dataclass
class Job:
    """Everything a method needs to run once.

    ``data`` is a private copy of the input (after dropping records with missing
    values when the user asked for it), with a fresh 0..n-1 index.  ``params``
    are validated (see the method's :class:`~dpstudio.engine.registry.Param` list);
    ``params["epsilon"] is None`` means *no noise* (the noise-free baseline used by
    sweeps).  ``cache`` is shared by all runs of a sweep with the same data and
    roles: store the deterministic part that depends only on k (the clustering)
    under a key that includes k, and reuse it for every ε and repetition.
    """

    data: pd.DataFrame
    roles: dict[str, Role]
    domains: dict[str, tuple[float, float]]
    params: dict[str, Any]
    rng: np.random.Generator
    method: str = ""
    cache: dict = field(default_factory=dict)
    progress: Callable[[float], None] = _no_progress
    check_cancel: Callable[[], None] = _never_cancel
    hierarchies: dict = field(default_factory=dict)
    #: column -> output grid γ of the noisy numeric attributes (issue 8 §3)
    precision: dict = field(default_factory=dict)
    #: column -> the user's type: numeric, categorical, ordinal, date (issue 10)
    types: dict = field(default_factory=dict)
    #: ``data``'s column names as a list when the caller has them (the API: the names it
    #: checked); else read on first use (:meth:`column_names`)
    names: list[str] | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.data)

    def column_names(self) -> list[str]:
        """``data``'s column names as a list, read once (listing pandas' text index goes
        through Arrow: ~0.1 ms right after a long computation, issue 27 §2).
        """
        if self.names is None:
            self.names = self.data.columns.tolist()
        return self.names

    @property
    def noise_free(self) -> bool:
        return self.params.get("epsilon", 0) is None

    def columns(self, *roles: Role) -> list[str]:
        return [c for c, r in self.roles.items() if r in roles]

    def matrix(self, cols: list[str]) -> np.ndarray:
        """Columns as a float64 (n, m) array (cached)."""
        key = ("matrix", tuple(cols))
        if key not in self.cache:
            self.cache[key] = np.ascontiguousarray(self.data[cols].to_numpy(dtype=np.float64))
        return self.cache[key]

    def bounds(self, cols: list[str]) -> tuple[np.ndarray, np.ndarray]:
        lb = np.array([self.domains[c][0] for c in cols], dtype=np.float64)
        ub = np.array([self.domains[c][1] for c in cols], dtype=np.float64)
        return lb, ub

    def epsilon_shares(self, cols: list[str]) -> np.ndarray:
        """ε_i per attribute for the method's budget split (see :func:`epsilon_shares`)."""
        return epsilon_shares(self.params, cols)


def epsilon_shares(params: Mapping, cols: list[str]) -> np.ndarray:
    """ε_i per attribute of ``cols`` for the budget split of ``params`` (docs/methods.md §4): the
    ONE split used by the methods' runs and their guarantee sentences.

    'equal': ε/m each; 'per-attribute': ε each (the release is (m·ε)-DP); 'weights': ε in
    proportion to ``params['weights']``, which must give a positive finite weight for every
    column of ``cols``.
    """
    eps = float(params["epsilon"])
    m = len(cols)
    mode = params.get("budget", "equal")
    if mode == "per-attribute":
        return np.full(m, eps)
    if mode == "weights":
        w = params.get("weights") or {}
        missing = [c for c in cols if c not in w]
        if missing:
            raise ParameterError(
                "budget='weights' needs a weight for every protected attribute; missing: "
                + ", ".join(missing)
                + "."
            )
        try:
            arr = np.array([float(w[c]) for c in cols])
        except (TypeError, ValueError):
            arr = np.array([np.nan])
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ParameterError("Budget weights must be positive finite numbers.")
        return eps * arr / arr.sum()
    return np.full(m, eps / m)


@dataclass
class Output:
    """What a method returns.

    ``data``: the full frame (all input columns, protected ones replaced; the API
    drops identifiers); None only when the release is exactly ``block`` with the columns
    ``columns`` (the API then builds the one frame itself, in the release's record order).
    ``row_map[j]`` = position in ``Job.data`` of output row j
    when the method reorders or suppresses rows (``None``: same order, same rows).
    ``tables``: extra released tables (e.g. Anatomy's two tables).
    """

    data: pd.DataFrame | None
    info: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    row_map: np.ndarray | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    protected: list[str] | None = None
    #: ``data``'s values as one float64 (n, m) matrix (column j of it is column j of
    #: ``data``) when ``data`` was built from exactly that matrix
    #: (:func:`~dpstudio.engine.protection._common.matrix_output`): the API then puts the
    #: records in their keyed order with one gather of it (issue 27 §2); None otherwise
    block: np.ndarray | None = field(default=None, repr=False)
    #: the release's column names (``Job.data``'s) when ``data`` is None: a frame built once,
    #: in keyed order, instead of once in input order and again in keyed order (issue 27 §2)
    columns: pd.Index | None = field(default=None, repr=False)


@dataclass
class ProtectionResult:
    """The result of :func:`dpstudio.engine.protect`.

    ``data`` is the protected release (identifiers dropped).  ``guarantee`` is the
    sentence to publish and ``is_dp`` whether the release is ε-DP; both come from
    ``guarantee_info``, the guarantee as data (:class:`~dpstudio.engine.guarantee.Guarantee`:
    model, ε per attribute and in total, scope, covered and uncovered columns, clauses), which
    answers every other question about it.  The seed is deliberately not stored here.

    Warnings are :class:`~dpstudio.engine.notices.Notice` objects (a method's plain text is
    read as a private ``method-note``), of two kinds by their code:

    * ``public_warnings``: functions of the parameters only (e.g. "ε is very large"); they
      may be published (metadata, release note).
    * ``private_notes``: facts about the original data ("column X is constant", records
      dropped for missing values, suppression counts, ...); they go to the private side only
      (audit trail, assessment report), never into a public file.

    ``warnings`` is everything, for the operator's eyes (app, terminal): do not publish it.
    """

    data: pd.DataFrame
    method: str
    method_name: str
    params: dict
    guarantee: str
    is_dp: bool
    roles: dict[str, str]
    domains: dict[str, tuple[float, float]]
    protected_attributes: list[str]
    info: dict
    warnings: list[str]
    row_map: np.ndarray | None
    dropped_rows: list[int]
    tables: dict[str, pd.DataFrame]
    original: pd.DataFrame | None = field(default=None, repr=False)
    #: column -> output grid γ of each noisy numeric attribute (public: it is declared)
    precision: dict = field(default_factory=dict)
    public_warnings: list[str] = field(default_factory=list)
    #: the guarantee as data (None only for a result built by hand from a sentence)
    guarantee_info: Guarantee | None = field(default=None, repr=False)
    #: the user's column types the run was made with (the measurement policy reads them)
    types: dict = field(default_factory=dict)
    #: the hierarchies the run was made with (column -> file or Hierarchy), for the measures
    hierarchies: dict = field(default_factory=dict, repr=False)
    #: a chain's steps (:mod:`dpstudio.engine.chain`): each step's own result, in order
    #: (their ``original`` is not kept); empty for the result of one method
    steps: tuple = field(default=(), repr=False)

    @property
    def methods(self) -> tuple[str, ...]:
        """The method ids of the steps of a chain, or ``(method,)``."""
        return tuple(s.method for s in self.steps) if self.steps else (self.method,)

    @property
    def private_notes(self) -> list[Notice]:
        """The warnings whose code is not public -- facts about the data -- each a
        :class:`~dpstudio.engine.notices.Notice` (a method's plain text gets
        ``method-note``): keep them internal (see the class docstring).
        """
        from dpstudio.engine.notices import as_notice

        listed = set(map(str, self.public_warnings))  # (a result built by hand from plain text)
        return [n for n in map(as_notice, self.warnings) if not n.public and str(n) not in listed]

    def aligned_original(self) -> pd.DataFrame:
        """The original records in the order of ``data`` (for evaluation; never release it)."""
        if self.original is None:
            raise ValueError("original data not kept")
        if self.row_map is None:
            return self.original
        from dpstudio.engine.codes import take_rows

        return take_rows(self.original, self.row_map)

    def public_params(self) -> dict:
        """The parameters as public files show them: no seed, and the settings files a method
        reads (a PRAM matrix, a mapping of categories) by their base names only (the private
        files keep the paths).  A chain's steps each so.
        """

        def public(method: str, params: dict) -> dict:
            from dpstudio.engine.errors import DPStudioError
            from dpstudio.engine.params import file_names
            from dpstudio.engine.registry import get_method

            params = {k: v for k, v in params.items() if k not in ("seed", "rng")}
            try:
                spec = get_method(method)
            except DPStudioError:
                return params
            return file_names(spec.params, params)

        out = public(self.method, dict(self.params))
        steps = out.get("steps")
        if isinstance(steps, list):
            out["steps"] = [
                {**s, "params": public(str(s.get("method")), dict(s.get("params") or {}))}
                if isinstance(s, dict)
                else s
                for s in steps
            ]
        return out

    def public_metadata(
        self, software_version: str | None = None, *, output_sha256: str | None = None
    ) -> dict:
        """Metadata safe to publish: a function of the parameters and the release only.

        No seed, no original values, and nothing computed from the original data: no input
        file name or digest, no count of records dropped or suppressed, no data-dependent
        warning (those are in :attr:`private_notes` and the private audit trail).  The
        release's own record count and digest are functions of the release.
        ``output_sha256``: the digest of the release file as written (the export passes it; it
        is then not computed by serialising the table again).
        """
        from dpstudio import __version__

        params = self.public_params()
        return {
            "software": "dpstudio",
            "software_version": software_version or __version__,
            "method": self.method,
            "method_name": self.method_name,
            "parameters": jsonable(params),
            "guarantee": self.guarantee,
            "differential_privacy": self.is_dp,
            "roles": dict(self.roles),
            "domains": {c: [float(a), float(b)] for c, (a, b) in self.domains.items()},
            "precision": {c: float(g) for c, g in self.precision.items()},
            "protected_attributes": list(self.protected_attributes),
            "records_released": int(len(self.data)),
            "warnings": [str(w) for w in self.public_warnings],
            "output_sha256": output_sha256 if output_sha256 is not None else frame_sha256(self.data),
        }


def frame_sha256(df: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(df.to_csv(index=False).encode("utf-8"))
    return h.hexdigest()


def jsonable(v: Any) -> Any:
    """``v`` ready for JSON: numpy scalars as Python numbers, tuples as lists, keys as text,
    NaN as ``null`` and ±infinity as ``"inf"``/``"-inf"`` (JSON has neither), anything else
    JSON cannot hold as its ``str``.  For metadata, project files and ``--json`` output.
    """
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)
