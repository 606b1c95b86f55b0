"""``categorical-dp``: differential privacy for categorical and mixed attributes
(thesis §6.3.4–6.3.6, docs/methods.md ``categorical-dp``).

1. Every categorical ε-quasi attribute has a taxonomy (``hierarchies={col: file}``);
   numeric ones have a domain [lb, ub].  A numeric column with a declared domain is
   always numeric, even when a hierarchy is given for it (the hierarchy is then not used:
   the release is all numbers); a numeric column with a taxonomy and no domain is treated
   as coded categories and released as concept labels only (measured with δ).
2. Records are clustered by multi-reference insensitive microaggregation with the mixed
   record distance of eq. 6.7 (each attribute's distance divided by the distance between its
   domain boundaries: (a_b, a_t) for categorical, (lb, ub) for numeric); the references are
   the corners of that box in Hamming order (the same sequence as ``insensitive-dp``); ties
   are broken alphabetically on the record's values, then by record index.  The order depends
   only on the domains and taxonomies, never on the data: the clustering is insensitive.
3. Centroid of a categorical attribute in a cluster: the exponential mechanism over *all*
   concepts of the taxonomy with quality q = −m(S_C, a) (marginality) and sensitivity
   Δq = δ(a_b, a_t) (or the exact worst case when larger, see
   :attr:`~dpstudio.engine.hierarchies.taxonomy.Taxonomy.sensitivity`).  Numeric attributes: cluster
   mean plus noise as in ``insensitive-dp``, clamped to the domain.

Calibration: replacing one record can change *every* cluster by one record, so the
``rigorous`` calibration (default) gives every cluster ε_i/n_c of attribute i's budget
(sequential composition over the n_c clusters); numeric noise then has sensitivity
n_c·Δ/k.  ``as-published`` spends ε_i on every cluster (thesis §6.3.4, parallel
composition) and **does not satisfy ε-DP (see paper 002 §3)**.  With k = 1 there is no
clustering: each record is released by its own mechanism with ε_i (parallel composition
holds), and both calibrations coincide.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio.engine import validation as V
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.hierarchies.taxonomy import Taxonomy, load_taxonomy
from dpstudio.engine.notices import notice
from dpstudio.engine.params import Param
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    BUDGET_PARAM,
    DROP_MISSING_PARAM,
    LAYOUT_PARAM,
    NOISE_PARAM,
    NOT_DP_LABEL,
    ORDER_PARAM,
    WEIGHTS_PARAM,
    as_k,
    dp_budget,
    epsilon_param,
    k_param,
    keep_order,
    layout_scope,
    ordering,
    record_permutation,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "categorical-dp"
MAX_ATTRIBUTES = 12  # 2^m corners; beyond this the corner sequence is impractical
_BLOCK_ENTRIES = 4_000_000  # clusters × concepts processed at once

CALIBRATION_PARAM = Param(
    "calibration",
    "choice",
    "rigorous",
    "'rigorous': every cluster gets ε_i/n_c (changing one record can change all n_c clusters), "
    "the release is ε-DP. 'as-published': ε_i per cluster as in thesis §6.3.4; it "
    + NOT_DP_LABEL
    + "; offered only to reproduce the published figures.",
    label="calibration",
    choices=("rigorous", "as-published"),
    choice_labels={"rigorous": "Rigorous (ε-DP)", "as-published": "As published (not ε-DP)"},
    warning={"as-published": "As-published calibration " + NOT_DP_LABEL + "."},
)


# --------------------------------------------------------------------------- schema


class MixedSchema:
    """The protected attributes of one job: taxonomy (categorical) or domain (numeric)."""

    def __init__(self, job: Job, cols: list[str]):
        if len(cols) > MAX_ATTRIBUTES:
            raise ParameterError(
                f"Method {METHOD_ID!r} handles at most {MAX_ATTRIBUTES} ε-quasi attributes "
                f"(multi-reference microaggregation uses the 2^m corners); {len(cols)} are marked."
            )
        self.cols = cols
        self.tax: list[Taxonomy | None] = []
        self.values = np.zeros((job.n, len(cols)))
        self.tie = np.zeros((job.n, len(cols)))
        self.lb = np.zeros(len(cols))
        self.ub = np.ones(len(cols))
        #: numeric columns with a declared domain whose hierarchy was not used (issue 11)
        self.hierarchy_ignored: list[str] = []
        hier = job.hierarchies or {}
        for i, c in enumerate(cols):
            has_h = c in hier and hier[c] is not None
            if has_h and c in job.domains and pd.api.types.is_numeric_dtype(job.data[c]):
                # a numeric ε-quasi with a declared domain stays numeric (noised cluster mean):
                # a generated interval hierarchy would otherwise release a mix of plain
                # values and interval labels that no numeric measure can read (issue 11)
                self.hierarchy_ignored.append(c)
                has_h = False
            if has_h:
                t = load_taxonomy(hier[c], c)
                codes = t.codes(job.data[c], column=c)
                self.tax.append(t)
                self.values[:, i] = codes
                self.tie[:, i] = t.rank[codes]
                self.lb[i], self.ub[i] = t.a_b, t.a_t
                continue
            s = job.data[c]
            if not pd.api.types.is_numeric_dtype(s):
                conv = pd.to_numeric(s, errors="coerce")
                if conv.isna().any():
                    raise InputError(
                        f"Column {c!r} is categorical (e.g. {str(s[conv.isna()].iloc[0])!r}) but has no "
                        f"taxonomy: method {METHOD_ID!r} needs one for every categorical ε-quasi "
                        f"attribute. Pass hierarchies={{{c!r}: 'file.csv'}} (command line: "
                        f"--hierarchy {c}=FILE), an ARX hierarchy or a child,parent CSV."
                    )
            V.numeric_column(job.data, c, Role.EPS_QUASI.label)
            if c not in job.domains:
                raise ParameterError(
                    f"Column {c!r} is numeric and has no declared domain [lower, upper], which method "
                    f"{METHOD_ID!r} needs to calibrate its noise and to scale distances. Declare the "
                    "range of values the attribute can take in the population (not the min/max of "
                    f"this file), e.g. --domain {c}=0:150000."
                )
            self.tax.append(None)
            x = pd.to_numeric(s).to_numpy(dtype=np.float64)
            self.values[:, i] = x
            self.tie[:, i] = x
            self.lb[i], self.ub[i] = job.domains[c]

    @property
    def m(self) -> int:
        return len(self.cols)

    def boundary_scale(self) -> np.ndarray:
        """dist_i(b_i, t_i): the denominators of eq. 6.7."""
        return np.array(
            [
                t.boundary_distance if t is not None else self.ub[i] - self.lb[i]
                for i, t in enumerate(self.tax)
            ],
            dtype=np.float64,
        )

    def corner_sq_distances(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, m) squared scaled distances of every value to its b and t boundary."""
        scale = self.boundary_scale()
        db = np.empty_like(self.values)
        dt = np.empty_like(self.values)
        for i, t in enumerate(self.tax):  # loop over attributes
            if t is not None:
                codes = self.values[:, i].astype(np.int64)
                db[:, i] = t.dist[codes, t.a_b]
                dt[:, i] = t.dist[codes, t.a_t]
            else:
                db[:, i] = np.abs(self.values[:, i] - self.lb[i])
                dt[:, i] = np.abs(self.values[:, i] - self.ub[i])
        db = (db / scale) ** 2
        dt = (dt / scale) ** 2
        return db, dt


# --------------------------------------------------------------------------- clustering


def corner_sequence(m: int, length: int) -> np.ndarray:
    """The Hamming-order corner sequence shared with ``insensitive-dp``."""
    from dpstudio.engine.algorithms.microaggregation import corner_sequence as _cs

    return _cs(m, length)


def multi_reference_mixed(
    db: np.ndarray, dt: np.ndarray, tie: np.ndarray, k: int, check_cancel=None
) -> np.ndarray:
    """Multi-reference insensitive microaggregation over precomputed per-attribute squared
    distances to the b (``db``) and t (``dt``) boundaries (eq. 6.7).

    Cluster i = the k remaining records closest to corner R_i (ties: ``tie`` values
    lexicographically, then index); stop when fewer than 2k remain; the rest is the last
    cluster.  Each corner's total order is sorted once; a cluster is the first k untaken
    entries of its corner's order (a pointer per corner skips taken records), so the cost
    is O(2^m · n log n) plus a loop over clusters.  Returns cluster labels 0..n_c−1.
    """
    n, m = db.shape
    k = int(k)
    if k <= 1:
        return np.arange(n, dtype=np.int64)
    labels = np.full(n, -1, dtype=np.int64)
    if n < 2 * k:
        labels[:] = 0
        return labels
    n_c = n // k
    seq = corner_sequence(m, n_c)
    orders: dict[int, np.ndarray] = {}
    ptr: dict[int, int] = {}
    used = np.zeros(n, dtype=bool)
    tie_keys = tuple(tie[:, j] for j in range(m - 1, -1, -1))
    bits = 1 << np.arange(m)
    remaining = n
    c = 0
    while remaining >= 2 * k:
        if check_cancel is not None and c % 2048 == 0:
            check_cancel()
        corner = int(seq[c])
        if corner not in orders:
            up = (corner & bits) != 0
            d = np.where(up[None, :], dt, db).sum(axis=1)
            orders[corner] = np.lexsort(tie_keys + (d,))
            ptr[corner] = 0
        order = orders[corner]
        p = ptr[corner]
        got: list[np.ndarray] = []
        need = k
        while need > 0:
            end = min(n, p + max(2 * need, 64))
            seg = order[p:end]
            free_pos = np.flatnonzero(~used[seg])
            if free_pos.size >= need:
                sel = seg[free_pos[:need]]
                p = p + int(free_pos[need - 1]) + 1
            else:
                sel = seg[free_pos]
                p = end
            used[sel] = True
            got.append(sel)
            need -= sel.size
        ptr[corner] = p
        labels[np.concatenate(got)] = c
        remaining -= k
        c += 1
    labels[~used] = c
    return labels


# --------------------------------------------------------------------------- centroids


def _blocks(n_c: int, nc: int):
    step = max(1, _BLOCK_ENTRIES // max(nc, 1))
    for a in range(0, n_c, step):
        yield a, min(n_c, a + step)


def categorical_centroids(
    codes: np.ndarray,
    labels: np.ndarray,
    n_c: int,
    tax: Taxonomy,
    rng: np.random.Generator | None,
    epsilon: float | None,
) -> np.ndarray:
    """Concept code of each cluster's centroid.

    ``epsilon`` None: the marginality centroid (eq. 6.4) over τ(S), the concepts that are
    values of the cluster or their ancestors (ties alphabetical).  Otherwise the exponential
    mechanism over all concepts with q = −m(S, a), Δq = ``tax.sensitivity`` and ``epsilon``
    per cluster.
    """
    nc = tax.n_concepts
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(n_c + 1))
    out = np.empty(n_c, dtype=np.int64)
    anc_f = tax.anc.astype(np.float64)
    for a, b in _blocks(n_c, nc):
        rows = order[starts[a] : starts[b]]
        counts = np.bincount((labels[rows] - a) * nc + codes[rows], minlength=(b - a) * nc)
        counts = counts.reshape(b - a, nc).astype(np.float64)
        marg = tax.marginality(counts)
        if epsilon is None:
            within = (counts > 0).astype(np.float64) @ anc_f > 0  # τ(S)
            mm = np.where(within, marg, np.inf)
            best = mm.min(axis=1, keepdims=True)
            cand = within & (mm <= best + 1e-12 * np.maximum(1.0, np.abs(best)))
            out[a:b] = np.where(cand, tax.rank[None, :], np.iinfo(np.int64).max).argmin(axis=1)
        else:
            if rng is None:
                raise ValueError("categorical_centroids: a noisy centroid (epsilon given) needs rng")
            out[a:b] = N.exponential_mechanism(rng, -marg, float(epsilon), tax.sensitivity)
    return out


# --------------------------------------------------------------------------- MDAV baseline


def _k_smallest(d: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k smallest values of ``d``; ties go to the lowest position."""
    if k >= d.size:
        return np.arange(d.size)
    v = np.partition(d, k - 1)[k - 1]
    less = np.flatnonzero(d < v)
    eq = np.flatnonzero(d == v)[: k - less.size]
    return np.concatenate([less, eq])


def mdav_mixed(values: np.ndarray, taxonomies: list, scale: np.ndarray, k: int) -> np.ndarray:
    """MDAV (thesis Algorithm 2.1) on mixed records with the eq. 6.7 distance: the
    *sensitive* k-anonymity baseline of thesis §6.4 (not differentially private).

    ``values``: (n, m) concept codes (categorical columns, ``taxonomies[i]`` not None) or
    numbers; ``scale[i]`` = dist_i(b_i, t_i).  The centroid of a set is the attribute-wise
    mean (numeric) or marginality centroid over τ(S) (eq. 6.4, categorical).  Ties: lowest
    record index.  Returns cluster labels.
    """
    n, m = values.shape
    k = int(k)
    if k <= 1:
        return np.arange(n, dtype=np.int64)
    labels = np.zeros(n, dtype=np.int64)
    if n < 2 * k:
        return labels
    cat = [i for i in range(m) if taxonomies[i] is not None]
    codes = {i: values[:, i].astype(np.int64) for i in cat}
    counts = {i: np.bincount(codes[i], minlength=taxonomies[i].n_concepts).astype(np.float64) for i in cat}
    sums = values.sum(axis=0)
    alive = np.arange(n)

    def centroid() -> np.ndarray:
        c = sums / alive.size
        for i in cat:
            c[i] = _centroid_from_counts(counts[i], taxonomies[i])
        return c

    def dist_to(point, rows) -> np.ndarray:
        d = np.zeros(rows.size)
        for i in range(m):
            t = taxonomies[i]
            if t is not None:
                di = t.dist[codes[i][rows], int(point[i])]
            else:
                di = np.abs(values[rows, i] - point[i])
            d += (di / scale[i]) ** 2
        return d

    def remove(sel_pos: np.ndarray) -> np.ndarray:
        nonlocal alive, sums
        rows = alive[sel_pos]
        sums = sums - values[rows].sum(axis=0)
        for i in cat:
            counts[i] -= np.bincount(codes[i][rows], minlength=counts[i].size)
        keep = np.ones(alive.size, dtype=bool)
        keep[sel_pos] = False
        alive = alive[keep]
        return rows

    label = 0
    while alive.size >= 3 * k:
        r = int(np.argmax(dist_to(centroid(), alive)))
        rv = values[alive[r]].copy()
        dr = dist_to(rv, alive)
        dr[r] = -1.0
        labels[remove(_k_smallest(dr, k))] = label
        s = int(np.argmax(dist_to(rv, alive)))  # farthest from r among what remains
        ds = dist_to(values[alive[s]], alive)
        ds[s] = -1.0
        labels[remove(_k_smallest(ds, k))] = label + 1
        label += 2
    if alive.size >= 2 * k:
        r = int(np.argmax(dist_to(centroid(), alive)))
        dr = dist_to(values[alive[r]], alive)
        dr[r] = -1.0
        labels[remove(_k_smallest(dr, k))] = label
        label += 1
    labels[alive] = label
    return labels


def _centroid_from_counts(counts: np.ndarray, tax: Taxonomy) -> int:
    marg = tax.marginality(counts)
    within = (counts > 0).astype(np.float64) @ tax.anc.astype(np.float64) > 0
    mm = np.where(within, marg, np.inf)
    best = mm.min()
    cand = np.flatnonzero(within & (mm <= best + 1e-12 * max(1.0, abs(best))))
    return int(cand[np.argmin(tax.rank[cand])])


# --------------------------------------------------------------------------- run


def _clustering(job: Job, schema: MixedSchema, k: int) -> np.ndarray:
    key = (
        METHOD_ID,
        "clusters",
        int(k),
        tuple(schema.cols),
        tuple(None if t is None else tuple(t.concepts) for t in schema.tax),
        tuple(schema.lb.tolist()),
        tuple(schema.ub.tolist()),
    )
    if key not in job.cache:
        db, dt = schema.corner_sq_distances()
        job.cache[key] = multi_reference_mixed(db, dt, schema.tie, k, job.check_cancel)
    return job.cache[key]


def run(job: Job) -> Output:
    cols = job.columns(Role.EPS_QUASI)
    p = job.params
    k = int(p["k"])
    eps = p.get("epsilon")
    calibration = p.get("calibration", "rigorous")
    kind = p.get("noise", "laplace")
    schema = MixedSchema(job, cols)
    labels = _clustering(job, schema, k)
    n_c = int(labels.max()) + 1 if labels.size else 0
    sizes = np.bincount(labels, minlength=n_c)
    job.progress(0.5)
    shares = None if eps is None else job.epsilon_shares(cols)
    out = job.data.copy()
    attr_info: dict = {}
    for i, c in enumerate(cols):  # loop over attributes
        t = schema.tax[i]
        if shares is None:  # eps is None
            eps_cluster = None
        elif k <= 1 or calibration == "as-published":
            eps_cluster = float(shares[i])
        else:
            eps_cluster = float(shares[i]) / n_c
        if t is not None:
            codes = schema.values[:, i].astype(np.int64)
            cent = categorical_centroids(codes, labels, n_c, t, job.rng, eps_cluster)
            out[c] = pd.Series(t.labels(cent)[labels], dtype=object)
            attr_info[c] = {
                "type": "categorical",
                "taxonomy_concepts": t.n_concepts,
                "a_b": t.concepts[t.a_b],
                "a_t": t.concepts[t.a_t],
                "delta_q": t.sensitivity,
                "epsilon_attribute": None if shares is None else float(shares[i]),
                "epsilon_per_cluster": eps_cluster,
            }
        else:
            x = schema.values[:, i]
            means = np.bincount(labels, weights=x, minlength=n_c) / sizes
            if shares is None:  # eps is None
                vals = means
                sens = None
            else:
                # exact integer noise on the cluster sums of the grid values
                # t = rint(x/γ) − base ∈ [0, span] (issue 8 §3), released as the rounded mean
                g = N.job_grid(job, c)
                tsum = np.rint(
                    np.bincount(labels, weights=g.to_units(x).astype(np.float64), minlength=n_c)
                ).astype(np.int64)
                span = g.span
                assert span is not None  # the schema has bounds for numeric columns: the grid has a domain
                sens_u = span
                eps_draw = float(shares[i])
                if k > 1 and calibration == "rigorous":
                    if kind == "staircase" and n_c > 1:
                        # staircase is ε-DP for one number only: every one of the n_c centroids
                        # (each moving by ≤ Δ/k) gets ε_i/n_c (sequential composition)
                        eps_draw = float(shares[i]) / n_c
                    else:
                        sens_u = n_c * span  # Laplace: L1 sensitivity of all n_c sums
                noisy = tsum + N.grid_noise(kind, job.rng, sens_u, eps_draw, n_c)
                vals = g.from_units(N.round_half_up_div(noisy, sizes))
                sens = sens_u * g.gamma / max(k, 1)
                attr_info.setdefault(c, {}).update(N.grid_info(kind, g, sens_u, eps_draw, max(k, 1)))
            out[c] = vals[labels]
            attr_info[c] = {
                **attr_info.get(c, {}),
                "type": "numeric",
                "domain": [float(schema.lb[i]), float(schema.ub[i])],
                "sensitivity": sens,
                "epsilon_attribute": None if shares is None else float(shares[i]),
                "epsilon_per_draw": None if eps is None else eps_draw,
                "noise": None if eps is None else kind,
            }
    job.progress(1.0)
    info = {
        "clusters": n_c,
        "cluster_size_min": int(sizes.min()) if n_c else 0,
        "cluster_size_max": int(sizes.max()) if n_c else 0,
        "calibration": calibration
        if eps is None or calibration == "rigorous" or k <= 1
        else f"as-published — {NOT_DP_LABEL}",
        "attributes": attr_info,
        "taxonomies": {c: t.to_dict() for c, t in zip(cols, schema.tax) if t is not None},
    }
    warns: list[str] = []
    if schema.hierarchy_ignored:
        warns.append(
            notice(
                "hierarchy-not-used",
                f"The hierarchy of numeric ε-quasi attribute(s) {', '.join(map(repr, schema.hierarchy_ignored))} "
                "was not used: with a declared domain they are released as numbers (noised cluster "
                "means). To release a numerically coded categorical attribute as concepts of its "
                "taxonomy, declare no domain for it.",
            )
        )
    if eps is not None and calibration == "as-published" and k > 1:
        warns.append(
            notice(
                "as-published",
                "As-published calibration: ε_i is spent on every cluster; the release " + NOT_DP_LABEL + ".",
            )
        )
    if eps is not None and calibration == "rigorous" and k > 1 and n_c > 50:
        warns.append(
            notice(
                "many-clusters",
                f"Rigorous calibration spreads each attribute's ε over {n_c} clusters "
                f"(ε_i/{n_c} per cluster): unless ε is large the centroids are close to "
                "random. A larger k (fewer clusters) or a larger ε keeps more utility.",
            )
        )
    row_map = None
    if not keep_order(p):  # row order would show which records share a cluster
        row_map = record_permutation(job, job.n)
        out = out.iloc[row_map].reset_index(drop=True)
    return Output(data=out, info=info, warnings=warns, protected=cols, row_map=row_map)


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    order, void = ordering(ctx)
    k = ctx.get("k")
    eps = ctx.get("epsilon")
    if eps is None:
        return Guarantee(
            model=Model.K_ANONYMITY,
            baseline=True,
            k=as_k(k),
            covered=ctx.attributes,
            clauses=(
                Clause(
                    "baseline",
                    "Noise-free baseline: k-anonymity of the ε-quasi attributes by insensitive "
                    "microaggregation only; no differential privacy.",
                ),
                order,
            ),
        )
    budget = ctx.get("budget", "equal")
    eps_s = f"{eps:g}" if isinstance(eps, (int, float)) else str(eps)
    cols = ctx.attributes
    if budget == "per-attribute" and cols and isinstance(eps, (int, float)):
        m = len(cols)
        tot = (
            f"(m·ε)-DP with m = {m}, i.e. ({m}·{eps_s} = {m * float(eps):g})-DP: ε = {eps_s} "
            f"given whole to each of the {m} ε-quasi attributes,"
        )
    elif budget == "per-attribute":
        tot = f"(m·ε)-DP with ε = {eps_s} per attribute (m = number of ε-quasi attributes)"
    else:
        tot = f"ε-DP with ε = {eps_s}"
    if ctx.get("calibration", "rigorous") == "as-published" and int(k or 1) > 1:
        return Guarantee(
            model=Model.NONE,
            epsilon=float(eps),
            k=as_k(k),
            covered=ctx.attributes,
            clauses=(
                Clause(
                    "caveat",
                    "As-published calibration (ε_i per cluster, thesis §6.3.4): " + NOT_DP_LABEL + ".",
                ),
                Clause(
                    "mechanism",
                    " Clusters are k-anonymous before the exponential mechanism and noise are applied.",
                ),
                order,
            ),
        )
    if int(k or 1) <= 1:
        how = (
            " (k = 1: every record is its own cluster, its categorical values drawn by the "
            "exponential mechanism and its numeric values noised with ε_i each; parallel "
            "composition over records, sequential over attributes)."
        )
    else:
        how = (
            " (rigorous calibration: insensitive microaggregation, then every cluster's "
            "categorical centroid drawn by the exponential mechanism and numeric centroid "
            "noised with budget ε_i/n_c, sequential composition over clusters and attributes)."
        )
    return Guarantee(
        model=Model.EPSILON_DP,
        scope=layout_scope(ctx),
        k=as_k(k),
        covered=ctx.attributes,
        voided_by=void,
        clauses=(
            Clause("claim", f"{tot} for the ε-quasi attributes{_named(ctx)}"),
            Clause("mechanism", how),
            order,
        ),
        **dp_budget(ctx),
    )


def _named(ctx: GuaranteeContext) -> str:
    cols = ctx.attributes
    return f" {', '.join(cols)}" if cols else ""


SPEC = MethodSpec(
    id=METHOD_ID,
    name="Categorical / mixed DP (insensitive microaggregation + exponential mechanism)",
    family="differential privacy",
    description=(
        "Multi-reference insensitive microaggregation of categorical (with taxonomies) "
        "and numeric ε-quasi attributes, then exponential-mechanism centroids for "
        "categorical attributes and noised means for numeric ones."
    ),
    paper=_P.SORIA_COMAS_2013_THESIS + ", §6.3.4–6.3.6",
    params=(
        k_param(5, 1),
        epsilon_param(1.0),
        CALIBRATION_PARAM,
        NOISE_PARAM,
        BUDGET_PARAM,
        WEIGHTS_PARAM,
        DROP_MISSING_PARAM,
        ORDER_PARAM,
        LAYOUT_PARAM,
    ),
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=guarantee,
    run=run,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=True,
    numeric_only=False,
    min_k=1,
    clusters=True,
    orders_records=True,
)

# SSE / RL with the semantic distance (registered with the metrics hook when available)
try:  # pragma: no cover - depends on the metrics module being present
    from dpstudio.engine.measures import semantic as _cm

    _cm.register_hooks(METHOD_ID)
except ImportError:
    pass
