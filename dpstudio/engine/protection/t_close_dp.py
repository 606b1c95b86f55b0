"""``t-close-dp``: exp(ε)-closeness by bucketization (thesis ch. 7, docs/methods.md ``t-close-dp``).

1. The confidential attribute C (numeric or ordinal; several confidential attributes are
   treated as one compound attribute, thesis §7.1.1) is cut into b = ⌊t⌋ + 1 buckets of
   ≈ N/b records, t = e^ε.  A single attribute is cut at consecutive values (the cut points
   are moved to the nearest change of value, so that equal values share a bucket); a compound
   attribute is cut by MDAV-style microaggregation of the standardised confidential values
   into b clusters of ≈ N/b records.
2. Groups: G = b·l groups of k_i = round(iN/G) − round((i−1)N/G) records (k = N/(b·l);
   ``k`` may be given instead of ``l``: l = ⌊N/(b·k)⌋).  Group i emphasises bucket
   i mod b: for every other bucket j it takes ⌈k_i·p_j/t⌉ records and fills the rest from
   its own bucket (thesis §7.2.2); rounding surpluses are moved to other buckets within the
   bound ⌊k_i·p_j·t⌋ whenever possible.
3. Records: groups are formed from the outside in (MDAV-style): each starts at the
   ungrouped record farthest from the centroid of the data in the standardised k-quasi space
   and takes, from every bucket, the required number of ungrouped records nearest to it
   (k-d trees), so that groups are as homogeneous as possible in the k-quasis.
4. The achieved t is verified with the distance of Definition 15 / Prop. 10 (the largest
   ratio of bucket probabilities, group vs whole data, both ways) and reported.

Outputs: ``anatomy`` — ``tables["quasi"]`` (every released column except C, plus the group
id, in input order) and ``tables["sensitive"]`` (group id + C, sorted by group and value);
``Output.data`` is then the equivalent single file: C permuted at random inside each group,
plus the group id (it carries exactly the information of the two tables).  ``permuted`` —
probabilistic k-anonymity: C permuted inside each group, no group id released.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model
from dpstudio.engine.notices import notice
from dpstudio.engine.params import Param, invalid_value
from dpstudio.engine.protection import _papers as _P
from dpstudio.engine.protection._common import (
    DROP_MISSING_PARAM,
    ORDER_PARAM,
    as_k,
    epsilon_param,
    keep_order,
    ordering,
    record_permutation,
)
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "t-close-dp"

K_PARAM = Param(
    "k",
    "int",
    None,
    "Minimum group size. Leave empty to use l; otherwise l = ⌊N/(b·k)⌋ and groups get "
    "⌊N/(b·l)⌋ or more records. Must be at least the number of buckets b = ⌊e^ε⌋ + 1.",
    label="k",
    minimum=1,
)
L_PARAM = Param(
    "l",
    "int",
    1,
    "Number of groups emphasising each bucket (thesis §7.2.2): k = N/(b·l). Used when k is not given.",
    label="l",
    minimum=1,
)
OUTPUT_PARAM = Param(
    "output",
    "choice",
    "anatomy",
    "'anatomy': two linked tables (quasi-identifiers + group id; group id + confidential "
    "values). 'permuted': one table with the confidential values permuted inside each group "
    "(probabilistic k-anonymity; groups are not released).",
    label="output",
    choices=("anatomy", "permuted"),
    choice_labels={"anatomy": "Anatomy (two tables)", "permuted": "Permuted within groups"},
)
VALUES_PARAM = Param(
    "sensitive_values",
    "choice",
    "exact",
    "'exact': release the confidential values themselves (t-closeness then holds for the "
    "bucket each value falls in; values inside a bucket are exact). 'bucket': release only "
    "the bucket (a value range), as in thesis Table 7.5.",
    label="confidential values",
    choices=("exact", "bucket"),
    choice_labels={"exact": "Exact values", "bucket": "Bucket (value range) only"},
)


# --------------------------------------------------------------------------- pieces


def n_buckets(epsilon: float) -> int:
    """The number of buckets b = ⌊e^ε⌋ + 1."""
    return int(math.floor(math.exp(float(epsilon)))) + 1


def bucketize_values(c: np.ndarray, b: int, column: str = "C") -> np.ndarray:
    """Bucket index 0..b−1 of every value: b runs of consecutive values of ≈ N/b records,
    cut points moved to the nearest change of value (equal values share a bucket).
    """
    n = c.size
    order = np.lexsort((np.arange(n), c))
    sc = c[order]
    changes = np.flatnonzero(sc[1:] != sc[:-1]) + 1  # admissible cut positions
    distinct = changes.size + 1
    if distinct < b:
        raise InputError(
            f"Confidential attribute {column!r} has {distinct} distinct value(s), fewer than the "
            f"b = {b} buckets that t = e^ε needs. Use a smaller ε (b = ⌊e^ε⌋ + 1) or another attribute."
        )
    cuts = []
    lo = 0
    for j in range(1, b):  # loop over buckets (few)
        ideal = j * n / b
        # admissible cuts that leave room for the remaining buckets
        ok = changes[(changes > lo)]
        ok = ok[: max(0, ok.size - (b - 1 - j))]
        if ok.size == 0:
            raise InputError(
                f"Confidential attribute {column!r}: too many equal values to form {b} buckets of "
                "comparable size. Use a smaller ε or an attribute with more distinct values."
            )
        cut = int(ok[np.argmin(np.abs(ok - ideal))])
        cuts.append(cut)
        lo = cut
    sizes = np.diff(np.array([0] + cuts + [n]))
    if sizes.min() < n / (2 * b):
        vals, cnt = np.unique(c, return_counts=True)
        top = vals[np.argmax(cnt)]
        raise InputError(
            f"Confidential attribute {column!r}: too many equal values to form {b} buckets of "
            f"comparable size (value {top:g} alone covers {cnt.max()} of {n} records; the smallest "
            f"bucket would hold {int(sizes.min())}, less than half of N/b). Use a smaller ε or an "
            "attribute with more distinct values."
        )
    bucket_sorted = np.searchsorted(np.array(cuts), np.arange(n), side="right")
    out = np.empty(n, dtype=np.int64)
    out[order] = bucket_sorted
    return out


def bucketize_compound(C: np.ndarray, b: int) -> np.ndarray:
    """The b buckets of ≈ N/b records by MDAV-style microaggregation of the standardised
    confidential attributes (farthest remaining record from the remaining centroid, plus its
    nearest neighbours; ties by index).
    """
    n = C.shape[0]
    sd = C.std(axis=0, ddof=1) if n > 1 else np.ones(C.shape[1])
    Z = (C - C.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    sizes = np.diff(np.round(np.arange(b + 1) * n / b).astype(np.int64))
    out = np.full(n, -1, dtype=np.int64)
    alive = np.arange(n)
    for j in range(b - 1):
        Za = Z[alive]
        cen = Za.mean(axis=0)
        r = int(np.argmax(((Za - cen) ** 2).sum(axis=1)))
        d = ((Za - Za[r]) ** 2).sum(axis=1)
        take = np.lexsort((alive, d))[: sizes[j]]
        out[alive[take]] = j
        keep = np.ones(alive.size, dtype=bool)
        keep[take] = False
        alive = alive[keep]
    out[alive] = b - 1
    return out


def group_sizes(n: int, groups: int) -> np.ndarray:
    """k_i = round(i·N/G) − round((i−1)·N/G)."""
    edges = np.floor(np.arange(groups + 1) * n / groups + 0.5).astype(np.int64)
    return np.diff(edges)


def _feasible_k(n: int, supply: np.ndarray, t: float, start: int, limit: int = 5) -> list[int]:
    """The first few values of k ≥ ``start`` for which the quota plan exists, computed exactly
    as the method does (l = ⌊n/(b·k)⌋, G = b·l groups of sizes round(iN/G) − …).
    """
    b = supply.size
    p_ = supply / n
    out = []
    for k in range(max(b, start), n // b + 1):
        G = b * max(1, n // (b * k))
        sizes = group_sizes(n, G)
        lo = np.ceil(sizes[:, None] * p_[None, :] / t - 1e-9)
        if np.all(lo.sum(axis=0) <= supply) and np.all(lo.sum(axis=1) <= sizes):
            out.append(k)
            if len(out) >= limit:
                break
    return out


def quota_plan(sizes: np.ndarray, supply: np.ndarray, t: float) -> np.ndarray:
    """(G, b) number of records group i takes from bucket j (thesis §7.2.2 quotas).

    Every group takes at least ⌈k_i·p_j/t⌉ records of every bucket j (the lower bound of
    t-closeness); group i emphasises bucket i mod b and fills the rest of its k_i records from
    it.  When the emphasised bucket runs short (rounding, unequal buckets) the remainder comes
    from the buckets with the most supply left, within ⌊k_i·p_j·t⌋ whenever possible.  Raises
    :class:`ParameterError` when the buckets cannot give every group its minimum share.
    """
    G, b = sizes.size, supply.size
    n = int(sizes.sum())
    p = supply / n
    lo = np.ceil(sizes[:, None] * p[None, :] / t - 1e-9).astype(np.int64)
    hi = np.floor(sizes[:, None] * p[None, :] * t + 1e-9).astype(np.int64)
    emph = np.arange(G) % b
    x = lo.copy()
    left = supply.astype(np.int64) - x.sum(axis=0)
    if np.any(left < 0) or np.any(x.sum(axis=1) > sizes):
        kmin = int(sizes.min())
        ok = _feasible_k(n, supply, t, kmin + 1)
        hint = (
            f"values of k that work here: {', '.join(map(str, ok))}"
            if ok
            else "no k up to n/b works with these buckets; change ε"
        )
        raise ParameterError(
            f"Groups of {kmin} records are too small for t-closeness with these buckets: every "
            f"group must hold at least ⌈k_i·p_j/t⌉ records of each bucket j, and with {G} groups "
            f"the buckets cannot supply them. Increase k — {hint} — or lower l."
        )
    for i in range(G):  # loop over groups, b-vectors only
        need = int(sizes[i] - x[i].sum())
        e = emph[i]
        take = max(0, min(need, int(left[e]), int(hi[i, e] - x[i, e])))
        x[i, e] += take
        left[e] -= take
        need -= take
        if need:
            for strict in (True, False):
                for j in np.argsort(-left, kind="stable"):
                    if need == 0:
                        break
                    room = int(left[j]) if not strict else min(int(left[j]), int(hi[i, j] - x[i, j]))
                    take = max(0, min(need, room))
                    x[i, j] += take
                    left[j] -= take
                    need -= take
    return x


def achieved_t(counts: np.ndarray, supply: np.ndarray) -> float:
    """Definition 15 / Prop. 10 between each group's bucket distribution and the whole data's:
    max over groups and buckets of max(P_g/P, P/P_g) (∞ when a bucket is missing).
    """
    counts = np.asarray(counts, dtype=np.float64)
    pg = counts / counts.sum(axis=1, keepdims=True)
    p = np.asarray(supply, dtype=np.float64) / float(np.sum(supply))
    with np.errstate(divide="ignore"):
        r = pg / p[None, :]
        inv = np.where(r > 0, 1.0 / np.where(r > 0, r, 1.0), np.inf)
    return float(max(r.max(), inv.max()))


def form_groups(
    Z: np.ndarray, bucket: np.ndarray, plan: np.ndarray, check_cancel=None, progress=None
) -> np.ndarray:
    """Group id of every record (MDAV-style, from the outside in).

    Seeds are taken in decreasing distance from the centroid of the data (the farthest record
    not yet grouped starts the next group); group i takes, from every bucket j, the
    ``plan[i, j]`` remaining records of that bucket nearest to its seed (a k-d tree per bucket,
    queried for a few more neighbours than needed and skipping grouped records; rebuilt on the
    remaining records when half of them are gone).  Ties: the tree's order, deterministic.
    """
    from scipy.spatial import cKDTree

    n = Z.shape[0]
    G, b = plan.shape
    # a vanishing record-index coordinate breaks ties between identical k-quasi vectors (and
    # lets the k-d trees split when many records coincide)
    Z = np.column_stack([Z, np.arange(n) * (1e-9 / max(n, 1))])
    group = np.full(n, -1, dtype=np.int64)
    taken = np.zeros(n, dtype=bool)
    seeds = np.argsort(-((Z - Z.mean(axis=0)) ** 2).sum(axis=1), kind="stable")
    ptr = 0
    members = [np.flatnonzero(bucket == j) for j in range(b)]  # records indexed by the tree
    trees = [cKDTree(Z[m]) if m.size else None for m in members]
    live = [m.size for m in members]

    def rebuild(j: int) -> None:
        m = members[j][~taken[members[j]]]
        members[j] = m
        trees[j] = cKDTree(Z[m]) if m.size else None

    for i in range(G - 1):  # loop over groups; each step costs O(b · k log n)
        if check_cancel is not None and i % 256 == 0:
            check_cancel()
            if progress is not None:
                progress(0.1 + 0.8 * i / G)
        while taken[seeds[ptr]]:
            ptr += 1
        seed = Z[seeds[ptr]]
        for j in range(b):
            q = int(plan[i, j])
            if q == 0:
                continue
            size = members[j].size
            kq = min(size, q + max(q, 16))
            while True:
                tree = trees[j]
                assert tree is not None  # the plan takes q > 0 records from bucket j: it has live members
                _, idx = tree.query(seed, k=kq)
                idx = np.atleast_1d(idx)
                cand = members[j][idx[idx < size]]
                cand = cand[~taken[cand]]
                if cand.size >= q or kq >= size:
                    break
                kq = min(size, kq * 4)
            sel = cand[:q]
            group[sel] = i
            taken[sel] = True
            live[j] -= sel.size
            if live[j] * 2 < size:
                rebuild(j)
    group[~taken] = G - 1
    return group


def permute_within(group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index array π with π[r] = the record whose confidential values record r receives:
    a uniform random permutation inside every group.
    """
    n = group.size
    pos = np.argsort(group, kind="stable")
    shuffled = np.lexsort((rng.random(n), group))
    perm = np.empty(n, dtype=np.int64)
    perm[pos] = shuffled
    return perm


# --------------------------------------------------------------------------- run


def _confidential(job: Job, cols: list[str]) -> np.ndarray:
    out = np.empty((job.n, len(cols)))
    for i, c in enumerate(cols):
        s = job.data[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            if not s.cat.ordered:
                raise InputError(
                    f"Confidential attribute {c!r} is an unordered category; "
                    f"method {METHOD_ID!r} needs a numeric or ordinal attribute."
                )
            out[:, i] = s.cat.codes.to_numpy(dtype=np.float64)
            continue
        conv = pd.to_numeric(s, errors="coerce")
        if conv.isna().any():
            bad = str(s[conv.isna()].iloc[0])
            raise InputError(
                f"Confidential attribute {c!r} holds non-numeric values (e.g. {bad!r}); "
                f"method {METHOD_ID!r} needs a numeric or ordinal (ordered categorical) "
                "attribute. Recode it, or give the column another role."
            )
        out[:, i] = conv.to_numpy(dtype=np.float64)
    return out


def _quasi_matrix(job: Job, cols: list[str], warns: list[str]) -> np.ndarray:
    if not cols:
        return np.zeros((job.n, 1))
    Z = np.empty((job.n, len(cols)))
    for i, c in enumerate(cols):
        s = job.data[c]
        conv = pd.to_numeric(s, errors="coerce") if not isinstance(s.dtype, pd.CategoricalDtype) else None
        if conv is not None and not conv.isna().any():
            Z[:, i] = conv.to_numpy(dtype=np.float64)
        else:
            Z[:, i] = pd.Categorical(s.astype(str)).codes
            warns.append(
                notice(
                    "categorical-proximity",
                    f"k-quasi {c!r} is categorical: groups are made homogeneous on its "
                    "category codes (alphabetical order), which is only a rough proximity.",
                )
            )
    sd = Z.std(axis=0, ddof=1)
    return (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _group_col(data: pd.DataFrame) -> str:
    name = "group_id"
    while name in data.columns:
        name = "_" + name
    return name


def run(job: Job) -> Output:
    p = job.params
    conf = job.columns(Role.CONFIDENTIAL)
    quasi = job.columns(Role.K_QUASI)
    n = job.n
    eps = p.get("epsilon")
    warns: list[str] = []
    C = _confidential(job, conf)
    if eps is None:  # noise-free baseline of a sweep: groups without the t-closeness quotas
        t, b = math.inf, 1
    else:
        t, b = math.exp(float(eps)), n_buckets(eps)
    if b > n:
        raise InputError(f"ε = {eps:g} needs b = {b} buckets but there are only {n} records.")
    k_given = p.get("k")
    if k_given is not None:
        k_given = int(k_given)
        if not b <= k_given <= n // b:
            raise invalid_value(
                "k",
                METHOD_ID,
                f"an int in the range [{b}, {n // b}] (at least the number of "
                f"buckets b = ⌊e^ε⌋ + 1 = {b}: every group needs a record of every bucket; at "
                f"most n/b = {n // b} for {n} records)",
                k_given,
            )
        l_ = max(1, n // (b * k_given))
    else:
        l_ = int(p.get("l") or 1)
    G = b * l_
    sizes = group_sizes(n, G)
    if sizes.min() < b or (k_given is None and n // G < b):
        raise ParameterError(
            f"Groups of {int(sizes.min())} records are smaller than the b = {b} buckets (k < b): "
            f"lower l (now {l_}) so that k = N/(b·l) ≥ b, or lower ε."
        )
    if b == 1:
        bucket = np.zeros(n, dtype=np.int64)
    elif C.shape[1] == 1:
        bucket = bucketize_values(C[:, 0], b, conf[0])
    else:
        bucket = bucketize_compound(C, b)
    supply = np.bincount(bucket, minlength=b)
    plan = quota_plan(sizes, supply, t) if b > 1 else sizes[:, None].copy()
    Z = _quasi_matrix(job, quasi, warns)
    job.progress(0.1)
    key = (METHOD_ID, "groups", tuple(quasi), tuple(conf), b, l_, plan.tobytes())
    if key not in job.cache:
        job.cache[key] = form_groups(Z, bucket, plan, job.check_cancel, job.progress)
    group = job.cache[key]
    counts = np.zeros((G, b), dtype=np.int64)
    np.add.at(counts, (group, bucket), 1)
    t_ach = achieved_t(counts, supply) if b > 1 else 1.0
    if eps is not None and missed_target(t_ach, t):
        if p.get("output", "anatomy") != "anatomy":
            # the groups are not released: the achieved t is not a function of the release, so
            # the public guarantee cannot state it -- and must not claim the target it missed
            raise ParameterError(
                f"This run's groups reach t = {t_ach:.4g}, above the target e^ε = {t:.4g} "
                "(rounding of small groups). With output='permuted' the groups are not "
                "released, so the guarantee cannot state the achieved t. Increase k (or lower "
                "l), or choose output='anatomy' (its guarantee states the achieved t)."
            )
        warns.append(
            notice(
                "t-achieved",
                f"The achieved t = {t_ach:.4g} exceeds the target e^ε = {t:.4g} (rounding of "
                "small groups): the release is only t-close for the achieved t. Increase k.",
            )
        )
    # releases
    gsizes = np.bincount(group, minlength=G)
    perm = permute_within(group, job.rng)
    out = job.data.copy()
    values_mode = p.get("sensitive_values", "exact")
    if values_mode == "bucket":
        labels = _bucket_labels(C, bucket, b, conf)
        released_conf = pd.DataFrame({c: labels for c in conf})
    else:
        released_conf = job.data[conf].reset_index(drop=True)
    for c in conf:
        out[c] = released_conf[c].to_numpy()[perm]
    gcol = _group_col(job.data)
    tables: dict[str, pd.DataFrame] = {}
    if p.get("output", "anatomy") == "anatomy":
        qt = job.data.drop(columns=conf).copy()
        qt[gcol] = group
        st = released_conf.copy()
        st.insert(0, gcol, group)
        st = st.iloc[np.lexsort(tuple(C[:, j] for j in range(C.shape[1] - 1, -1, -1)) + (group,))]
        tables = {"quasi": qt.reset_index(drop=True), "sensitive": st.reset_index(drop=True)}
        out[gcol] = group
    row_map = None
    if not keep_order(p):  # the records (and Anatomy's quasi table) in keyed random order
        row_map = record_permutation(job, n)
        out = out.iloc[row_map].reset_index(drop=True)
        if "quasi" in tables:
            tables["quasi"] = tables["quasi"].iloc[row_map].reset_index(drop=True)
    job.progress(1.0)
    p_b = supply / n
    info = {
        "t_target": None if eps is None else t,
        "t_achieved": t_ach,
        "buckets": b,
        "bucket_sizes": supply.tolist(),
        "l": l_,
        "groups": G,
        "k": int(gsizes.min()),
        "group_size_max": int(gsizes.max()),
        "k_nominal": n / G,
        "output": p.get("output", "anatomy"),
        "sensitive_values": values_mode,
        "bucket_probabilities": p_b.tolist(),
        "release_note": (
            "Output.data = the records with the confidential values permuted at "
            "random inside each group"
            + (", plus the group id (equivalent to the two Anatomy tables)" if tables else "")
            + "."
        ),
    }
    if eps is not None and not missed_target(t_ach, t):
        info["t_check"] = f"achieved t = {t_ach:.4g} ≤ e^ε = {t:.4g}"
    # the k and l actually used (issue 11: k = auto showed "k None"); a function of N, ε and
    # the parameters only, so the API puts them in the result's params and the sentence
    info["k_source"] = "given" if k_given is not None else f"from l = {l_}: k = ⌊N/(b·l)⌋"
    info["params_used"] = {"k": int(sizes.min()), "l": int(l_)}
    info["released_exactly"] = list(quasi)  # roles only: the k-quasis are not changed
    return Output(data=out, info=info, warnings=warns, tables=tables, protected=quasi + conf, row_map=row_map)


def _bucket_labels(C: np.ndarray, bucket: np.ndarray, b: int, conf: list[str]) -> np.ndarray:
    if C.shape[1] == 1:
        lo = np.full(b, np.inf)
        hi = np.full(b, -np.inf)
        np.minimum.at(lo, bucket, C[:, 0])
        np.maximum.at(hi, bucket, C[:, 0])
    # Labels name the bucket, not its range: the smallest and largest values of a bucket are
    # individuals' values (the overall minimum and maximum among them), which must not leak.
    names = np.array([f"bucket {j + 1} of {b}" for j in range(b)], dtype=object)
    return names[bucket]


def missed_target(t_achieved: float, t_target: float) -> bool:
    """Whether the groups' achieved t exceeds the target (beyond rounding of the check)."""
    return t_achieved > t_target * (1 + 1e-9)


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    eps = ctx.get("epsilon")
    roles = ctx.roles
    attrs = list(ctx.attributes)
    quasi = [c for c in attrs if roles.get(c) is Role.K_QUASI]
    conf = [c for c in attrs if roles.get(c) is Role.CONFIDENTIAL]
    if attrs and not roles:  # roles unknown: name the attributes without claiming more
        quasi, conf = [], attrs
    k = ctx.get("k")
    groups = (
        f"groups of at least k = {int(k)} records"
        if k is not None
        else f"groups of at least ⌊N/(b·l)⌋ records (l = {int(ctx.get('l') or 1)}; the "
        "actual k is stated with the release)"
    )
    anatomy = ctx.get("output", "anatomy") == "anatomy"
    order = ordering(ctx, clustered=False)[0]
    if eps is None:
        return Guarantee(
            model=Model.NONE,
            baseline=True,
            k=as_k(k),
            covered=ctx.attributes,
            clauses=(
                Clause(
                    "baseline",
                    "Noise-free baseline: " + groups + " on the k-quasi-identifiers without the "
                    "t-closeness quotas; no t-closeness, no differential privacy.",
                ),
                *_scope(quasi, conf, ctx),
                order,
            ),
        )
    t = math.exp(float(eps))
    b = n_buckets(eps)
    exact = ctx.get("sensitive_values", "exact") == "exact"
    shown = "released per group (Anatomy)" if anatomy else "permuted inside groups that are not released"
    clauses = [
        Clause("claim", f"t-closeness with t = e^ε = {t:.4g} (ε = {float(eps):g})"),
        Clause(
            "mechanism",
            f" for the confidential attribute cut into b = {b} equal-mass buckets, in {groups} "
            f"on the k-quasi-identifiers; confidential values are {shown}.",
        ),
        Clause(
            "meaning",
            " This is ε-differential privacy ONLY for intruders whose sole knowledge of the "
            "confidential attribute is its marginal distribution (uninformed intruders, thesis "
            "§7.3.1); for intruders who know more (e.g. the values of other members of a group) "
            "the protection is only approximate, not ε-DP.",
        ),
        Clause(
            "mechanism",
            " The bound concerns which bucket a person's value lies in; values inside a bucket "
            "are released exactly."
            if exact
            else " Only the bucket (value range) is released.",
        ),
        *_scope(quasi, conf, ctx),
        order,
    ]
    t_holds = t
    run = ctx.run or {}
    t_ach = run.get("t_achieved")
    if anatomy and t_ach is not None and missed_target(float(t_ach), t):
        # public: the Anatomy tables release the groups and every record's bucket (or value),
        # so the achieved t is a function of the release (with output='permuted' the run
        # refuses instead: its groups are not released)
        t_holds = float(t_ach)
        clauses.append(
            Clause(
                "caveat",
                f" CAVEAT: the achieved t = {t_holds:.4g} exceeds the target {t:.4g}; this "
                f"release is only {t_holds:.4g}-close (ε = ln t = {math.log(t_holds):.4g} for "
                "uninformed intruders). Increase k for the stated target.",
            )
        )
    return Guarantee(
        model=Model.T_CLOSENESS,
        clauses=tuple(clauses),
        epsilon=float(eps),
        t=t_holds,
        k=as_k(k),
        covered=ctx.attributes,
    )


def _scope(quasi: list[str], conf: list[str], ctx: GuaranteeContext) -> tuple[Clause, ...]:
    """What is changed and what is not (issue 11: untouched k-quasis were called protected)."""
    out: list[Clause] = []
    if conf:
        how = (
            "moved to a separate table by group"
            if ctx.get("output", "anatomy") == "anatomy"
            else "permuted among the records of each group"
        )
        if ctx.get("sensitive_values", "exact") == "bucket":
            how += " and replaced by their bucket"
        out.append(Clause("changed", f" Changed: the confidential attribute(s) {', '.join(conf)} ({how})."))
    if quasi:
        out.append(
            Clause(
                "not-changed",
                f" Not changed: the k-quasi-identifiers {', '.join(quasi)} are released with "
                "their exact values; only their link to the confidential values is hidden "
                "inside the groups.",
            )
        )
    return tuple(out)


SPEC = MethodSpec(
    id=METHOD_ID,
    name="t-closeness → ε-DP (bucketized exp(ε)-closeness)",
    family="t-closeness",
    description=(
        "Buckets the confidential attribute into ⌊e^ε⌋+1 equal-mass buckets and forms "
        "groups homogeneous in the k-quasi-identifiers, each emphasising one bucket, so "
        "that every group is e^ε-close to the whole data; releases Anatomy tables or "
        "confidential values permuted within groups."
    ),
    paper=_P.SORIA_COMAS_2013_THESIS + ", ch. 7",
    params=(
        epsilon_param(1.0),
        K_PARAM,
        L_PARAM,
        OUTPUT_PARAM,
        VALUES_PARAM,
        DROP_MISSING_PARAM,
        ORDER_PARAM,
    ),
    protects=(Role.K_QUASI, Role.CONFIDENTIAL),
    requires=(Role.CONFIDENTIAL,),
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
