"""Utility and risk measures and the measurement policy (docs/measures.md).

Every measure compares the original data X (n records) with its protected version X′
record by record: row j of ``protected`` is the protected version of row j of ``original``
(pass ``result.aligned_original()`` for methods that reorder or suppress rows).  Everything
is vectorised; nothing loops over records in Python and nothing builds an n × n matrix.

Modules: :mod:`.utility` (SSE, Δ statistics, correlation loss, score), :mod:`.risk`
(record linkage), :mod:`.kanon` (k-anonymity classes), :mod:`.keps` ((k, ε) measures),
:mod:`.semantic` (measures with a taxonomy's semantic distance), :mod:`.survey_risk`
(re-identification risk of categorical keys).  This package holds :func:`evaluate` and the
*measurement policy* (:func:`measurement_plan`): which distance each attribute is measured
with and which measures apply to it -- the same for ``protect``'s summary, ``evaluate``,
every sweep point, the CLI and the app.

>>> import pandas as pd
>>> x = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0]})
>>> y = pd.DataFrame({"a": [1.5, 1.5, 3.5, 3.5]})
>>> sse(x, y, ["a"])
1.0
>>> record_linkage(x, y, ["a"])   # each x′ is tied between two originals
50.0
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import DPStudioError, ParameterError
from dpstudio.engine.measures._base import _check_pair, _col, _is_numeric
from dpstudio.engine.measures.kanon import k_anonymity_check
from dpstudio.engine.measures.risk import TIE_RTOL, record_linkage
from dpstudio.engine.measures.utility import (
    _sse_both,
    correlation_loss,
    delta_stats,
    eigen_utility,
    il1s,
    score,
    sse,
)

_METHOD_MEASURES: dict[str, list[Callable[..., dict]]] = {}


def is_k_anonymous(method: str | None) -> bool:
    """Does the release of ``method`` claim k-anonymity on the k-quasi-identifiers (the spec
    flag ``k_anonymous``)?  The ``kanon`` measure is computed for those only: for
    probabilistic k-anonymity and t-closeness the released k-quasi values are not meant to
    form classes of k, and the check would mislead.
    """
    from dpstudio.engine.registry import is_k_anonymous as _flag

    return _flag(method)


SCALAR_KEYS = (
    "sse_raw",
    "sse_normalized",
    "rl",
    "corr_loss_mean",
    "corr_loss_std",
    "delta_mean_avg",
    "delta_var_avg",
    "il1s",
    "il1s_mean",
    "eigen",
    "tv_mean",
    "hellinger_mean",
    "suppressed_cells",
    "suppressed_share",
    "expected_reidentifications",
    "global_risk",
    "f1_macro_protected",
    "f1_macro_original",
    "f1_ratio",
)

#: Every measure name :func:`evaluate` knows (docs/measures.md).
KNOWN_MEASURES = (
    "sse",
    "rl",
    "delta",
    "corr",
    "kanon",
    "il1s",
    "eigen",
    "freq",
    "suppressed",
    "reid",
    "classification",
)
#: What the policy always adds for a method that suppresses key values (spec flag
#: ``missing_matches_any``): its sweeps plot them against k.
SUPPRESSION_MEASURES = ("suppressed", "reid")


def default_measures(method: str | None) -> tuple[str, ...]:
    """The measures a sweep of ``method`` reports when none are asked for: suppressed cells,
    expected re-identifications, frequency-table distances and k-anonymity for a method that
    suppresses categorical key values; SSE, record linkage and the expected re-identifications on
    the generalised keys for a k-anonymous generalising method (k-eps); SSE and record linkage
    otherwise.
    """
    from dpstudio.engine.registry import generalises, is_k_anonymous, missing_matches_any

    if method and missing_matches_any(method):
        return ("suppressed", "reid", "freq", "kanon")
    if method and is_k_anonymous(method) and generalises(method):
        return ("sse", "rl", "reid")
    return ("sse", "rl")


#: Warning of :func:`evaluate` naming the numeric k-quasis measured with the 0/1 distance.
GENERALISED_NOTE = (
    "Generalised to intervals by the method, so measured as categories in SSE "
    "and record linkage (a changed value counts 1, no numeric distance): "
)


def register_method_measures(method_id: str, fn: Callable[..., dict]) -> Callable[..., dict]:
    """Let a method add its own measures to :func:`evaluate`.

    ``fn(original, protected, result, measures, cache) -> dict`` is called by
    :func:`evaluate` when ``result is not None and result.method == method_id``;
    its keys are merged into the returned dict (scalar values are averaged by
    sweeps).  Registering the same function twice is a no-op.  Returns ``fn`` so
    that it can be used as a decorator factory argument.
    """
    fns = _METHOD_MEASURES.setdefault(str(method_id), [])
    if fn not in fns:
        fns.append(fn)
    return fn


# --------------------------------------------------------------- the policy


def mismatch(a, b) -> np.ndarray:
    """0/1 distance on the printed values (39 and '39' match; 39 and '35-39' do not)."""
    a = np.asarray(a, dtype=object).astype(str)
    b = np.asarray(b, dtype=object).astype(str)
    return (a != b).astype(np.float64)


def label_mismatch(a, b) -> np.ndarray:
    """0/1 distance on category labels, 1 and 1.0 alike and a missing (suppressed) value
    differing from every value: the distance of keys a method suppresses.
    """
    from dpstudio.engine.measures.categorical import _labels

    la = _labels(pd.Series(np.asarray(a, dtype=object)).infer_objects()).to_numpy()
    lb = _labels(pd.Series(np.asarray(b, dtype=object)).infer_objects()).to_numpy()
    return (la != lb).astype(np.float64)


class HierarchyDistance:
    """Semantic distance δ of a column's hierarchy (docs/measures.md: categorical dist = δ)
    as a ``categorical_distance`` callable.  Values are compared as printed labels
    (39 → '39'); a label the hierarchy does not know counts as the largest distance when it
    differs.
    """

    def __init__(self, hierarchy, column: str = "") -> None:
        from dpstudio.engine.hierarchies.taxonomy import load_taxonomy

        self.tax = load_taxonomy(hierarchy, column)
        self.top = float(np.max(self.tax.dist)) if np.size(self.tax.dist) else 1.0
        self.known = np.asarray(list(self.tax.concepts), dtype=object).astype(str)

    def __call__(self, a, b):
        a = np.asarray(a, dtype=object).astype(str)
        b = np.asarray(b, dtype=object).astype(str)
        out = np.where(a == b, 0.0, self.top)
        ok = np.isin(a, self.known) & np.isin(b, self.known)
        if ok.any():
            out[ok] = np.asarray(self.tax.distance(a[ok], b[ok]), dtype=np.float64)
        return out


def generalises_numeric(method: str | Iterable[str] | None) -> bool:
    """Whether ``method`` (or one of the steps of a chain, given as a sequence of ids) turns a
    numeric k-quasi-identifier into interval text.

    Read from the method's spec flag ``generalises`` (False for unknown ids).
    """
    from dpstudio.engine.registry import generalises

    return any(generalises(m) for m in _ids(method))


def _ids(method: str | Iterable[str] | None) -> tuple[str, ...]:
    """A method id, or the ids of a chain's steps, as a tuple (empty for None)."""
    if not method:
        return ()
    if isinstance(method, str):
        return (method,)
    return tuple(str(m) for m in method)


@dataclass
class MeasurePlan:
    """Which distance each attribute is measured with in SSE and record linkage
    (``distances``; attributes not listed use |x − x′| when numeric, else 0/1) and which of
    them are generalised numeric k-quasis measured 0/1 (``flat``).
    """

    distances: dict = field(default_factory=dict)
    flat: list = field(default_factory=list)
    #: the categorical key variables (k-quasis compared as categories: frequency tables,
    #: suppressed cells and re-identification risk are measured on them)
    keys: list = field(default_factory=list)
    #: sampling weight and household columns (roles ``weight`` / ``household``)
    weight: str | None = None
    household: str | None = None
    #: the method sets key values to missing, a missing value matching any value
    wildcard: bool = False
    #: numeric columns with a hierarchy, measured |x − x′| while the release keeps them
    #: numeric, by the hierarchy's δ when the release turns them into labels (issue 11)
    if_labels: dict = field(default_factory=dict)
    #: columns typed categorical / ordinal: no Δ mean/variance or correlation, even when
    #: their codes are numbers (issue 24 §7)
    categorical: tuple = ()

    def distances_for(self, protected: pd.DataFrame, attrs: list[str]) -> dict:
        """:attr:`distances` plus δ for the ``if_labels`` columns released as text, and the
        0/1 distance on labels for any other attribute released as labels (a numeric column
        recoded into intervals, merged categories: measured as categories).
        """
        out = dict(self.distances)
        for c, h in self.if_labels.items():
            if c in attrs and c in protected.columns and not pd.api.types.is_numeric_dtype(protected[c]):
                out[c] = h
        for c in attrs:
            if c not in out and c in protected.columns and not pd.api.types.is_numeric_dtype(protected[c]):
                out[c] = label_mismatch
        return out

    def numeric_attributes(
        self, original: pd.DataFrame, protected: pd.DataFrame, attrs: list[str]
    ) -> list[str]:
        """The attributes Δ statistics and correlations are measured on: all of them, or,
        when some carry a semantic or 0/1 distance, only those still numeric on both sides
        (a numeric column measured by δ may be generalised).
        """
        attrs = [a for a in attrs if a not in self.categorical]
        if not self.distances:
            return list(attrs)
        return [
            a
            for a in attrs
            if a not in self.distances
            or (pd.api.types.is_numeric_dtype(original[a]) and pd.api.types.is_numeric_dtype(protected[a]))
        ]


def measurement_plan(
    original: pd.DataFrame,
    *,
    method: str | Iterable[str] | None = None,
    roles: dict | None = None,
    hierarchies: dict | None = None,
    types: dict | None = None,
) -> MeasurePlan:
    """The measurement policy (docs/measures.md "Distances"), the same for every caller
    (``protect``'s summary, ``evaluate``, every sweep point, CLI and app).

    ``method`` is a method id or, for a chain, the ids of its steps (a flag holds for the
    chain when it holds for one of its steps).

    Per column:

    * a protected column with a loaded hierarchy: its semantic distance δ, unless it is
      numeric and the method leaves it numeric (numeric values keep |x − x′|; when the
      release holds text for it, e.g. concept labels, δ again: ``if_labels``); a hierarchy
      that cannot be read as a taxonomy is ignored (the method validates hierarchies
      itself; 0/1 then); with ``roles`` given, only columns protected by a role
      (not ``other``/``identifier``) are;
    * a numeric k-quasi that a generalising method (spec flag ``generalises``) turns into
      interval text: 0/1 on the printed values;
    * Δ mean/variance and correlations: see :meth:`MeasurePlan.numeric_attributes`;
    * categorical keys (frequency tables, suppressed cells, re-identification risk): the
      k-quasis of a method that suppresses key values, and every k-quasi that is text, has a
      semantic distance, or is typed categorical/ordinal in ``types``.

    >>> import pandas as pd
    >>> plan = measurement_plan(pd.DataFrame({"age": [30, 41]}), method="k-eps",
    ...                         roles={"age": "k-quasi"})
    >>> plan.flat
    ['age']
    """
    known = roles is not None  # without roles, every column with a hierarchy is measured by it
    roles = {str(c): str(getattr(r, "value", r)) for c, r in (roles or {}).items()}
    gen = generalises_numeric(method)
    dist: dict = {}
    if_labels: dict = {}
    for c, h in (hierarchies or {}).items():
        c = str(c)
        if (known and roles.get(c) in (None, "other", "identifier")) or c not in original.columns:
            continue
        keep_numeric = pd.api.types.is_numeric_dtype(original[c]) and not (gen and roles.get(c) == "k-quasi")
        try:
            d = HierarchyDistance(h, c)
        except DPStudioError:
            continue
        if keep_numeric:
            if_labels[c] = d  # numeric values keep |x − x′|; labels get δ
        else:
            dist[c] = d
    flat: list[str] = []
    if gen:
        for c, r in roles.items():
            if (
                r == "k-quasi"
                and c not in dist
                and c in original.columns
                and pd.api.types.is_numeric_dtype(original[c])
            ):
                dist[c] = mismatch
                flat.append(c)
    from dpstudio.engine.registry import missing_matches_any

    wildcard = any(missing_matches_any(m) for m in _ids(method))
    kq = [c for c, r in roles.items() if r == "k-quasi" and c in original.columns]
    typed = {str(c): str(t) for c, t in (types or {}).items()}
    keys = [
        c
        for c in kq
        if wildcard
        or c in dist
        or typed.get(c) in ("categorical", "ordinal")
        or not pd.api.types.is_numeric_dtype(original[c])
    ]
    if wildcard:  # a suppressed key value counts 1 in SSE and record linkage, never 0
        for c in keys:
            if c not in dist:
                dist[c] = label_mismatch
    weight = next((c for c, r in roles.items() if r == "weight"), None)
    household = next((c for c, r in roles.items() if r == "household"), None)
    categorical = tuple(c for c, t in typed.items() if t in ("categorical", "ordinal"))
    return MeasurePlan(
        dist, flat, keys, weight, household, wildcard, if_labels=if_labels, categorical=categorical
    )


# --------------------------------------------------------------- evaluate


def _result_method(result: Any) -> str | tuple[str, ...] | None:
    """The method id of ``result``, or the ids of its steps when it is a chain's."""
    steps = getattr(result, "steps", None)
    if steps:
        return tuple(s.method for s in steps)
    return getattr(result, "method", None)


def _kanon_k(result: Any) -> int | None:
    """The k whose classes the ``kanon`` measure checks on the k-quasi-identifiers: the
    method's k when its release claims k-anonymity (spec flag ``k_anonymous``); for a chain,
    the smallest k of a k-anonymity claim that survives the chain (None: no claim, no check).
    """
    if getattr(result, "steps", None):
        from dpstudio.engine.guarantee import Model

        g = getattr(result, "guarantee_info", None)
        ks = [p.k for p in (g.parts if g is not None else ()) if p.model is Model.K_ANONYMITY and p.k]
        return min(ks) if ks else None
    if not is_k_anonymous(getattr(result, "method", None)):
        return None
    k = (getattr(result, "params", {}) or {}).get("k")
    return int(k) if k else None


def _check_measure_names(measures: tuple, result: Any) -> None:
    """Refuse unknown measure names (they may be method-specific measures: refused only when
    the result's method has no measure hook).
    """
    known = set(KNOWN_MEASURES)
    unknown = [m for m in measures if m not in known]
    if unknown and not (result is not None and getattr(result, "method", None) in _METHOD_MEASURES):
        raise ParameterError(
            f"Unknown measure(s) {', '.join(map(repr, unknown))}. Known: {', '.join(sorted(known))}."
        )


def _default_attributes(original: pd.DataFrame, protected: pd.DataFrame, result: Any) -> list[str]:
    """:func:`evaluate`'s default attributes: the result's protected attributes, else the
    numeric columns of the original that the release has too.
    """
    if result is not None and getattr(result, "protected_attributes", None):
        return list(result.protected_attributes)
    pcols = {str(c) for c in protected.columns}
    return [str(c) for c in original.columns if str(c) in pcols and _is_numeric(_col(original, str(c)))]


def _columns_of_role(result: Any, role: str) -> list:
    """The columns the result's roles give ``role`` (a Role or its value)."""
    return [c for c, r in getattr(result, "roles", {}).items() if str(getattr(r, "value", r)) == role]


def _correlation_measures(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    num_attrs: list,
    confidential: Iterable[str] | None,
    result: Any,
    warns: list[str],
) -> dict[str, Any]:
    """``corr_loss_mean`` / ``corr_loss_std`` over the confidential columns (default: the
    result's), none when there are none.
    """
    if confidential is None and result is not None:
        confidential = _columns_of_role(result, "confidential")
    conf = [c for c in (confidential or []) if c in original.columns and c in protected.columns]
    if not conf:
        return {}
    mean, std = correlation_loss(original, protected, conf, num_attrs, warnings=warns)
    return {"corr_loss_mean": mean, "corr_loss_std": std}


def _kanon_measures(protected: pd.DataFrame, result: Any, wildcard: bool) -> dict[str, Any]:
    """``k_min_class_size`` / ``k_share_below`` of the release on the result's k-quasis (a
    missing value matching any value when ``wildcard``).
    """
    kq = [c for c in _columns_of_role(result, "k-quasi") if c in protected.columns]
    k = _kanon_k(result)
    if kq and k and wildcard:  # missing matches any value: f_k of each record
        from dpstudio.engine.algorithms.frequencies import encode_keys, wildcard_counts

        fk, _ = wildcard_counts(*encode_keys(protected, kq, "any"))
        return {"k_min_class_size": int(fk.min()), "k_share_below": float(np.mean(fk < int(k)))}
    if kq and k:
        chk = k_anonymity_check(protected, kq, int(k))
        return {"k_min_class_size": chk["min_class_size"], "k_share_below": chk["share_below_k"]}
    return {}


def _key_measures(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    measures: tuple,
    keys: list[str],
    weight: str | None,
    warns: list[str],
) -> dict[str, Any]:
    """The measures on the categorical keys (``freq``, ``suppressed``, ``reid``) that were asked
    for; a warning instead when there are no keys.
    """
    survey = [m for m in ("freq", "suppressed", "reid") if m in measures]
    if survey and not keys:
        warns.append(
            "No categorical key variables (k-quasi-identifiers compared as "
            "categories): " + ", ".join(survey) + " not measured."
        )
        return {}
    out: dict[str, Any] = {}
    if survey:
        from dpstudio.engine.measures import categorical as C

        if "freq" in measures:
            out.update(C.frequency_distances(original, protected, keys))
        if "suppressed" in measures:
            out.update(C.suppressed_cells(original, protected, keys))
        if "reid" in measures:
            out.update(C.release_risk(protected, keys, weight))
    return out


def _classification_measure(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    class_attribute: str | None,
    features: Iterable[str] | None,
    binarise: Any,
    seed: int,
) -> dict[str, Any]:
    """The classification utility (``f1_*``) predicting ``class_attribute``."""
    if class_attribute is None:
        raise ParameterError(
            "The classification measure needs the class attribute to "
            "predict (class_attribute= / --class-attribute COL)."
        )
    from dpstudio.engine.measures.classification import classification_utility

    return classification_utility(
        original, protected, class_attribute, features, binarise=binarise, seed=seed
    )


def evaluate(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attributes: Iterable[str] | None = None,
    *,
    measures: Iterable[str] = ("sse", "rl", "delta", "corr"),
    result: Any = None,
    cache: dict | None = None,
    confidential: Iterable[str] | None = None,
    rl_distance: str = "standardized",
    hierarchies: dict | None = None,
    method: str | Iterable[str] | None = None,
    roles: dict | None = None,
    plan: MeasurePlan | None = None,
    keys: Iterable[str] | None = None,
    weight: str | None = None,
    class_attribute: str | None = None,
    binarise: Any = "median",
    classification_seed: int = 0,
    features: Iterable[str] | None = None,
    types: dict | None = None,
    **opts: Any,
) -> dict:
    """All requested measures in one flat dict, measured by the policy of
    :func:`measurement_plan` (docs/measures.md).

    Keys: ``sse_raw``, ``sse_normalized`` (measure ``sse``); ``rl`` (``rl``);
    ``delta_mean``/``delta_var`` ({attr: value}) and ``delta_mean_avg``/``delta_var_avg``
    (``delta``); ``corr_loss_mean``/``corr_loss_std`` (``corr``, when confidential
    attributes are known); ``k_min_class_size``/``k_share_below`` (``kanon``, with a
    ``result`` that has k-quasis and k); plus method-specific measures (see
    :func:`register_method_measures`); ``warnings`` (list of str).  Sweeps average
    the scalar keys.

    ``attributes`` default: ``result.protected_attributes`` or the common numeric
    columns.  ``confidential`` default: the result's confidential columns.  ``method`` and
    ``roles`` default to the result's; ``hierarchies`` (column -> hierarchy file or object)
    are those the release was made with.  ``plan``: a precomputed :func:`measurement_plan`
    (sweeps plan once).  ``opts``: ``categorical_distance`` = {col: callable} (overrides
    the policy's distance of those columns).

    Survey measures (issue 10): ``il1s`` (``il1s``, ``il1s_mean``) and ``eigen`` (sdcMicro's
    dUtility) on the numeric attributes; ``freq`` (``tv``/``hellinger`` per key and key pair,
    ``tv_mean``, ``hellinger_mean``), ``suppressed`` (``suppressed_cells``,
    ``suppressed_share``) and ``reid`` (``expected_reidentifications``, ``global_risk`` of
    the release) on the categorical ``keys`` (default: the policy's, i.e. the k-quasis
    compared as categories), with the sampling ``weight`` (default: the column with role
    weight); ``classification`` (``f1_*``, see
    :func:`~dpstudio.engine.measures.classification.classification_utility`) predicting
    ``class_attribute`` from ``features``, a numeric class made binary by ``binarise``,
    forests seeded with ``classification_seed``.  For a method that suppresses key values
    (spec flag ``missing_matches_any``) ``suppressed`` and ``reid`` are always measured and
    ``kanon`` counts a missing value as matching any value.
    """
    measures = tuple(measures)
    _check_measure_names(measures, result)
    given = opts.pop("categorical_distance", None)
    if opts:
        raise ParameterError(f"Unknown evaluation option(s): {', '.join(sorted(opts))}.")
    if attributes is None:
        attributes = _default_attributes(original, protected, result)
    if plan is None:
        plan = measurement_plan(
            original,
            method=method if method is not None else _result_method(result),
            roles=roles if roles is not None else getattr(result, "roles", None),
            hierarchies=hierarchies,
            types=types,
        )
    if plan.wildcard:
        measures = tuple(dict.fromkeys(measures + SUPPRESSION_MEASURES))
    keys = [str(k) for k in keys] if keys is not None else list(plan.keys)
    weight = weight if weight is not None else plan.weight
    survey_only = set(measures) <= {"freq", "suppressed", "reid", "classification", "kanon"}
    if survey_only and not attributes:
        attributes = keys or [str(c) for c in original.columns if str(c) in protected.columns]
    attrs = _check_pair(original, protected, attributes)
    planned = plan.distances_for(protected, attrs)
    cat_dist = {**planned, **given} if isinstance(given, dict) else (given or planned or None)
    num_attrs = MeasurePlan(planned, categorical=plan.categorical).numeric_attributes(
        original, protected, attrs
    )
    warns: list[str] = []
    out: dict[str, Any] = {}
    if "sse" in measures:
        out["sse_raw"], out["sse_normalized"] = _sse_both(original, protected, attrs, cat_dist, warns, cache)
    if "rl" in measures:
        out["rl"] = record_linkage(
            original, protected, attrs, rl_distance, cache, categorical_distance=cat_dist, warnings=warns
        )
    if "delta" in measures and num_attrs:
        ds = delta_stats(original, protected, num_attrs, warnings=warns)
        out.update(ds)
        for key in ("delta_mean", "delta_var"):
            vals = [v for v in ds[key].values() if np.isfinite(v)]
            out[f"{key}_avg"] = float(np.mean(vals)) if vals else float("nan")
    if "corr" in measures and num_attrs:
        out.update(_correlation_measures(original, protected, num_attrs, confidential, result, warns))
    if "kanon" in measures and result is not None and _kanon_k(result) is not None:
        out.update(_kanon_measures(protected, result, plan.wildcard))
    if "il1s" in measures and num_attrs:
        out.update(il1s(original, protected, num_attrs))
    if "eigen" in measures and num_attrs:
        out["eigen"] = eigen_utility(original, protected, num_attrs)
    out.update(_key_measures(original, protected, measures, keys, weight, warns))
    if "classification" in measures:
        out.update(
            _classification_measure(
                original, protected, class_attribute, features, binarise, classification_seed
            )
        )
    if result is not None:
        for fn in _METHOD_MEASURES.get(getattr(result, "method", ""), []):
            extra = fn(original, protected, result, measures, cache)
            if extra:
                out.update(extra)
    if plan.flat:
        warns.append(GENERALISED_NOTE + ", ".join(plan.flat) + ".")
    out["warnings"] = warns
    return out


__all__ = [
    "sse",
    "record_linkage",
    "delta_stats",
    "correlation_loss",
    "score",
    "k_anonymity_check",
    "evaluate",
    "register_method_measures",
    "TIE_RTOL",
    "measurement_plan",
    "MeasurePlan",
    "HierarchyDistance",
    "mismatch",
    "generalises_numeric",
    "is_k_anonymous",
    "SCALAR_KEYS",
    "KNOWN_MEASURES",
    "default_measures",
    "il1s",
    "eigen_utility",
]
