"""Numeric protection methods (docs/methods.md §4): MDAV k-anonymity, probabilistic k-anonymity
by swapping, plain Laplace, insensitive microaggregation + noise, individual ranking + noise
(DP-UM), and the two individual-DP variants (iDP-LS, iDP-CBLS).

Noise comes from :func:`dpstudio.engine.algorithms.noise.grid_noise` (exact integer noise on each
attribute's output grid γ, issue 8 §3), so the 'staircase' noise choice works wherever Laplace
does.  Clustered methods draw the noise on the integer cluster sums of the grid values
t = rint(x/γ) − base and release the sum's mean rounded to the grid; the sensitivity passed is
the L1 sensitivity of those sums (Δ/γ plus at most one step of rounding per record), and the
noise is ε_i-DP for it.

The clustering (the deterministic part, which depends on k but not on ε) is kept in
``job.cache`` so that sweeps reuse it for every ε and repetition.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.types import Job, Output
from dpstudio.engine.registry import (
    SHUFFLE_PARAM,
    order_clause as _order_clause,
    BUDGET_PARAM,
    DROP_MISSING_PARAM,
    NOISE_PARAM,
    WEIGHTS_PARAM,
    MethodSpec,
    Param,
    epsilon_param,
    k_param,
    register,
    LAYOUT_PARAM,
    scoped_sentence,
    separate_tables as _separate_tables,
)
from dpstudio.engine.roles import Role

NOT_DP_LABEL = "does not satisfy ε-DP (see paper 002 §3)"

BOUNDED = "bounded DP: neighbouring data sets differ in one record"

IDP_MEANING = ("individual differential privacy: the release is almost as likely when any one "
               "record of THIS data set is replaced by any other value, which protects every "
               "actual respondent but, unlike ε-DP, not every possible data set; it is not ε-DP")

VARIANT_PARAM = Param(
    "variant", "choice", "multi",
    "Insensitive microaggregation: 'single' = one total order by distance to one corner of the "
    "domain box (insensitive MDAV, paper 000); 'multi' = clusters taken in turn around the "
    "corners of the domain box in Hamming order (thesis Algorithm 6.1), usually more "
    "homogeneous clusters.",
    label="clustering", choices=("single", "multi"),
    choice_labels={"single": "Insensitive MDAV (single order)",
                   "multi": "Multi-reference (corners in Hamming order)"},
)

CALIBRATION_PARAM = Param(
    "calibration", "choice", "rigorous",
    "Noise calibration. 'rigorous': scale n_c·Δ/(k·ε_i), n_c = ⌊n/k⌋ clusters — changing one "
    "record can move every centroid (paper 002 §3); this is ε-DP and beats plain Laplace only "
    "when k² > n. 'as-published': scale Δ/(k·ε_i) as in paper 000 and thesis ch. 6; it "
    + NOT_DP_LABEL + " and is offered only to reproduce the published figures.",
    label="calibration", choices=("rigorous", "as-published"),
    choice_labels={"rigorous": "Rigorous (ε-DP)",
                   "as-published": "As published (NOT ε-DP)"},
    warning={"as-published": "As-published calibration " + NOT_DP_LABEL + "."},
)

REFERENCE_PARAM = Param(
    "reference", "choice", "lower",
    "Reference corner of the domain box for the single-order variant: all lower bounds "
    "(default) or all upper bounds.",
    label="reference corner", choices=("lower", "upper"),
    choice_labels={"lower": "Lower bounds", "upper": "Upper bounds"}, advanced=True,
)


# --------------------------------------------------------------------------- guarantee texts

def _fmt(x) -> str:
    return f"{float(x):g}"


def _budget_clause(p: dict) -> str:
    budget = p.get("budget", "equal")
    cols = p.get("_attributes")
    if cols and p.get("epsilon") is not None:  # the API passes the protected columns
        return _budget_detail(p, list(cols), _shares(p, list(cols)))
    if budget == "per-attribute":
        return (f"ε = {_fmt(p['epsilon'])} given whole to each of the m protected attributes, so "
                "the release as a whole is only (m·ε)-DP, m = number of ε-quasi-identifiers")
    if budget == "weights":
        return (f"ε = {_fmt(p['epsilon'])} split over the protected attributes in proportion to "
                "the user weights")
    return f"ε = {_fmt(p['epsilon'])}, split equally over the m protected attributes (ε/m each)"


def _shares(p: dict, cols: list[str]) -> np.ndarray:
    eps, m = float(p["epsilon"]), len(cols)
    budget = p.get("budget", "equal")
    if budget == "per-attribute":
        return np.full(m, eps)
    if budget == "weights" and p.get("weights"):
        w = np.array([float(p["weights"].get(c, 0.0)) for c in cols])
        if w.sum() > 0:
            return eps * w / w.sum()
    return np.full(m, eps / m)


def _dp_sentence(p: dict) -> str:
    eps = _fmt(p["epsilon"])
    cols = p.get("_attributes")
    if p.get("budget", "equal") == "per-attribute" and cols:
        m = len(cols)
        head = f"({m}·{eps} = {_fmt(m * float(p['epsilon']))})-differential privacy"
        return f"{head} ({_budget_clause(p)}; {BOUNDED})"
    if p.get("budget", "equal") == "per-attribute":
        head = f"(m·{eps})-differential privacy, i.e. (m·ε)-DP"
    else:
        head = f"{eps}-differential privacy"
    return f"{head} ({_budget_clause(p)}; {BOUNDED})"


def _baseline_sentence(what: str) -> str:
    return (f"Noise-free baseline ({what} only, ε not set): no differential privacy; for "
            "comparison, never for release.")


def _g_mdav(p: dict) -> str:
    return (f"k-anonymity with k = {p.get('k')} on the k-quasi-identifiers: every combination of "
            "released k-quasi-identifier values is shared by at least k records (MDAV "
            "microaggregation). Not differential privacy.")


def _g_mdav_swap(p: dict) -> str:
    return (f"Probabilistic k-anonymity with k = {p.get('k')} on the k-quasi-identifiers: the "
            "released k-quasi values are the original ones, permuted jointly at random inside "
            "MDAV clusters of at least k records, so linking a record to its respondent succeeds "
            "with probability at most 1/k. Not differential privacy.")


def _g_ir_swap(p: dict) -> str:
    return (f"Probabilistic k-anonymity with k = {p.get('k')} for each confidential attribute "
            "separately: its values are permuted at random inside groups of at least k records "
            "with consecutive values (individual ranking). Not differential privacy.")


def _g_laplace(p: dict) -> str:
    if p.get("epsilon") is None:
        return _baseline_sentence("original values")
    return (_dp_sentence(p) + f"; {_noise_name(p)} noise of scale Δ(A_i)/ε_i added to every "
            "value, clamped to the domain.")


def _noise_name(p: dict) -> str:
    return "staircase (optimal)" if p.get("noise") == "staircase" else "Laplace"


def _g_insensitive(p: dict) -> str:
    k = p.get("k")
    if p.get("epsilon") is None:
        return _baseline_sentence(f"insensitive microaggregation with k = {k}")
    if p.get("calibration", "rigorous") == "as-published" and int(k or 1) > 1:
        return (f"As-published calibration (noise scale Δ(A_i)/(k·ε_i) per cluster, k = {k}, "
                f"{_budget_clause(p)}): this {NOT_DP_LABEL}. Changing one record can move every "
                "cluster centroid, so the noise is too small by a factor n_c = ⌊n/k⌋. The "
                "microaggregated values are k-anonymous before noise.")
    if p.get("calibration", "rigorous") == "as-published":   # k = 1: singletons, plain Laplace
        return (_dp_sentence(p) + "; with k = 1 every record is its own cluster and the "
                f"as-published calibration is plain {_noise_name(p)} noise of scale "
                "Δ(A_i)/ε_i per record, clamped to the domain.")
    if p.get("noise") == "staircase" and int(k or 1) > 1:
        how = ("of sensitivity Δ(A_i)/k and budget ε_i/n_c each (sequential composition over "
               "the clusters)")
    else:
        how = "of scale n_c·Δ(A_i)/(k·ε_i)"
    return (_dp_sentence(p) + f"; insensitive microaggregation with k = {k}, one "
            f"{_noise_name(p)} draw per cluster and attribute {how}, "
            "n_c = ⌊n/k⌋ (rigorous calibration), clamped to the domain." + _order_clause(p))


def _g_ir_dp(p: dict) -> str:
    k = p.get("k")
    if p.get("epsilon") is None:
        return _baseline_sentence(f"individual ranking with k = {k}")
    text = _g_ir_dp_core(p) + _order_clause(p)
    if _joint_ranking_gap(p):
        return (scoped_sentence("ε-differential privacy",
                                [JOINT_RANKING_REASON.format(m=len(p["_attributes"]))], text)
                + JOINT_RANKING_REMEDY)
    return text


def _g_ir_dp_core(p: dict) -> str:
    k = p.get("k")
    if p.get("noise") == "staircase" and int(k or 1) > 1:
        return (_dp_sentence(p) + f"; individual ranking with k = {k}, one staircase draw per "
                "cluster of sensitivity Δ(A_i)/k and budget ε_i/n_c, n_c = ⌊n/k⌋ (sequential "
                "composition over the clusters: staircase noise does not take paper 002's L1 "
                "bound), clamped to the domain.")
    return (_dp_sentence(p) + f"; individual ranking with k = {k}, one {_noise_name(p)} draw "
            "per cluster of scale Δ(A_i)/(k·ε_i) (paper 002 Lemma 1), clamped to the domain.")


def _idp_sentence(p: dict, how: str) -> str:
    k = p.get("k")
    eps = _fmt(p["epsilon"])
    head = (f"(m·{eps})-individual differential privacy" if p.get("budget") == "per-attribute"
            else f"{eps}-individual differential privacy (ε-iDP)")
    text = (f"{head} ({_budget_clause(p)}): {IDP_MEANING}. Individual ranking with k = {k}; "
            f"{how}. As in paper 001, the local sensitivity assumes each record stays in its "
            "cluster; replacing a record can also shift others between clusters, which this "
            "calibration does not bound (our neighbour tests found changes up to 1.4× LS for "
            "iDP-LS and more for iDP-CBLS)." + _order_clause(p))
    if _joint_ranking_gap(p):
        return (scoped_sentence("individual differential privacy",
                                [JOINT_RANKING_REASON.format(m=len(p["_attributes"]))], text)
                + JOINT_RANKING_REMEDY)
    return text


def _g_idp_ls(p: dict) -> str:
    if p.get("epsilon") is None:
        return _baseline_sentence(f"individual ranking with k = {p.get('k')}")
    return _idp_sentence(p, f"{_noise_name(p)} noise of scale LS(C)/ε_i per cluster, "
                            "LS(C) = max(ub − min C, max C − lb)/|C|, clamped to the domain")


def _g_idp_cbls(p: dict) -> str:
    if p.get("epsilon") is None:
        return _baseline_sentence(
            f"individual ranking with k = {p.get('k')} and extreme-value pre-processing")
    return _idp_sentence(p, "each cluster's smallest and largest values are replaced by their "
                            f"neighbours, then {_noise_name(p)} noise of scale LS(C)/ε_i from "
                            "the cluster-based local sensitivity (paper 001 Prop. 3)")


def _is_dp_eps(p: dict) -> bool:
    return p.get("epsilon") is not None


def _is_dp_insensitive(p: dict) -> bool:
    if p.get("epsilon") is None or not (p.get("shuffle", True) or _separate_tables(p)):
        return False
    return p.get("calibration", "rigorous") == "rigorous" or int(p.get("k") or 1) <= 1


def _joint_ranking_gap(p: dict) -> bool:
    """Individual ranking of m >= 2 attributes released together in records with k >= 2
    (not when each attribute is released in its own independently shuffled table)."""
    return (len(p.get("_attributes") or ()) >= 2 and int(p.get("k") or 1) >= 2
            and not _separate_tables(p))


def _is_dp_ir(p: dict) -> bool:
    """ε-DP of the whole release: each attribute's column is ε_i-DP (paper 002 Lemma 1, with
    the rows shuffled), but with two or more attributes clustered separately the pattern of
    which clusters a record combines is deterministic in the data (neighbouring data sets can
    give different numbers of distinct released records), so the record-level release is not
    ε-DP; see ``JOINT_RANKING_REASON``.  With ``layout='separate-tables'`` every attribute is
    its own independently shuffled table: ε-DP by sequential composition."""
    return (p.get("epsilon") is not None and bool(p.get("shuffle", True) or _separate_tables(p))
            and not _joint_ranking_gap(p))


JOINT_RANKING_REASON = (
    "each of the {m} attributes is clustered separately, so released together in records the "
    "pattern of which clusters a record combines is not hidden by the noise (neighbouring data "
    "sets can even differ in the number of distinct records released; a gap in paper 002's "
    "argument)")

JOINT_RANKING_REMEDY = (
    " For a record-level guarantee choose the release layout 'separate-tables' (each attribute "
    "in its own independently shuffled one-column table: the guarantee then holds for the whole "
    "release by sequential composition over the tables), or use insensitive-dp.")


# --------------------------------------------------------------------------- shared helpers

def _ir_sorted(job: Job, c: str) -> tuple[np.ndarray, np.ndarray]:
    """Individual-ranking order of one attribute and its sorted values (cached per column;
    shared by ir-dp, idp-ls, idp-cbls and ir-swap, independent of k)."""
    key = ("num.ir-order", c)
    if key not in job.cache:
        x = job.data[c].to_numpy(dtype=np.float64)
        order = MA.ir_order(x)
        job.cache[key] = (order, x[order])
    return job.cache[key]


def _ir_orders(job: Job, cols: list[str]) -> list[np.ndarray]:
    return [_ir_sorted(job, c)[0] for c in cols]


def _chunks(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Start positions and sizes of the consecutive chunks of individual ranking."""
    nc = MA.n_clusters_for(n, k)
    k = max(int(k), 1)
    starts = np.arange(nc, dtype=np.int64) * k
    sizes = np.full(nc, k, dtype=np.int64)
    sizes[-1] = n - starts[-1]
    return starts, sizes


def _ir_stats(job: Job, cols: list[str], k: int) -> list[dict]:
    """Per attribute: order, sorted values, chunk starts/sizes, sums, min, max (cached)."""
    n = job.n
    starts, sizes = _chunks(n, k)
    out = []
    for c in cols:
        order, xs = _ir_sorted(job, c)
        key = ("num.ir-stats", int(k), c)
        if key not in job.cache:
            job.cache[key] = {
                "sum": np.add.reduceat(xs, starts),
                "min": xs[starts],
                "max": xs[starts + sizes - 1],
            }
        st = dict(job.cache[key])
        st.update(order=order, xs=xs, starts=starts, sizes=sizes)
        out.append(st)
    return out


def _int_sums(t: np.ndarray, labels: np.ndarray, nc: int) -> np.ndarray:
    """Exact int64 sums of the grid values per cluster (|sums| < 2⁵³ is checked by
    :func:`dpstudio.engine.algorithms.noise.make_grid`, so the float bincount is exact)."""
    return np.rint(np.bincount(labels, weights=t.astype(np.float64), minlength=nc)).astype(np.int64)


def _spread(values_per_cluster: np.ndarray, sizes: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """Give every record of a sorted-order chunk its cluster's value."""
    vals = np.asarray(values_per_cluster)
    out = np.empty(n, dtype=vals.dtype if vals.dtype.kind in "iu" else np.float64)
    out[order] = np.repeat(vals, sizes)
    return out


def _released(job: Job, new: dict[str, np.ndarray], **kw) -> Output:
    """The Output for a clustered DP release: rows shuffled unless shuffle=False."""
    data = _frame_with(job, new)
    row_map = None
    if job.params.get("shuffle", True):
        row_map = job.rng.permutation(job.n)
        data = data.iloc[row_map].reset_index(drop=True)
    return Output(data, row_map=row_map, **kw)


def _frame_with(job: Job, new: dict[str, np.ndarray]):
    """The job's data with the columns in ``new`` replaced (one frame construction: setting
    columns one by one on a copy costs more than the whole method on small data)."""
    data = job.data
    cols = {c: (new[c] if c in new else data[c]) for c in data.columns}
    return pd.DataFrame(cols, index=data.index, copy=False)


def _noise_info(kind: str, sens, eps: float) -> dict:
    """Sensitivity, Laplace-equivalent scale (Δ/ε) and noise standard deviation."""
    sens_arr = np.atleast_1d(np.asarray(sens, dtype=np.float64))
    scale = sens_arr / eps
    unit_sd = math.sqrt(N.noise_variance(kind, 1.0, eps))   # sd scales linearly with Δ
    sd = sens_arr * unit_sd
    if sens_arr.size == 1:
        return {"sensitivity": float(sens_arr[0]), "scale": float(scale[0]),
                "noise_sd": float(sd[0])}
    return {"sensitivity_mean": float(sens_arr.mean()), "sensitivity_max": float(sens_arr.max()),
            "scale_mean": float(scale.mean()), "scale_max": float(scale.max()),
            "noise_sd_mean": float(sd.mean())}


STAIRCASE_VECTOR_NOTE = (
    "staircase noise is ε-DP for ONE released number of sensitivity Δ; it does not extend to a "
    "vector of centroids whose changes add up to Δ (each coordinate could cost the full ε), so "
    "when one record can move up to n_c centroids of an attribute every draw gets "
    "sensitivity Δ(A_i)/k and budget ε_i/n_c (sequential composition over the clusters)")


def _staircase_split(kind: str, k: int, nc: int) -> bool:
    """True when staircase draws must be calibrated per cluster with ε_i/n_c: one record can
    move several of the n_c released centroids of an attribute (k ≥ 2, n_c ≥ 2)."""
    return kind == "staircase" and int(k) > 1 and int(nc) > 1


def _eps_quasi(job: Job) -> list[str]:
    return job.columns(Role.EPS_QUASI)


def _eps_info(job: Job, cols: list[str]) -> tuple[np.ndarray | None, dict]:
    if job.noise_free:
        return None, {"epsilon": None, "noise": "none (noise-free baseline)"}
    eps = job.epsilon_shares(cols)
    return eps, {"epsilon": float(job.params["epsilon"]), "budget": job.params.get("budget"),
                 "noise": job.params.get("noise", "laplace"),
                 "epsilon_per_attribute": {c: float(e) for c, e in zip(cols, eps)},
                 "epsilon_total_composed": float(eps.sum()),
                 "budget_detail": _budget_detail(job.params, cols, eps)}


def _budget_detail(p: dict, cols: list[str], eps: np.ndarray) -> str:
    """The budget clause with the actual attributes (the registry's guarantee text cannot
    know m, the number of protected attributes)."""
    m = len(cols)
    names = ", ".join(cols)
    total = _fmt(eps.sum())
    budget = p.get("budget", "equal")
    if budget == "per-attribute":
        return (f"ε = {_fmt(p['epsilon'])} given whole to each of the {m} protected attributes "
                f"({names}): the release is ({m}·{_fmt(p['epsilon'])} = {total})-DP by "
                "sequential composition")
    shares = ", ".join(f"{c}: {_fmt(e)}" for c, e in zip(cols, eps))
    if m == 1:
        return f"ε = {_fmt(p['epsilon'])}, all of it for the one protected attribute {names}"
    how = "equally" if budget == "equal" else "by the user weights"
    return (f"ε = {_fmt(p['epsilon'])} split {how} over the {m} protected attributes "
            f"({shares}); total {total} by sequential composition")


# --------------------------------------------------------------------------- mdav family

MDAV_DISTANCE_PARAM = Param(
    "distance", "choice", "standardized",
    "How MDAV measures distances between records: 'standardized' (each attribute divided by "
    "its standard deviation — the default of the spec), 'raw' (original units, as thesis ch. 3 "
    "did), 'domain' (each attribute divided by its declared domain width, as thesis ch. 6 did; "
    "needs a domain for every k-quasi).",
    label="distance", choices=("standardized", "raw", "domain"),
    choice_labels={"standardized": "Standardised (÷ std. dev.)", "raw": "Raw units",
                   "domain": "Scaled by domain width"},
    advanced=True,
)


def _mdav_labels(job: Job, cols: list[str], k: int) -> np.ndarray:
    dist = job.params.get("distance", "standardized")
    key = ("num.mdav", int(k), tuple(cols), dist)
    if key not in job.cache:
        X = job.matrix(cols)
        if dist == "domain":
            missing = [c for c in cols if c not in job.domains]
            if missing:
                raise ParameterError(
                    "distance='domain' scales each k-quasi by its domain width; declare a domain "
                    f"for {', '.join(map(repr, missing))} or choose another distance.")
            lb, ub = job.bounds(cols)
            X = (X - lb) / (ub - lb)
        job.cache[key] = MA.mdav(X, k, standardized=(dist != "standardized"),
                                 check_cancel=job.check_cancel, progress=job.progress)
    return job.cache[key]


def run_mdav(job: Job) -> Output:
    cols = job.columns(Role.K_QUASI)
    k = int(job.params["k"])
    labels = _mdav_labels(job, cols, k)
    X = job.matrix(cols)
    nc = int(labels.max()) + 1
    cent = MA.cluster_means(X, labels, nc)
    vals = cent[labels]
    job.progress(1.0)
    sizes = np.bincount(labels, minlength=nc)
    return Output(_frame_with(job, {c: vals[:, j] for j, c in enumerate(cols)}),
                  info={"clusters": nc, "min_cluster_size": int(sizes.min()),
                        "max_cluster_size": int(sizes.max()), "k": k}, protected=cols)


def _permute_within(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """src such that record i receives the values of record src[i]; a uniformly random
    permutation inside each cluster."""
    n = labels.size
    base = np.argsort(labels, kind="stable")
    shuffled = np.lexsort((rng.random(n), labels))
    src = np.empty(n, dtype=np.int64)
    src[base] = shuffled
    return src


def run_mdav_swap(job: Job) -> Output:
    cols = job.columns(Role.K_QUASI)
    k = int(job.params["k"])
    labels = _mdav_labels(job, cols, k)
    src = _permute_within(job.rng, labels)
    df = job.data.copy()
    for j, c in enumerate(cols):
        df[c] = job.data[c].to_numpy()[src]  # keep the column's dtype (original values)
    nc = int(labels.max()) + 1
    job.progress(1.0)
    return Output(df, info={"clusters": nc, "k": k,
                            "records_moved": int(np.count_nonzero(src != np.arange(job.n)))},
                  protected=cols)


def run_ir_swap(job: Job) -> Output:
    cols = job.columns(Role.CONFIDENTIAL)
    k = int(job.params["k"])
    n = job.n
    orders = _ir_orders(job, cols)
    chunk = MA._chunk_labels(n, k)
    df = job.data.copy()
    for j, (c, order) in enumerate(zip(cols, orders)):
        job.check_cancel()
        perm = np.lexsort((job.rng.random(n), chunk))   # random order inside each chunk
        col = job.data[c].to_numpy()
        new = np.empty_like(col)
        new[order] = col[order[perm]]
        df[c] = new
        job.progress((j + 1) / len(cols))
    return Output(df, info={"clusters_per_attribute": MA.n_clusters_for(n, k), "k": k},
                  protected=cols)


# --------------------------------------------------------------------------- DP methods

def run_laplace(job: Job) -> Output:
    cols = _eps_quasi(job)
    eps, info = _eps_info(job, cols)
    if eps is None:
        return Output(job.data.copy(), info=info, protected=cols,
                      warnings=["No ε given: the original values are returned (baseline)."])
    X = job.matrix(cols)
    lb, ub = job.bounds(cols)
    kind = job.params.get("noise", "laplace")
    new = {}
    per = {}
    for j, c in enumerate(cols):
        job.check_cancel()
        delta = ub[j] - lb[j]
        g = N.job_grid(job, c)   # exact integer noise on the grid γ (issue 8 §3)
        t = g.to_units(X[:, j])
        t += N.grid_noise(kind, job.rng, g.span, eps[j], job.n)
        new[c] = g.from_units(t)
        per[c] = {"domain_width": float(delta), **N.grid_info(kind, g, g.span, float(eps[j]))}
        job.progress((j + 1) / len(cols))
    info.update(noise_per_attribute=per, draws_per_attribute=job.n)
    return Output(_frame_with(job, new), info=info, protected=cols)


def _insensitive_labels(job: Job, cols: list[str], k: int) -> np.ndarray:
    variant = job.params.get("variant", "multi")
    reference = job.params.get("reference", "lower")
    lb, ub = job.bounds(cols)
    key = ("num.insensitive", variant, reference if variant == "single" else None, int(k),
           tuple(cols), tuple(lb.tolist()), tuple(ub.tolist()))
    if key not in job.cache:
        X = job.matrix(cols)
        if variant == "single":
            labels = MA.insensitive_mdav(X, k, lb, ub, reference)
        else:
            if len(cols) > MA.MAX_MULTI_REFERENCE_ATTRIBUTES:
                raise ParameterError(
                    f"The multi-reference variant supports at most "
                    f"{MA.MAX_MULTI_REFERENCE_ATTRIBUTES} protected attributes (got {len(cols)}); "
                    "use variant='single'.")
            labels = MA.multi_reference(X, k, lb, ub, check_cancel=job.check_cancel,
                                        progress=job.progress)
        nc = int(labels.max()) + 1
        job.cache[key] = (labels, MA.cluster_means(X, labels, nc))
    return job.cache[key]


def run_insensitive_dp(job: Job) -> Output:
    cols = _eps_quasi(job)
    k = int(job.params["k"])
    labels, cent = _insensitive_labels(job, cols, k)
    nc = cent.shape[0]
    lb, ub = job.bounds(cols)
    eps, info = _eps_info(job, cols)
    calibration = job.params.get("calibration", "rigorous")
    info.update(clusters=nc, n_c=nc, k=k, variant=job.params.get("variant", "multi"),
                calibration=calibration)
    warnings: list[str] = []
    if eps is None:
        vals = cent[labels]
        return Output(_frame_with(job, {c: vals[:, j] for j, c in enumerate(cols)}), info=info,
                      protected=cols)
    kind = job.params.get("noise", "laplace")
    factor = 1.0 if (calibration == "as-published") else float(nc)
    if calibration == "as-published" and k > 1:
        warnings.append("As-published calibration " + NOT_DP_LABEL + ".")
    if calibration == "rigorous" and k == 1:
        warnings.append(
            "With k = 1 the rigorous calibration n_c·Δ/(k·ε) = n·Δ/ε is n times the noise of "
            "method 'laplace', which gives the same guarantee at k = 1: use 'laplace'.")
    if calibration == "rigorous" and k > 1 and k * k <= job.n:
        warnings.append(
            f"With k = {k} and n = {job.n} (k² ≤ n) the rigorous noise n_c·Δ/(k·ε) is at least as "
            "large as plain Laplace's Δ/ε: microaggregation does not help here.")
    new = {}
    per = {}
    split = calibration == "rigorous" and _staircase_split(kind, k, nc)
    sizes = np.bincount(labels, minlength=nc)
    X = job.matrix(cols)
    for j, c in enumerate(cols):
        job.check_cancel()
        delta = ub[j] - lb[j]
        # noise on the integer cluster SUMS of the grid values t = rint(x/γ) − base (each
        # record's t lies in [0, span]), released as the sum's mean rounded to the grid:
        # one record changes one member of a cluster, so |ΔS| ≤ span per cluster
        g = N.job_grid(job, c)
        sums = _int_sums(g.to_units(X[:, j]), labels, nc)
        if split:   # staircase: per-cluster sensitivity span (Δ/k as a centroid), ε_i/n_c
            sens, eps_draw = g.span, float(eps[j]) / nc
        else:       # Laplace: L1 sensitivity of the n_c sums n_c·span (as-published: span)
            sens, eps_draw = int(factor) * g.span, float(eps[j])
        noisy = sums + N.grid_noise(kind, job.rng, sens, eps_draw, nc)
        new[c] = g.from_units(N.round_half_up_div(noisy, sizes))[labels]
        per[c] = {"domain_width": float(delta), **N.grid_info(kind, g, sens, eps_draw, k),
                  "epsilon_per_draw": eps_draw, "noise_on": "cluster sums (grid units)"}
        job.progress((j + 1) / len(cols))
    info.update(noise_per_attribute=per, draws_per_attribute=nc)
    return _released(job, new, info=info, protected=cols, warnings=warnings)


def _run_ir_family(job: Job, mode: str) -> Output:
    cols = _eps_quasi(job)
    k = int(job.params["k"])
    n = job.n
    stats = _ir_stats(job, cols, k)
    eps, info = _eps_info(job, cols)
    nc = MA.n_clusters_for(n, k)
    info.update(clusters_per_attribute=nc, k=k)
    kind = job.params.get("noise", "laplace")
    if mode == "cbls":
        bounds = {c: job.domains[c] for c in cols if c in job.domains}
    else:
        lb, ub = job.bounds(cols)
        bounds = {c: (lb[j], ub[j]) for j, c in enumerate(cols)}
    new = {}
    per = {}
    for j, c in enumerate(cols):
        job.check_cancel()
        st = stats[j]
        sizes = st["sizes"].astype(np.float64)
        if mode == "cbls":
            xs, s0 = st["xs"], st["starts"]
            e = s0 + st["sizes"]
            x1, x2, x3 = xs[s0], xs[s0 + 1], xs[s0 + 2]
            xc, xc1, xc2 = xs[e - 1], xs[e - 2], xs[e - 3]
            cent = (st["sum"] - x1 + x2 - xc + xc1) / sizes
            e_up = (xc - x2) + (x3 - x2) + (xc - xc1)
            e_down = (xc1 - x1) + (xc1 - xc2) + (x2 - x1)
            sens = np.maximum(e_up, e_down) / sizes
        else:
            cent = st["sum"] / sizes
            lo, hi = bounds[c]
            if mode == "ls":
                sens = np.maximum(hi - st["min"], st["max"] - lo) / sizes
            else:  # ir-dp: one draw per cluster, L1 sensitivity of all centroids Δ/k
                sens = np.full(nc, (hi - lo) / k)
        if eps is None:
            vals = cent
            per[c] = {}
        else:
            eps_draw = float(eps[j])
            if mode == "dp" and _staircase_split(kind, k, nc):
                eps_draw /= nc   # staircase: sensitivity Δ/k per centroid, ε_i/n_c per draw
            # the same calibration on the integer cluster SUMS of the grid values
            # t = rint(x/γ) − base (rint is monotone: the ranking, Lemma 1 and the local
            # sensitivities carry over to t), released as the sum's mean rounded to the grid
            g = N.job_grid(job, c)
            if g.span is None and st["xs"].size and (
                    float(np.abs(st["xs"]).max()) / g.gamma * n >= 2.0 ** 53):
                raise ParameterError(
                    f"Precision {g.gamma:g} of column {c!r} is too fine for its values (sums "
                    "would overflow exact integer arithmetic); choose a coarser precision.")
            ts = g.to_units(st["xs"])
            s0, sz = st["starts"], st["sizes"]
            e_ = s0 + sz
            tsum = np.add.reduceat(ts, s0)
            if mode == "cbls":
                t1, t2, t3 = ts[s0], ts[s0 + 1], ts[s0 + 2]
                tc, tc1, tc2 = ts[e_ - 1], ts[e_ - 2], ts[e_ - 3]
                tsum = tsum - t1 + t2 - tc + tc1
                sens_u = np.maximum((tc - t2) + (t3 - t2) + (tc - tc1),
                                    (tc1 - t1) + (tc1 - tc2) + (t2 - t1))
            elif mode == "ls":      # max(ub − min C, max C − lb)·|C|/|C| in grid units
                sens_u = np.maximum(g.span - ts[s0], ts[e_ - 1])
            else:                   # ir-dp: L1 change of all sums ≤ span (paper 002 Lemma 1)
                sens_u = g.span
            noisy = tsum + N.grid_noise(kind, job.rng, sens_u, eps_draw, nc)
            vals = g.from_units(N.round_half_up_div(noisy, sz))
            per[c] = N.grid_info(kind, g, sens_u, eps_draw, k if mode == "dp" else sz)
            per[c]["noise_on"] = "cluster sums (grid units)"
            per[c]["epsilon_per_draw"] = eps_draw
            if c in bounds:
                per[c]["domain_width"] = float(bounds[c][1] - bounds[c][0])
            per[c]["clamped"] = c in bounds
        new[c] = _spread(vals, st["sizes"], st["order"], n)
        job.progress((j + 1) / len(cols))
    warnings: list[str] = []
    if eps is not None:
        info.update(noise_per_attribute=per, draws_per_attribute=nc)
        if mode == "dp" and _staircase_split(kind, k, nc):
            warnings.append(
                f"Staircase noise with individual ranking: {STAIRCASE_VECTOR_NOTE}. Here that is "
                f"ε_i/{nc} per draw, far more noise than Laplace (which needs no split): use "
                "noise='laplace'.")
    return _released(job, new, info=info, protected=cols, warnings=warnings)


def run_ir_dp(job: Job) -> Output:
    return _run_ir_family(job, "dp")


def run_idp_ls(job: Job) -> Output:
    return _run_ir_family(job, "ls")


def run_idp_cbls(job: Job) -> Output:
    return _run_ir_family(job, "cbls")


# --------------------------------------------------------------------------- registration

_DP_PARAMS = (epsilon_param(), NOISE_PARAM, BUDGET_PARAM, WEIGHTS_PARAM, DROP_MISSING_PARAM)
_CLUSTERED_DP_PARAMS = _DP_PARAMS + (SHUFFLE_PARAM, LAYOUT_PARAM)

register(MethodSpec(
    id="mdav",
    name="MDAV k-anonymity (MDAV-ID)",
    family="k-anonymity",
    description=("Groups records into clusters of at least k similar records (MDAV "
                 "microaggregation on the k-quasi-identifiers) and replaces each record's "
                 "k-quasi values by its cluster's average. Every released combination is then "
                 "shared by at least k records."),
    paper="thesis §2.8, §3.4 (004)",
    params=(k_param(), MDAV_DISTANCE_PARAM, DROP_MISSING_PARAM),
    protects=(Role.K_QUASI,),
    requires=(Role.K_QUASI,),
    guarantee=_g_mdav,
    run=run_mdav,
    is_dp=lambda p: False,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=False,
))

register(MethodSpec(
    id="mdav-swap",
    name="Probabilistic k-anonymity: MDAV + swap",
    family="probabilistic k-anonymity",
    description=("Forms MDAV clusters of at least k records on the k-quasi-identifiers and "
                 "shuffles their k-quasi values (jointly) among the records of each cluster. "
                 "Values stay real and means/variances are preserved exactly, but which record "
                 "they belong to is uncertain (at most 1/k chance of a correct link)."),
    paper="thesis §3.3.1 (004)",
    params=(k_param(), MDAV_DISTANCE_PARAM, DROP_MISSING_PARAM),
    protects=(Role.K_QUASI,),
    requires=(Role.K_QUASI,),
    guarantee=_g_mdav_swap,
    run=run_mdav_swap,
    is_dp=lambda p: False,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=False,
))

register(MethodSpec(
    id="ir-swap",
    name="Probabilistic k-anonymity: individual ranking + swap",
    family="probabilistic k-anonymity",
    description=("For each confidential attribute separately: sorts its values, forms groups of "
                 "k consecutive values and shuffles the values inside each group. Values stay "
                 "real and each attribute's distribution is preserved exactly."),
    paper="thesis §3.3.3 (004)",
    params=(k_param(), DROP_MISSING_PARAM),
    protects=(Role.CONFIDENTIAL,),
    requires=(Role.CONFIDENTIAL,),
    guarantee=_g_ir_swap,
    run=run_ir_swap,
    is_dp=lambda p: False,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=False,
))

register(MethodSpec(
    id="laplace",
    name="Plain Laplace noise (no microaggregation)",
    family="differential privacy",
    description=("Adds random noise to every value of the ε-quasi-identifiers, calibrated to the "
                 "width of each attribute's declared domain, and clamps the result to the "
                 "domain. The k = 1 baseline of the microaggregation-based methods."),
    paper="papers 000, 002",
    params=_DP_PARAMS,
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=_g_laplace,
    run=run_laplace,
    is_dp=_is_dp_eps,
    needs_domain=True,
    uses_k=False,
    uses_epsilon=True,
))

register(MethodSpec(
    id="insensitive-dp",
    name="Insensitive microaggregation + noise",
    family="differential privacy",
    description=("Clusters the records on all ε-quasi-identifiers jointly with a clustering whose "
                 "clusters change by at most one record when one record changes (insensitive "
                 "microaggregation), replaces values by cluster averages and adds one noise draw "
                 "per cluster and attribute. With the rigorous calibration it is ε-DP but helps "
                 "only when k² > n."),
    paper="paper 000; thesis ch. 6 (004); correction in paper 002 §3",
    params=(k_param(), epsilon_param(), NOISE_PARAM, BUDGET_PARAM, VARIANT_PARAM,
            CALIBRATION_PARAM, REFERENCE_PARAM, WEIGHTS_PARAM, DROP_MISSING_PARAM, SHUFFLE_PARAM,
            LAYOUT_PARAM),
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=_g_insensitive,
    run=run_insensitive_dp,
    is_dp=_is_dp_insensitive,
    needs_domain=True,
    uses_k=True,
    uses_epsilon=True,
))

register(MethodSpec(
    id="ir-dp",
    name="Individual ranking + noise (DP-UM)",
    family="differential privacy",
    description=("For each ε-quasi-identifier separately: sorts the values, forms groups of k "
                 "consecutive values, replaces them by the group average and adds ONE noise draw "
                 "per group (k times less noise than plain Laplace)."),
    paper="paper 002; paper 001 §3.1",
    params=(k_param(),) + _CLUSTERED_DP_PARAMS,
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=_g_ir_dp,
    run=run_ir_dp,
    is_dp=_is_dp_ir,
    needs_domain=True,
    uses_k=True,
    uses_epsilon=True,
))

register(MethodSpec(
    id="idp-ls",
    name="Individual DP: individual ranking + local sensitivity (iDP-LS)",
    family="individual differential privacy",
    description=("As individual ranking + noise, but each group's noise is scaled to how much "
                 "its average could change if one of ITS records were replaced (local "
                 "sensitivity). Less noise; the guarantee is individual DP, weaker than ε-DP."),
    paper="paper 001 §3.2.1",
    params=(k_param(),) + _CLUSTERED_DP_PARAMS,
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=_g_idp_ls,
    run=run_idp_ls,
    is_dp=lambda p: False,
    needs_domain=True,
    uses_k=True,
    uses_epsilon=True,
))

register(MethodSpec(
    id="idp-cbls",
    name="Individual DP: cluster-based local sensitivity (iDP-CBLS)",
    family="individual differential privacy",
    description=("Individual ranking groups; inside each group the smallest and largest values "
                 "are pulled in to their neighbours before averaging, so the noise depends only "
                 "on the spread inside the group (no domain needed). Individual DP, weaker than "
                 "ε-DP. Needs k ≥ 3."),
    paper="paper 001 §3.2.2, Prop. 3",
    params=(k_param(minimum=3),) + _CLUSTERED_DP_PARAMS,
    protects=(Role.EPS_QUASI,),
    requires=(Role.EPS_QUASI,),
    guarantee=_g_idp_cbls,
    run=run_idp_cbls,
    is_dp=lambda p: False,
    needs_domain=False,
    uses_k=True,
    uses_epsilon=True,
    min_k=3,
))
