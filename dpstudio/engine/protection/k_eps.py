"""``k-eps`` — (k, ε)-anonymity (paper 003; docs/methods.md ``k-eps``).

1. identifiers are dropped (by the API);
2. the k-quasis are k-anonymised by generalisation, OLA (optimal full-domain, with record
   suppression) or Mondrian (multidimensional) — :mod:`dpstudio.engine.algorithms.ola`, :mod:`~dpstudio.engine.algorithms.mondrian`;
3. inside each equivalence class every record's ε-quasis get Laplace (or staircase) noise
   calibrated to sensitivity Σ_j diam_j(ec) — scale Σ_j diam_j(ec)/ε, one record-level
   mechanism over the ε-quasis (paper 003 §IV); a class whose diameters are all 0 gets
   no noise; outputs are clamped to the declared domain, if any;
4. the records are shuffled;
5. optionally, c-confident k-anonymity (§V-C) suppresses the records whose released
   ε-quasis fall within the c-confidence radius of fewer than k (but at least one) original
   class members, then the classes left with fewer than k records.

This is *not* ε-differential privacy: the noise scale is the class's own range of values,
which depends on the data (one record can change it).  The guarantee is k-anonymity on the
k-quasis plus within-class noise.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine import validation as V
from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.algorithms.generalization import CodedLabels, encode_quasis
from dpstudio.engine.algorithms.mondrian import mondrian
from dpstudio.engine.algorithms.ola import ola
from dpstudio.engine.background import Ahead
from dpstudio.engine.codes import from_codes
from dpstudio.engine.codes import take as take_column
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.guarantee import Clause, Effect, Effects, Guarantee, GuaranteeContext, Model
from dpstudio.engine.hierarchies.hierarchy import load_hierarchy
from dpstudio.engine.measures.keps import (
    class_diameters,
    confidence_radius,
    confident_suppression,
    keps_measures,
)
from dpstudio.engine.notices import notice
from dpstudio.engine.outofcore import FrequencyChoice, FrequencySet, FrequencyTask, NotOutOfCore
from dpstudio.engine.params import Param
from dpstudio.engine.pileup import REMEDY_CLASS_RANGE
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    DROP_MISSING_PARAM,
    NOISE_PARAM,
    ORDER_PARAM,
    as_k,
    epsilon_param,
    household_order,
    household_permutation,
    job_stream,
    k_param,
    keep_order,
    ordering,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

ALGORITHM_PARAM = Param(
    "algorithm",
    "choice",
    "ola",
    "How the k-quasis are generalised: 'ola' = optimal full-domain generalisation over the "
    "hierarchy levels (every value of a column generalised to the same level; records in "
    "classes smaller than k are suppressed, up to the suppression limit); 'mondrian' = "
    "multidimensional median partitioning (numeric columns released as ranges, categorical "
    "ones as hierarchy nodes; no suppression).",
    label="generalisation algorithm",
    choices=("ola", "mondrian"),
    choice_labels={"ola": "OLA (optimal full-domain)", "mondrian": "Mondrian (multidimensional)"},
)

SUPPRESSION_PARAM = Param(
    "suppression",
    "float",
    0.05,
    "OLA only: the largest share of records that may be suppressed (removed from the release) "
    "to reach k-anonymity with less generalisation. 0.05 = 5 %.",
    label="suppression limit",
    minimum=0.0,
    maximum=0.99,
)

CONFIDENCE_PARAM = Param(
    "confidence",
    "float",
    None,
    "Optional c-confident k-anonymity (paper 003 §V-C): with confidence c (e.g. 0.99), also "
    "suppress released records whose noisy ε-quasi lies within the c-confidence radius of fewer "
    "than k original class members, and classes left with fewer than k records. Empty = off.",
    label="confidence c",
    minimum=0.0,
    min_inclusive=False,
    maximum=0.999999,
)

LOSS_PARAM = Param(
    "loss",
    "choice",
    "precision",
    "OLA's utility metric, the one the search minimises: 'precision' (paper 003 §III-A: "
    "level/(height−1) per cell, suppressed records count as fully generalised); ARX's metrics "
    "'loss' (ARX's default: share of the domain each value covers, geometric mean over the "
    "attributes), 'discernibility' (Σ class size² + n per suppressed record), 'aecs' (average "
    "equivalence class size, the suppressed records as one class) and 'entropy' (non-uniform "
    "entropy). Suppressed records count as in ARX.",
    label="OLA utility metric",
    choices=("precision", "loss", "discernibility", "aecs", "entropy"),
    choice_labels={
        "precision": "precision",
        "loss": "loss (ARX default)",
        "discernibility": "discernibility",
        "aecs": "average class size (AECS)",
        "entropy": "non-uniform entropy",
    },
    advanced=True,
)

_PARAMS = (
    k_param(default=5, minimum=2),
    epsilon_param(1.0),
    ALGORITHM_PARAM,
    SUPPRESSION_PARAM,
    CONFIDENCE_PARAM,
    LOSS_PARAM,
    NOISE_PARAM,
    DROP_MISSING_PARAM,
    ORDER_PARAM,
)


def _effects(ctx: GuaranteeContext) -> Effects:
    """As a step of a chain: the k-quasis generalised (OLA: every value of a column to the
    level chosen from the data, a value-wise map; Mondrian: cells chosen record by record),
    the ε-quasis perturbed with noise scaled to each class (so the k-quasis are read), and
    records suppressed from the data (OLA with a suppression limit > 0, or c-confidence).
    """
    kq = ctx.columns(Role.K_QUASI) or []
    eq = ctx.columns(Role.EPS_QUASI) or []
    ola_ = ctx.get("algorithm", "ola") == "ola"
    changes = {c: (Effect.DATA_MAP if ola_ else Effect.PERTURB) for c in kq}
    changes.update({c: Effect.PERTURB for c in eq})
    removes = (ola_ and float(ctx.get("suppression") or 0) > 0) or bool(ctx.get("confidence"))
    return Effects(changes=changes, reads=tuple(kq), removes_records=removes, keys=tuple(kq))


def _guarantee(ctx: GuaranteeContext) -> Guarantee:
    k = ctx.get("k")
    eps = ctx.get("epsilon")
    ola_ = ctx.get("algorithm", "ola") == "ola"
    alg = "OLA full-domain generalisation" if ola_ else "Mondrian generalisation"
    head = (
        f"{k}-anonymity on the k-quasi-identifiers ({alg}"
        + (f", at most {100 * float(ctx.get('suppression') or 0):g} % of records suppressed" if ola_ else "")
        + ")"
    )
    clauses = [Clause("claim", head)]
    eq = ctx.columns(Role.EPS_QUASI)
    model, baseline = Model.K_EPSILON_ANONYMITY, False
    if eq is not None and len(eq) == 0:
        model = Model.K_ANONYMITY
        clauses += [
            Clause(
                "mechanism", "; there is no ε-quasi-identifier, so no noise is added and ε plays no role."
            ),
            Clause("not-dp", " Not differential privacy."),
        ]
    elif eps is None:
        model, baseline = Model.K_ANONYMITY, True
        clauses.append(
            Clause("baseline", "; the ε-quasi-identifiers are released without noise (noise-free baseline).")
        )
    else:
        named = f" ({', '.join(eq)})" if eq else ""
        clauses += [
            Clause(
                "mechanism",
                f", plus within-class noise on the ε-quasi-identifiers{named}: inside each "
                f"equivalence class, {ctx.get('noise', 'laplace')} noise of scale (class range)/ε "
                f"with ε = {eps:g} ((k, ε)-anonymity, paper 003).",
            ),
            Clause(
                "not-dp",
                " This is NOT ε-differential privacy: the noise is calibrated to each class's own "
                "range of values, which depends on the data, so changing one record can change "
                "the noise of a whole class.",
            ),
        ]
    if ctx.get("confidence"):
        clauses.append(
            Clause(
                "mechanism",
                f" Records whose noisy values stay within the {float(ctx.get('confidence')):g}-"
                "confidence radius of fewer than k class members are suppressed (c-confident "
                "k-anonymity).",
            )
        )
    clauses.append(ordering(ctx, clustered=False)[0])
    return Guarantee(
        model=model,
        clauses=tuple(clauses),
        k=as_k(k),
        epsilon=None if eps is None else float(eps),
        covered=ctx.attributes,
        baseline=baseline,
    )


def _eps_matrix(job: Job, cols: list[str]) -> np.ndarray:
    for c in cols:
        V.numeric_column(job.data, c, Role.EPS_QUASI.label)
    if not cols:
        return np.zeros((job.n, 0))
    X = job.data[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    return X


def _hierarchies(job: Job, kq: list[str]) -> tuple[dict, list[str]]:
    given = dict(job.hierarchies or {})
    unknown = [c for c in given if c not in job.data.columns]
    if unknown:
        raise ParameterError(
            f"Hierarchy given for column(s) not in the data: {', '.join(map(repr, unknown))}."
        )
    warns: list[str] = []
    not_k = [c for c in given if c not in kq]
    if not_k:
        warns.append(
            notice(
                "hierarchy-ignored",
                f"Hierarchies for {', '.join(map(repr, not_k))} were ignored: only k-quasi-"
                "identifiers are generalised.",
            )
        )
    return {c: load_hierarchy(given[c], c) for c in kq if c in given}, warns


def _hkey(job: Job) -> tuple:
    """The cache key of the run's hierarchies."""
    return tuple(sorted((c, h if isinstance(h, str) else id(h)) for c, h in (job.hierarchies or {}).items()))


def _generalise(job: Job, kq: list[str]) -> tuple:
    """The k-anonymous generalisation for this k (cached in ``job.cache``: sweeps reuse it
    for every ε and repetition).
    """
    p = job.params
    k, alg = int(p["k"]), p.get("algorithm") or "ola"
    sup_given = p.get("suppression")
    sup = float(sup_given if sup_given is not None else 0.05)
    hkey = _hkey(job)
    key = ("k-eps", "generalisation", k, alg, sup, p.get("loss") or "precision", tuple(kq), hkey)
    if key in job.cache:
        return job.cache[key]
    hs, warns = _hierarchies(job, kq)
    if alg == "ola":
        qkey = ("k-eps", "encoded", tuple(kq), hkey)
        if qkey not in job.cache:
            job.cache[qkey] = encode_quasis(job.data, kq, hs)
        gen = ola(
            job.data,
            kq,
            k,
            suppression=sup,
            loss=p.get("loss") or "precision",
            quasis=job.cache[qkey],
            check_cancel=job.check_cancel,
        )
    else:
        num_with_h = [c for c in hs if pd.api.types.is_numeric_dtype(job.data[c])]
        if num_with_h:
            warns.append(
                notice(
                    "hierarchy-not-used",
                    f"Mondrian releases numeric k-quasis as ranges; the hierarchies of "
                    f"{', '.join(map(repr, num_with_h))} were not used.",
                )
            )
        gen = mondrian(job.data, kq, k, hierarchies=hs, check_cancel=job.check_cancel)
    job.cache[key] = (gen, warns)
    return gen, warns


def _released_labels(gen, c: str, row_map: np.ndarray, combos: np.ndarray | None = None) -> pd.Series:
    """The generalised values of ``c`` for the released records ``row_map``, a text column
    built from the codes (one gather in Arrow) when the generalisation has them; ``combos``:
    ``gen.labels.combos_of(row_map)``, shared by the columns.
    """
    lab = gen.labels
    if isinstance(lab, CodedLabels):
        return from_codes(lab.codes_of(c, row_map, combos=combos), lab.categories[c])
    return pd.Series(lab[c][row_map], dtype=object)


def _settings(job: Job, eq: list[str]) -> tuple[int, Any, str, Any]:
    """Return ``k``, ε, the noise kind and the confidence, refusing what cannot be calibrated."""
    p = job.params
    k = int(p["k"])
    eps = p.get("epsilon")
    kind = p.get("noise") or "laplace"
    conf = p.get("confidence")
    if kind == "staircase" and len(eq) > 1:
        raise ParameterError(
            "noise='staircase' in method 'k-eps' needs a single ε-quasi-identifier: the record-"
            "level mechanism (scale Σ_j diam_j/ε on each) is calibrated to an L1 sensitivity, "
            "which Laplace noise honours and staircase noise does not. Use noise='laplace' or "
            f"keep one ε-quasi (got {len(eq)}: {', '.join(eq)})."
        )
    if conf is not None:  # the declared range (0, 0.999999] says it; checked by the one path
        conf = CONFIDENCE_PARAM.check(conf, "k-eps")
    return k, eps, kind, conf


def _noisy_eps_quasis(
    job: Job, eq: list[str], Xk: np.ndarray, cls: np.ndarray, n_cls: int, eps: Any, kind: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list | None]:
    """Return the class ranges, the per-class and per-record sensitivities, the noisy ε-quasis and their grids."""
    diam = class_diameters(cls, Xk, n_cls) if eq else np.zeros((n_cls, 0))
    grids = None
    if eq and eps is not None:
        # exact integer noise on each ε-quasi's grid γ_j (issue 8 §3): the class range in
        # grid units covers the rounding, and the record-level L1 mechanism gives every
        # coordinate the same value-unit scale S/ε, S = Σ_j γ_j·diam_t,j(ec)
        grids = [N.job_grid(job, c) for c in eq]
        T = np.column_stack([g.to_units(Xk[:, j]) for j, g in enumerate(grids)])
        diam_t = class_diameters(cls, T.astype(np.float64), n_cls).astype(np.int64)
        gam = np.array([g.gamma for g in grids])
        diam = diam_t * gam  # the ranges actually covered, value units
    sens_cls = diam.sum(axis=1)  # record-level L1 sensitivity per class
    sens = sens_cls[cls]
    if grids is not None:
        assert eps is not None  # grids are built only when eps is not None (above)
        if len(eq) == 1:
            Z = N.grid_noise(kind, job.rng, diam_t[cls, 0], float(eps), len(cls))[:, None]
        else:  # Laplace only (staircase refused above): rate γ_j·ε′/S per coordinate
            with np.errstate(divide="ignore"):
                rate = gam[None, :] * (float(eps) * (1.0 - N.EPS_SAFETY)) / sens[:, None]
            Z = N.discrete_laplace(job.rng, np.broadcast_to(rate, T.shape), T.shape)
        Y = np.column_stack([g.from_units(T[:, j] + Z[:, j]).astype(np.float64) for j, g in enumerate(grids)])
    else:
        Y = Xk.copy()
    return diam, sens_cls, sens, Y, grids


def _confidence_step(
    *,
    cls: np.ndarray,
    Xk: np.ndarray,
    Y: np.ndarray,
    sens: np.ndarray,
    k: int,
    n_cls: int,
    eq: list[str],
    eps: Any,
    kind: str,
    conf: Any,
    warns: list,
) -> tuple[np.ndarray, dict | None]:
    """Step 5, c-confident k-anonymity: return the released-record mask and the step's figures."""
    conf_info = None
    rel = np.ones(len(cls), dtype=bool)
    if conf is not None and eq and eps is not None:
        r = sens * confidence_radius(kind, float(eps), float(conf))
        sup_c, whole = confident_suppression(cls, Xk, Y, r, k)
        rel = ~sup_c
        conf_info = {
            "c": float(conf),
            "records": int(sup_c.sum()),
            "records_share": float(sup_c.sum()) / max(len(cls), 1),
            "classes": int(whole.sum()),
            "classes_share": float(whole.sum()) / max(n_cls, 1),
        }
        if not rel.any():
            raise InputError(
                f"c-confident k-anonymity with c = {conf:g} would suppress every record; "
                "lower the confidence or ε, or raise k."
            )
    elif conf is not None and not eq:
        warns.append(
            notice("confidence-ignored", "confidence was ignored: there are no ε-quasi-identifiers.")
        )
    return rel, conf_info


#: ids whose sort keys :func:`_keyed_order_all` draws at a time
_KEY_CHUNK = 1 << 18


def _keyed_order_all(shuffle_stream: Any, n: int) -> np.ndarray | None:
    """The record ids 0 … n − 1 ordered by their first keyed sort key, or None when two ids
    share one (then the released records are ordered by :func:`_release_order`'s exact
    path: probability ~n²/2⁶⁵).  The keys of an id do not depend on the other ids
    (:meth:`~dpstudio.engine.algorithms.keyed.KeyedStream.block`), so the released records'
    order is this order restricted to them (:func:`_order_of_subset`).
    """
    k0 = np.empty(n, dtype=np.uint64)
    for a in range(0, n, _KEY_CHUNK):  # (chunk by chunk: never the four words of all ids)
        ids = np.arange(a, min(n, a + _KEY_CHUNK), dtype=np.int64)
        k0[a : a + ids.size] = shuffle_stream.block(ids, 0, 0)[:, 0]
    order = np.argsort(k0)
    s0 = k0[order]
    if s0.size > 1 and bool(np.any(s0[1:] == s0[:-1])):
        return None
    return order


def _order_of_subset(order_all: np.ndarray, ids: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """``pos`` (one value per id of ``ids``) in the order ``order_all`` gives the ids (the
    ids 0 … n − 1 in the order of their distinct first sort keys): what ordering ``ids`` by
    their own keys gives, without sorting them again.
    """
    at = np.full(n, -1, dtype=np.int64)
    at[ids] = pos
    ordered = at[order_all]
    return ordered[ordered >= 0]


def _order_ahead(job: Job, shuffle_stream: Any) -> Ahead | None:
    """The keyed order of all the job's records, started now (alongside the generalisation,
    which does not need it) when the release is shuffled record by record; else None.
    """
    p = job.params
    if keep_order(p) or household_order(p):
        return None
    n = job.n
    return Ahead(lambda: _keyed_order_all(shuffle_stream, n), cells=n * max(len(job.data.columns), 1))


def _release_order(
    job: Job, kept: np.ndarray, rel: np.ndarray, shuffle_stream: Any, ahead: Ahead | None = None
) -> np.ndarray:
    """Step 4: the positions (in ``kept``) of the released records, in release order
    (``ahead``: :func:`_order_ahead` of the job, when started).
    """
    # ordered by the keyed sort keys of their record ids (input positions), which do not
    # depend on how the data is partitioned (issue 12); order='input' keeps them in input order
    p = job.params
    rel_idx = np.flatnonzero(rel)
    if keep_order(p):
        take = rel_idx
    elif household_order(p):  # households as units (issue 23 §3)
        take = rel_idx[household_permutation(job, rel_idx.size, kept[rel_idx])]
    else:
        order_all = ahead.result() if ahead is not None else None
        if order_all is not None:
            take = _order_of_subset(order_all, kept[rel_idx], rel_idx, job.n)
        else:
            k0, k1 = K.sort_keys(shuffle_stream, kept[rel_idx])
            take = rel_idx[K.order_by_keys(k0, k1)]
            del k0, k1
    return take


def _renumber_classes(out_cls_raw: np.ndarray, n_cls: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the release's class of each row (renumbered), the classes present and each one's first row."""
    # (np.unique's sorts, by counting: the classes are 0 … n_cls − 1)
    present = np.zeros(n_cls, dtype=bool)
    present[out_cls_raw] = True
    uniq_cls = np.flatnonzero(present)
    out_cls = (np.cumsum(present) - 1)[out_cls_raw]
    class_rows = np.full(len(uniq_cls), len(out_cls), dtype=np.int64)  # first row of each class
    np.minimum.at(class_rows, out_cls, np.arange(len(out_cls), dtype=np.int64))
    return out_cls, uniq_cls, class_rows


def _released_data(
    job: Job,
    gen,
    kq: list[str],
    eq: list[str],
    Y: np.ndarray,
    take: np.ndarray,
    grids: list | None,
    row_map: np.ndarray,
) -> pd.DataFrame:
    """The released table, columns in the input's order."""
    # a k-quasi generalised to level 0 keeps its original values (as the columns no method
    # changes); the others are built whole, never one record at a time (issue 27)
    from dpstudio.engine import parallel

    new_cols: dict[str, Any] = {}
    for j, c in enumerate(eq):
        new_cols[c] = Y[take, j].astype(np.int64) if grids is not None and grids[j].integer else Y[take, j]
    generalised = [c for c in kq if gen.levels.get(c, -1) != 0]
    combos = gen.labels.combos_of(row_map) if generalised and isinstance(gen.labels, CodedLabels) else None
    # every other column's gather: one Arrow / numpy gather each, several at a time
    # (parallel.py; the same columns as one after the other, as take_rows gives them)
    tasks: dict[str, Callable[[], pd.Series]] = {}
    for c in job.data.columns:
        if c in new_cols:
            continue
        if c in generalised:
            tasks[c] = partial(_released_labels, gen, c, row_map, combos)
        else:
            tasks[c] = partial(take_column, job.data[c], row_map)  # (the Series taken here)
    done = parallel.map_ordered(lambda f: f(), list(tasks.values()), cells=len(row_map) * len(tasks))
    new_cols.update(zip(tasks, done))
    out = pd.DataFrame(
        {j: pd.Series(new_cols[c]) for j, c in enumerate(job.data.columns)},
        index=pd.RangeIndex(len(row_map)),
        copy=False,
    )
    out.columns = job.data.columns
    return out


def _class_table(
    *,
    data: pd.DataFrame,
    kq: list[str],
    eq: list[str],
    out_cls: np.ndarray,
    uniq_cls: np.ndarray,
    class_rows: np.ndarray,
    diam: np.ndarray,
    sens_cls: np.ndarray,
    eps: Any,
) -> pd.DataFrame:
    """The release's equivalence classes: labels, size, ranges and noise scale."""
    classes = pd.DataFrame({"class": np.arange(len(uniq_cls))})
    for c in kq:
        classes[c] = data[c].iloc[class_rows].to_numpy()
    classes["size"] = np.bincount(out_cls, minlength=len(uniq_cls))
    for j, c in enumerate(eq):
        classes[f"diam_{c}"] = diam[uniq_cls, j]
    classes["noise_sensitivity"] = sens_cls[uniq_cls]
    if eps is not None:
        classes["noise_scale"] = sens_cls[uniq_cls] / float(eps)
    return classes


def _level_info(job: Job, gen, kq: list[str], row_map: np.ndarray, info: dict, warns: list) -> None:
    """Add the chosen levels (and hierarchy sources) to ``info``; warn of k-quasis wiped to '*'."""
    info["chosen_levels"] = dict(gen.levels)
    qs = job.cache.get(("k-eps", "encoded", tuple(kq), _hkey(job)))
    if qs is not None:
        info["hierarchy_sources"] = {qq.name: qq.hierarchy.source for qq in qs}
    wiped = _wiped_notice(kq, gen.levels, gen.heights, released=len(row_map))
    if wiped is not None:
        warns.append(wiped)


def _wiped_notice(kq: list[str], levels: dict, heights: dict, *, released: int):
    """The private ``k-quasi-wiped`` notice when OLA took a k-quasi to the top of its
    hierarchy ('*' in every released record) and some record is released; else None.  The
    one decision of it, for the in-memory run and the frequency-set (Dask) run alike.
    """
    wiped = [c for c in kq if heights.get(c, 1) > 1 and levels.get(c, 0) >= heights[c] - 1]
    if not wiped or not released:
        return None
    return notice(
        "k-quasi-wiped",
        f"{', '.join(map(repr, wiped))} generalised to the top of "
        f"{'its' if len(wiped) == 1 else 'their'} hierarchy: '*' in every released "
        "record, the release says nothing about "
        f"{'it' if len(wiped) == 1 else 'them'}. Give the k-quasis hierarchies with "
        "more levels (the app's hierarchy builder, or --hierarchy COL=FILE), lower k or "
        "allow more suppression.",
    )


def _suppression_notices(sup_rows: np.ndarray, conf_info: dict | None, n: int) -> list:
    """The notices of the records the generalisation and the confidence step suppressed."""
    warns = []
    if len(sup_rows):
        warns.append(
            notice(
                "records-suppressed",
                f"{len(sup_rows)} record(s) ({100 * len(sup_rows) / n:.2f} %) were suppressed "
                "by the generalisation step and are not in the release.",
            )
        )
    if conf_info and conf_info["records"]:
        warns.append(
            notice(
                "records-suppressed",
                f"c-confident k-anonymity (c = {conf_info['c']:g}) suppressed {conf_info['records']} "
                f"more record(s) ({100 * conf_info['records'] / n:.2f} %).",
            )
        )
    return warns


def run_keps(job: Job) -> Output:
    kq = job.columns(Role.K_QUASI)
    eq = job.columns(Role.EPS_QUASI)
    k, eps, kind, conf = _settings(job, eq)
    X = _eps_matrix(job, eq)
    # the shuffle's keyed stream; its root is the run's first draw (issue 12: the Dask backend
    # gives the same order for the same seed)
    shuffle_stream = job_stream(job, K.PURPOSE_SHUFFLE)
    # the records' keyed order, computed alongside the generalisation (issue 27: both core)
    ahead = _order_ahead(job, shuffle_stream)
    job.progress(0.05)
    gen, warns = _generalise(job, kq)
    warns = list(warns)
    job.progress(0.6)
    n = job.n
    cls_all = gen.class_id
    kept = np.flatnonzero(cls_all >= 0)
    cls = cls_all[kept]
    n_cls = gen.n_classes
    Xk = X[kept]
    diam, sens_cls, sens, Y, grids = _noisy_eps_quasis(job, eq, Xk, cls, n_cls, eps, kind)
    rel, conf_info = _confidence_step(
        cls=cls, Xk=Xk, Y=Y, sens=sens, k=k, n_cls=n_cls, eq=eq, eps=eps, kind=kind, conf=conf, warns=warns
    )
    job.progress(0.85)
    take = _release_order(job, kept, rel, shuffle_stream, ahead)
    row_map = kept[take]
    sens_rel = sens[take]
    # equivalence classes of the release (renumbered, as released)
    out_cls_raw = cls[take]
    del sens, cls  # (issue 27: the records' arrays go before the released columns come)
    out_cls, uniq_cls, class_rows = _renumber_classes(out_cls_raw, n_cls)
    del out_cls_raw
    data = _released_data(job, gen, kq, eq, Y, take, grids, row_map)
    classes = _class_table(
        data=data,
        kq=kq,
        eq=eq,
        out_cls=out_cls,
        uniq_cls=uniq_cls,
        class_rows=class_rows,
        diam=diam,
        sens_cls=sens_cls,
        eps=eps,
    )
    sup_rows = np.flatnonzero(cls_all < 0)
    conf_rows = kept[~rel]
    summary = gen.summary()
    released_loss = float(gen.cell_loss[row_map].mean()) if len(row_map) else float("nan")
    info = {
        "generalisation": summary,
        "algorithm": gen.algorithm,
        "records_in": int(n),
        "records_released": int(len(row_map)),
        "equivalence_classes": classes,
        "n_classes": int(len(uniq_cls)),
        "min_class_size": int(classes["size"].min()) if len(classes) else 0,
        "suppressed_rows": sup_rows.tolist(),
        "confidence_suppressed_rows": conf_rows.tolist(),
        "suppression": {
            "generalisation_records": int(len(sup_rows)),
            "generalisation_share": float(len(sup_rows)) / max(n, 1),
            "confidence_records": int(len(conf_rows)),
            "confidence_share": float(len(conf_rows)) / max(n, 1),
        },
        "confidence_step": conf_info,
        "class_of_row": np.asarray(out_cls, dtype=np.int64),
        "sensitivity_of_row": sens_rel,
        "generalisation_loss": float(gen.loss),
        "released_loss": released_loss,
        "epsilon_quasis": list(eq),
        "k_quasis": list(kq),
        # the noise is each class's own range / ε: the pile-up advice must not say "larger k"
        "pileup_remedy": REMEDY_CLASS_RANGE,
    }
    if gen.node is not None:
        _level_info(job, gen, kq, row_map, info, warns)
    warns.extend(_suppression_notices(sup_rows, conf_info, n))
    job.progress(1.0)
    # ``protected`` is what generic measures (SSE, record linkage) compare by default: the
    # numeric ε-quasis.  The generalised k-quasis are strings ("30-34"); their information loss
    # is ``keps_gen_loss`` and their k-anonymity ``keps_min_class_size`` (keps_metrics).
    return Output(
        data=data, info=info, warnings=warns, row_map=row_map, protected=list(eq) if eq else list(kq)
    )


# --------------------------------------------------------------------------- out of core


def refuse_out_of_core(p: dict) -> str | None:
    """What k-eps does beyond OLA does not run on Dask: the option named."""
    if (p.get("algorithm") or "ola") != "ola":
        return "k-eps runs on Dask with algorithm='ola' only; Mondrian needs --engine memory."
    if p.get("confidence") is not None:
        return "k-eps option confidence (c-confident suppression) does not run on Dask; use --engine memory."
    return None


def _leaf_codes(part: pd.DataFrame, kq: list[str], leaf_index: list[dict]) -> dict[str, np.ndarray]:
    """Every record's leaf index in its k-quasi's hierarchy (as ``encode_quasis`` in memory)."""
    from dpstudio.engine.hierarchies.build import factorize_strings

    out = {}
    for c, index in zip(kq, leaf_index):
        codes, labels = factorize_strings(part[c])
        if (codes < 0).any():
            raise InputError(
                f"Column {c!r} has missing values; the Dask backend refuses them: remove those records first."
            )
        lut = np.fromiter((index.get(str(v), -1) for v in labels), dtype=np.int64, count=len(labels))
        if (lut < 0).any():
            raise InputError(
                f"Column {c!r}: value {labels[int(np.flatnonzero(lut < 0)[0])]!r} is not in its "
                "hierarchy. Add it to the hierarchy file."
            )
        out[c] = lut[codes]
    return out


def _choose(freq: pd.DataFrame, *, kq: list[str], hs: dict, p: dict) -> FrequencyChoice:
    """OLA on the frequency table (the records' leaf combinations with their counts as
    weights): the same node, the same suppressed combinations as in memory.
    """
    from dpstudio.engine.algorithms.generalization import EncodedQuasi

    qs = []
    for c in kq:
        h = hs[c]
        lv = [h.level_codes(lvl) for lvl in range(h.height)]
        qs.append(EncodedQuasi(c, h, freq[c].to_numpy(np.int64), [x[1] for x in lv], [x[0] for x in lv]))
    counts = freq["__n"].to_numpy(np.int64)
    sup = p.get("suppression")
    gen = ola(
        freq,  # not read: the quasis are given
        kq,
        int(p["k"]),
        suppression=float(sup if sup is not None else 0.05),
        loss=p.get("loss") or "precision",
        quasis=qs,
        weights=counts,
    )
    keep = gen.class_id >= 0
    levels = dict(gen.levels)
    labels = {c: (q.labels[levels[c]][q.codes[levels[c]]] if levels[c] > 0 else None) for c, q in zip(kq, qs)}
    n = int(counts.sum())
    n_sup = int(counts[~keep].sum())
    summary = gen.summary()
    summary["suppressed_records"] = n_sup
    summary["suppression_share"] = n_sup / max(n, 1)
    sizes = np.bincount(gen.class_id[keep], weights=counts[keep]) if keep.any() else np.zeros(0)
    summary["min_class_size"] = int(sizes.min()) if sizes.size else 0
    info = {
        "generalisation": summary,
        "chosen_levels": levels,
        "frequency_set_rows": int(len(freq)),
        "records_in": n,
        "records_released": n - n_sup,
    }
    warns: list = []
    if n_sup:
        warns.append(
            notice(
                "records-suppressed",
                f"{n_sup} record(s) ({100 * n_sup / n:.2f} %) were suppressed "
                "by the generalisation step and are not in the release.",
            )
        )
    # the same private notice as in memory when a k-quasi is '*' in every released record
    wiped = _wiped_notice(kq, levels, dict(gen.heights), released=n - n_sup)
    if wiped is not None:
        warns.append(wiped)
    return FrequencyChoice(keep=keep, labels=labels, info=info, warnings=warns)


def out_of_core_task(prep, hierarchies: dict | None) -> FrequencyTask:
    """k-eps (OLA) out of core through a frequency set (ARX's approach): the k-quasis' leaf
    indices counted per combination, the lattice search on that table, then every record
    generalised to the chosen node (the records of the suppressed combinations left out).
    The within-class noise and automatic hierarchies need all the records: refused by name.
    """
    eq = [c for c, r in prep.roles.items() if r is Role.EPS_QUASI]
    if eq:
        raise NotOutOfCore(
            "k-eps on Dask runs the OLA generalisation of the k-quasi-identifiers only; the "
            f"within-class noise on the ε-quasi-identifiers ({', '.join(eq)}) does not run on "
            "Dask yet: release them with another role or use --engine memory."
        )
    kq = [c for c, r in prep.roles.items() if r is Role.K_QUASI]
    missing = [c for c in kq if c not in (hierarchies or {})]
    if missing:
        raise NotOutOfCore(
            f"k-eps on Dask needs a hierarchy file for every k-quasi-identifier; "
            f"{', '.join(map(repr, missing))} ha{'s' if len(missing) == 1 else 've'} none "
            "(an automatic hierarchy is built from all the values in memory): give "
            + " ".join(f"--hierarchy {c}=FILE" for c in missing)
            + " or use --engine memory."
        )
    assert hierarchies is not None
    hs = {c: load_hierarchy(hierarchies[c], c) for c in kq}
    leaf_index = [{v: i for i, v in enumerate(hs[c].leaves)} for c in kq]
    return FrequencyTask(
        columns=kq,
        encode=partial(_leaf_codes, kq=kq, leaf_index=leaf_index),
        choose=partial(_choose, kq=kq, hs=hs, p=dict(prep.params)),
    )


SPEC = MethodSpec(
    id="k-eps",
    name="(k, ε)-anonymity",
    family="k-anonymity + noise",
    description=(
        "Generalises the k-quasi-identifiers (OLA over hierarchy levels, or Mondrian) "
        "until every combination is shared by at least k records, then adds noise to the "
        "ε-quasi-identifiers inside each group, scaled to the group's own range of values, "
        "and shuffles the records. Optional c-confident suppression of records whose noisy "
        "values still point to few group members."
    ),
    paper=_P.HOLOHAN_2017,
    params=_PARAMS,
    protects=(Role.K_QUASI, Role.EPS_QUASI),
    requires=(Role.K_QUASI,),
    guarantee=_guarantee,
    effects=_effects,
    run=run_keps,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=True,
    numeric_only=False,
    min_k=2,
    k_anonymous=True,
    generalises=True,
    clusters=True,
    orders_records=True,
    outofcore=FrequencySet(setup=out_of_core_task, refuse=refuse_out_of_core),
)

from dpstudio.engine.measures import register_method_measures  # noqa: E402

register_method_measures("k-eps", keps_measures)
