"""SSE and record linkage with the semantic distance for categorical attributes
(thesis §6.4.2, docs/measures.md), registered for ``categorical-dp`` through
:func:`dpstudio.engine.measures.register_method_measures`.

Categorical attributes use δ (eq. 6.6) from their taxonomy, looked up in the precomputed
concept distance matrix; numeric attributes use |x − x′| (SSE) and, for RL, the Euclidean
distance on attributes standardised by the original's standard deviation (or raw).  RL works
on distinct records: distinct protected rows × distinct original rows (with their counts),
blockwise — never an n × n matrix.  Microaggregated categorical releases have few distinct
rows (Adult: 388 distinct originals), so this is fast; for mixed data with many distinct
numeric values the cost grows with (distinct protected) × (distinct original).

>>> import pandas as pd
>>> from dpstudio.engine.hierarchies.taxonomy import Taxonomy
>>> t = Taxonomy.from_parent_map({"a": "X", "b": "X", "c": "*", "X": "*"})
>>> x = pd.DataFrame({"v": ["a", "b", "c"]}); y = pd.DataFrame({"v": ["a", "X", "c"]})
>>> round(semantic_sse(x, y, ["v"], {"v": t}), 4)   # δ(b, X)² = log2(4/3)²
0.1723
>>> round(semantic_rl(x, y, ["v"], {"v": t}), 2)     # X is as close to a as to b
83.33
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.taxonomy import Taxonomy

TIE_RTOL = 1e-12
_BLOCK_ENTRIES = 2_000_000


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.ascontiguousarray(a + 0.0)
    v = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).ravel()
    _, first, inv, cnt = np.unique(v, return_index=True, return_inverse=True, return_counts=True)
    return a[first], inv.ravel(), cnt


def _encode(
    df: pd.DataFrame,
    attrs: list[str],
    tax: dict,
    which: str,
    leaves_only: bool,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    out = np.empty((len(df), len(attrs)))
    for i, a in enumerate(attrs):
        if a in tax:
            out[:, i] = tax[a].codes(
                df[a].reset_index(drop=True), column=f"{a} ({which})", leaves_only=leaves_only
            )
        else:
            x = pd.to_numeric(df[a], errors="coerce").to_numpy(dtype=np.float64)
            if np.isnan(x).any():
                raise InputError(
                    f"Column {a!r} ({which}) has missing or non-numeric values; SSE/RL "
                    "need complete numeric values (or a taxonomy)."
                )
            out[:, i] = x if scale is None else x / scale[i]
    return out


def semantic_sse(
    original: pd.DataFrame, protected: pd.DataFrame, attrs: list[str], tax: dict, scaling: str = "raw"
) -> float:
    """SSE = Σ_j Σ_i dist(x_ji, x′_ji)² with δ for the attributes in ``tax``.

    ``normalized``: numeric squared errors divided by the original's sample variance,
    categorical δ² unscaled (δ ∈ [0, 1]), the total divided by n·m.
    """
    if scaling not in ("raw", "normalized"):
        raise ParameterError(f"SSE scaling must be 'raw' or 'normalized'. Got {scaling!r}.")
    n, m = len(original), len(attrs)
    total = 0.0
    for a in attrs:
        if a in tax:
            t = tax[a]
            o = t.codes(original[a].reset_index(drop=True), column=f"{a} (original)", leaves_only=True)
            p = t.codes(protected[a].reset_index(drop=True), column=f"{a} (protected)", leaves_only=False)
            total += float((t.dist[o, p] ** 2).sum())
        else:
            x = pd.to_numeric(original[a]).to_numpy(dtype=np.float64)
            y = pd.to_numeric(protected[a]).to_numpy(dtype=np.float64)
            sq = (x - y) ** 2
            if scaling == "normalized":
                var = float(np.var(x, ddof=1)) if n > 1 else 0.0
                if var > 0:
                    sq = sq / var
            total += float(sq.sum())
    return total / (n * m) if scaling == "normalized" else total


def semantic_rl(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    attrs: list[str],
    tax: dict,
    distance: str = "standardized",
    return_probabilities: bool = False,
):
    """Record linkage (percent): Pr_j = 1/|G_j| if x_j ∈ G_j (the originals at minimum
    distance from x′_j, ties within a relative 1e-12), RL = 100·ΣPr_j/n.  Distance:
    sqrt(Σ numeric ((x−y)/sd)² + Σ categorical δ²).
    """
    if distance not in ("standardized", "raw"):
        raise ParameterError(f"Record-linkage distance must be 'standardized' or 'raw'. Got {distance!r}.")
    n = len(original)
    num_idx = [i for i, a in enumerate(attrs) if a not in tax]
    scale = np.ones(len(attrs))
    if distance == "standardized":
        for i in num_idx:
            sd = float(pd.to_numeric(original[attrs[i]]).std(ddof=1))
            scale[i] = sd if sd > 0 and np.isfinite(sd) else 1.0
    X = _encode(original, attrs, tax, "original", True, scale)
    Y = _encode(protected, attrs, tax, "protected", False, scale)
    cat = [(i, tax[a]) for i, a in enumerate(attrs) if a in tax]
    # own squared distance of every record
    d_own = np.zeros(n)
    for i in num_idx:
        d_own += (X[:, i] - Y[:, i]) ** 2
    for i, t in cat:
        d_own += t.dist[X[:, i].astype(np.int64), Y[:, i].astype(np.int64)] ** 2
    uo, _, cnt_o = _unique_rows(X)
    up, inv_p, _ = _unique_rows(Y)
    no, npr = uo.shape[0], up.shape[0]
    dmin = np.empty(npr)
    gsize = np.empty(npr)
    block = max(1, _BLOCK_ENTRIES // max(no, 1))
    ocodes = {i: uo[:, i].astype(np.int64) for i, _ in cat}
    for lo in range(0, npr, block):
        u = up[lo : lo + block]
        d2 = np.zeros((u.shape[0], no))
        for i in num_idx:
            d2 += (u[:, i][:, None] - uo[None, :, i]) ** 2
        for i, t in cat:
            d2 += t.dist[u[:, i].astype(np.int64)[:, None], ocodes[i][None, :]] ** 2
        mn = d2.min(axis=1)
        dmin[lo : lo + block] = mn
        gsize[lo : lo + block] = ((d2 <= (mn * (1.0 + TIE_RTOL) ** 2)[:, None]) * cnt_o[None, :]).sum(axis=1)
    linked = d_own <= dmin[inv_p] * (1.0 + TIE_RTOL) ** 2
    pr = np.where(linked, 1.0 / np.maximum(gsize[inv_p], 1.0), 0.0)
    rl = 100.0 * float(pr.sum()) / n
    return (rl, pr) if return_probabilities else rl


_TAX_CACHE: dict = {}


def taxonomies_of(result) -> dict:
    """The taxonomies recorded in ``result.info['taxonomies']`` (rebuilt once, cached)."""
    out = {}
    for col, d in ((getattr(result, "info", None) or {}).get("taxonomies") or {}).items():
        key = (col, tuple(d["concepts"]), tuple(d["parent"]), int(d["n_leaves"]))
        if key not in _TAX_CACHE:
            if len(_TAX_CACHE) > 64:
                _TAX_CACHE.clear()
            _TAX_CACHE[key] = Taxonomy.from_dict(d)
        out[col] = _TAX_CACHE[key]
    return out


def measures_hook(original, protected, result, measures, cache) -> dict:
    """Replace SSE and RL by their semantic versions for the categorical attributes."""
    tax = taxonomies_of(result)
    if not tax:
        return {}
    attrs = [
        a
        for a in (getattr(result, "protected_attributes", None) or [])
        if a in original.columns and a in protected.columns
    ]
    out: dict = {}
    if "sse" in measures:
        out["sse_raw"] = semantic_sse(original, protected, attrs, tax, "raw")
        out["sse_normalized"] = semantic_sse(original, protected, attrs, tax, "normalized")
    if "rl" in measures:
        out["rl"] = semantic_rl(original, protected, attrs, tax)
    return out


def register_hooks(method_id: str) -> None:
    from dpstudio.engine.measures import register_method_measures

    register_method_measures(method_id, measures_hook)


__all__ = ["semantic_sse", "semantic_rl", "measures_hook", "register_hooks", "taxonomies_of"]
