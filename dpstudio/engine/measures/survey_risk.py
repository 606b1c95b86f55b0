"""Disclosure risk of survey microdata with categorical key variables, as sdcMicro computes it.

``assess_risk(df, keys, weight=..., household=..., sensitive=...)`` gives the figures
statistical offices read from sdcMicro (R package, version 5.8.1) before and after
protection:

* sample frequency ``f_k`` and weighted population estimate ``F_k`` of each record's key
  combination -- sdcMicro's ``freqCalc(x, keyVars, w)``;
* the individual re-identification risk of the Benedetti--Franconi negative-binomial
  super-population model with sampling weights, with the approximation formulas of
  Franconi & Polettini (2004), "Individual risk estimation in mu-Argus: a review", Privacy in
  Statistical Databases, LNCS 3050, 262--272 -- sdcMicro's ``indivRisk(method="approx")`` as
  called by ``measure_risk``; without a weight the risk is ``1 / f_k`` (``survey = FALSE``);
* global risk (mean individual risk) and expected re-identifications (their sum,
  ``risk_ER``) -- ``measure_risk``;
* household (hierarchical) risk: a household is re-identified if at least one member is,
  ``1 - prod(1 - r_i)`` over its members, given to every member; the expected number is the
  sum over records -- ``measure_risk(hid=...)`` with ``fast_hier = TRUE`` (its default);
* distinct, entropy and recursive (c = 2) l-diversity of confidential attributes per key
  combination -- ``ldiversity`` (its C++ routine ``measure_risk_cpp``);
* on request (``suda=True``), SUDA2 special-uniques scores and DIS scores per record --
  ``suda2(missing = NA)`` (:mod:`dpstudio.engine.measures.suda2`);
* ARX's prosecutor, journalist and marketer re-identification risk from the same f_k and F_k
  (:mod:`dpstudio.engine.measures.reid_models`).

Missing values in keys (``missing="any"``, sdcMicro's rule, our default): a missing key value
matches *any* value, so ``f_k`` of a record counts every record that agrees with it on every
key where both are non-missing (sdcMicro's ``freqCalc`` with ``alpha = 1``, its default; we do
not offer ``alpha < 1``).  One deliberate difference: sdcMicro does not count records whose
keys are *all* missing in the ``f_k`` of complete records (``addAllNAtoKeys = FALSE``) although
it counts them for records with some missing keys; we count them everywhere, so the
rule is symmetric ("record a matches b" iff "b matches a") and a file that passes our
k-anonymity check passes sdcMicro's.  ``missing="category"`` instead treats a missing value as
one more category (as sdcMicro's l-diversity routine and ARX do).  l-diversity is computed per
*exact* key combination (a missing value forms its own group), exactly as sdcMicro's C++
routine does, whatever ``missing`` says.

Implementation: our own vectorised numpy/pandas code, not a port
(:class:`~dpstudio.engine.algorithms.frequencies.WildcardIndex`, shared with local suppression).
Records are grouped by their pattern of missing keys and, within a pattern, by their distinct
key combination, coded as one mixed-radix integer (a missing key's digit is 0).  Records of
patterns P and Q are compatible iff they agree on the keys missing in neither, i.e. iff their
codes agree once the digits of the keys missing in P or Q are zeroed; so each unordered pair
of patterns costs one sort of one side's distinct codes and one binary search of the other's,
and gives the counts of both directions.  Only distinct combinations are touched, never
pairs of records.  With no missing values this is a single group-by.  When the codes do not
fit 62 bits (very many keys with many categories) a slower general path groups the records of
each pair of patterns instead; both give the same counts (tests against a pairwise oracle).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.frequencies import (
    WildcardIndex,
    _group_ids,
    _wildcard_counts_pairwise,
    encode_keys,
)
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.measures.reid_models import ARX_DEFAULT_THRESHOLD

__all__ = [
    "RiskReport",
    "assess_risk",
    "bf_individual_risk",
    "per_record_risk_frame",
    "write_per_record_risk",
]


# --------------------------------------------------------------------------- individual risk


def bf_individual_risk(fk: np.ndarray, Fk: np.ndarray | None) -> np.ndarray:
    """Individual risk of the Benedetti--Franconi model, sdcMicro's ``indivRisk(method="approx")``.

    With ``p_k = f_k / F_k`` (Franconi & Polettini 2004, eqs. for f_k = 1, 2 and the
    approximation for f_k > 2)::

        f_k = 1:  p/(1-p) * log(1/p)
        f_k = 2:  p/(1-p) - (p/(1-p))^2 * log(1/p)
        f_k > 2:  p / (f_k - (1 - p))
        F_k = f_k (a census of that combination): 1/f_k

    Written in ``q = 1 - p`` with series expansions near ``q = 0`` so that no cancellation
    occurs (sdcMicro's naive formulas agree to ~1e-12 away from ``q = 0``).  Without weights
    (``Fk=None``) the risk is ``1/f_k`` (sdcMicro's ``survey = FALSE``).
    """
    fk = np.asarray(fk, dtype=np.float64)
    if Fk is None:
        return 1.0 / fk
    Fk = np.asarray(Fk, dtype=np.float64)
    rk = np.zeros(np.broadcast(fk, Fk).shape)
    fk, Fk = np.broadcast_to(fk, rk.shape), np.broadcast_to(Fk, rk.shape)
    census = Fk <= fk
    with np.errstate(divide="ignore", invalid="ignore"):
        big = (fk > 2) & ~census
        f3, F3 = fk[big], Fk[big]
        p = f3 / F3
        rk[big] = p / (f3 - (1 - p))
        for f in (1, 2):  # each formula on its own records only (same values, less work)
            sel = (fk == f) & ~census
            Fs = Fk[sel]
            q = (Fs - f) / Fs
            L = -np.log1p(-q)  # log(1/p)
            small = q < 1e-4
            qs = np.where(small, 1.0, q)
            if f == 1:  # L/q, exact or by series
                L_over_q = np.where(small, 1 + q / 2 + q * q / 3 + q**3 / 4, L / qs)
                rk[sel] = (1 - q) * L_over_q
            else:  # S = (L - q)/q^2, exact or by series
                S = np.where(small, 0.5 + q / 3 + q * q / 4 + q**3 / 5, (L - q) / (qs * qs))
                rk[sel] = (1 - q) * (1 - (1 - q) * S)
        rk[census] = 1.0 / fk[census]
    return rk


# --------------------------------------------------------------------------- report


@dataclass
class RiskReport:
    """Risk figures of a file (JSON field names of issue 10 in :meth:`to_dict`).

    Per-record arrays (``fk``, ``Fk``, ``individual_risk``, ``household_risk`` and the
    l-diversity of each record's combination) are attributes, not part of :meth:`to_dict`
    unless asked: they are computed from the original data and belong in private files only.
    """

    records: int
    key_combinations: int
    sample_uniques: int
    records_fk_lt_2: int
    records_fk_lt_3: int
    records_fk_lt_5: int
    global_risk: float
    expected_reidentifications: float
    household_expected_reidentifications: float | None
    individual_risk_summary: dict
    l_diversity: dict
    keys: list[str]
    weight: str | None
    household: str | None
    missing: str
    fk: np.ndarray = field(repr=False)
    Fk: np.ndarray = field(repr=False)
    individual_risk: np.ndarray = field(repr=False)
    household_risk: np.ndarray | None = field(default=None, repr=False)
    l_diversity_per_record: dict = field(default_factory=dict, repr=False)
    reid_threshold: float = ARX_DEFAULT_THRESHOLD
    suda: Any = field(default=None, repr=False)  # a Suda2Result when asked for

    def reid_models(self, threshold: float | None = None) -> dict:
        """ARX's prosecutor / journalist / marketer risk (:func:`~dpstudio.engine.measures.reid_models.reid_models`),
        the journalist's F_k from the sampling weights (the file itself without a weight).
        """
        from dpstudio.engine.measures.reid_models import reid_models

        t = self.reid_threshold if threshold is None else threshold
        return reid_models(self.fk, self.Fk if self.weight else None, threshold=t)

    def records_above(self, threshold: float) -> int:
        """Number of records with individual risk above ``threshold`` (sdcApp's threshold field)."""
        return int(np.count_nonzero(self.individual_risk > threshold))

    def to_dict(self, per_record: bool = False) -> dict:
        out: dict[str, Any] = {
            "records": self.records,
            "key_combinations": self.key_combinations,
            "sample_uniques": self.sample_uniques,
            "records_fk_lt_2": self.records_fk_lt_2,
            "records_fk_lt_3": self.records_fk_lt_3,
            "records_fk_lt_5": self.records_fk_lt_5,
            "global_risk": self.global_risk,
            "expected_reidentifications": self.expected_reidentifications,
        }
        if self.household is not None:
            out["household_expected_reidentifications"] = self.household_expected_reidentifications
        out["individual_risk"] = dict(self.individual_risk_summary)
        out["l_diversity"] = {k: dict(v) for k, v in self.l_diversity.items()}
        out["reidentification_models"] = self.reid_models()
        if self.suda is not None:
            out["suda2"] = self.suda.to_dict()
        out["settings"] = {
            "keys": list(self.keys),
            "weight": self.weight,
            "household": self.household,
            "missing": self.missing,
            "model": (
                "Benedetti-Franconi negative binomial (sdcMicro indivRisk approx)"
                if self.weight
                else "1/f_k (no sampling weight)"
            ),
        }
        if per_record:
            out["fk"] = self.fk.tolist()
            out["Fk"] = self.Fk.tolist()
            out["individual_risk_per_record"] = self.individual_risk.tolist()
            if self.household_risk is not None:
                out["household_risk"] = self.household_risk.tolist()
            if self.suda is not None:
                out["suda_score"] = self.suda.score.tolist()
                out["suda_dis"] = self.suda.dis.tolist()
        return out


def per_record_risk_frame(rep: RiskReport) -> pd.DataFrame:
    """The per-record figures of ``rep``: ``fk``, ``Fk``, ``individual_risk`` (and
    ``household_risk`` with a household role, ``suda_score`` and ``suda_dis`` when SUDA2 was
    computed), one row per record in file order.
    """
    per = pd.DataFrame({"fk": rep.fk, "Fk": rep.Fk, "individual_risk": rep.individual_risk})
    if rep.household_risk is not None:
        per["household_risk"] = rep.household_risk
    if rep.suda is not None:
        per["suda_score"] = rep.suda.score
        per["suda_dis"] = rep.suda.dis
    per.index.name = "record"
    return per


def write_per_record_risk(rep: RiskReport, path: str, *, protect: tuple = (), plan=None) -> str:
    """Write :func:`per_record_risk_frame` as CSV to ``path``: a PRIVATE file (owner-only,
    0600, written atomically by the one guarded writer) -- it is computed from the original
    records.  ``protect``: paths never to overwrite (the input file); ``plan``: the command's
    checked :class:`~dpstudio.engine.safe_write.WritePlan` holding ``path``.  The CLI's
    ``risk --per-record`` and the app's Risk tab both write through this function.  Returns
    the path written.
    """
    from dpstudio.engine.safe_write import WritePlan

    if plan is None:
        plan = WritePlan(inputs=protect)
        plan.file(path, what="per-record risk file", private=True)
    else:
        plan.add_input(protect)
    per = per_record_risk_frame(rep)
    return plan.check().write(path, lambda tmp: per.to_csv(tmp, lineterminator="\n"))


def _check_columns(df: pd.DataFrame, keys, weight, household, sensitive) -> None:
    if not keys:
        raise ParameterError("give at least one key variable (role k-quasi / key)")
    cols = set(map(str, df.columns))
    for what, names in (("key", keys), ("sensitive", sensitive)):
        for c in names:
            if c not in df.columns:
                raise ParameterError(
                    f"{what} column '{c}' is not in the file (columns: {', '.join(sorted(cols))[:200]})"
                )
    if len(set(keys)) != len(keys):
        raise ParameterError("a key column is listed twice")
    for what, c in (("weight", weight), ("household", household)):
        if c is None:
            continue
        if c not in df.columns:
            raise ParameterError(f"{what} column '{c}' is not in the file")
        if c in keys:
            raise ParameterError(f"column '{c}' cannot be both a key and the {what}")
    for c in sensitive:
        if c in keys:
            raise ParameterError(f"column '{c}' cannot be both a key and a confidential attribute")
    if len(df) == 0:
        raise InputError("the file has no records")


def _weights(df: pd.DataFrame, weight: str) -> np.ndarray:
    w = pd.to_numeric(df[weight], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(w)
    if bad.any():
        raise InputError(
            f"weight column '{weight}': {int(bad.sum())} record(s) have a missing or "
            "non-numeric weight; give every record its sampling weight"
        )
    if (w < 1).any():
        raise InputError(
            f"weight column '{weight}': {int((w < 1).sum())} record(s) have a weight "
            f"below 1 (minimum {w.min():g}); a sampling weight is the number of "
            "population units a record stands for, so at least 1 -- check the column"
        )
    return w


def _ldiversity(group: np.ndarray, G: int, s: pd.Series, c: float = 2.0) -> dict:
    """The sdcMicro per-group distinct / entropy / recursive (c, l)-diversity of one attribute,
    returned per record (``measure_risk_cpp``'s ``compute_group_ldiversity``).
    """
    v, _ = pd.factorize(s, use_na_sentinel=True)
    isna = v < 0
    size = np.bincount(group, minlength=G).astype(np.float64)
    n_na = np.bincount(group[isna], minlength=G).astype(np.float64)
    g_ok = group[~isna]
    if len(g_ok):
        nv = int(v.max()) + 1
        pair = g_ok * nv + v[~isna]
        up, cnt = np.unique(pair, return_counts=True)
        pg = up // nv
    else:
        pg = np.zeros(0, dtype=np.int64)
        cnt = np.zeros(0, dtype=np.int64)
    distinct = np.bincount(pg, minlength=G).astype(np.float64)
    has = distinct > 0
    # entropy over categories, missing values as one more category when some value is known
    pr = cnt / size[pg]
    ent = np.bincount(pg, weights=-pr * np.log(pr), minlength=G)
    pna = np.where(has & (n_na > 0), n_na / np.maximum(size, 1), 1.0)
    ent = ent - pna * np.log(pna)
    distinct = distinct + (has & (n_na > 0))
    entropy_l = np.exp(ent)
    # recursive (c, l): l = 1 + #{j >= 2 : c * (r_j + ... + r_n) > r_1}, counts sorted descending
    recursive: np.ndarray = np.zeros(G)
    if len(pg):
        o = np.lexsort((-cnt, pg))
        pg_s, cnt_s = pg[o], cnt[o].astype(np.float64)
        first = np.r_[True, pg_s[1:] != pg_s[:-1]]
        start = np.flatnonzero(first)
        grp_start = np.repeat(start, np.diff(np.r_[start, len(pg_s)]))
        tot = np.bincount(pg_s, weights=cnt_s, minlength=G)
        csum = np.cumsum(cnt_s)
        before = csum - cnt_s - (csum[grp_start] - cnt_s[grp_start])  # within-group sum before j
        tail = tot[pg_s] - before
        r1 = cnt_s[grp_start]
        hit = (~first) & (c * tail > r1)
        recursive = 1 + np.bincount(pg_s[hit], minlength=G)
        recursive = np.where(distinct > 0, recursive, 0)
    return {
        "distinct": distinct[group],
        "entropy": entropy_l[group],
        "recursive": recursive[group].astype(float),
    }


def assess_risk(
    df: pd.DataFrame,
    keys: Iterable[str],
    *,
    weight: str | None = None,
    household: str | None = None,
    sensitive: Iterable[str] = (),
    missing: str = "any",
    l_recursive_c: float = 2.0,
    reid_threshold: float = ARX_DEFAULT_THRESHOLD,
    suda: bool = False,
    suda_dis_fraction: float = 0.01,
    suda_max_size: int | None = None,
    progress=None,
    check_cancel=None,
) -> RiskReport:
    """Re-identification risk of ``df`` with categorical key variables ``keys``.

    Parameters
    ----------
    df : DataFrame
        The original file or a release (key values are treated as category labels; a
        missing value is ``NaN``/``None``).
    keys : list of str
        Categorical key variables (quasi-identifiers).
    weight : str, optional
        Sampling weight column (every weight at least 1).  Without it the file is treated as
        the population: risk ``1/f_k``.
    household : str, optional
        Household (cluster) id column; adds household risk as sdcMicro's ``measure_risk(hid=)``.
    sensitive : list of str
        Confidential attributes for l-diversity (sdcMicro's ``ldiversity``).
    missing : {"any", "category"}
        How a missing key value is matched: ``"any"`` (sdcMicro: it matches every value) or
        ``"category"`` (it is one more category).
    reid_threshold : float
        Record risk above which ARX's models count a record as at risk (ARX's 0.2).
    suda : bool
        Also compute SUDA2 (:func:`~dpstudio.engine.measures.suda2.suda2`; missing key values
        as sdcMicro's ``missing = NA`` whatever ``missing`` says), with ``suda_dis_fraction``
        and ``suda_max_size``; ``progress``/``check_cancel`` are passed to it.

    Returns
    -------
    RiskReport
    """
    keys = [str(k) for k in keys] if not isinstance(keys, str) else [keys]
    sensitive = [sensitive] if isinstance(sensitive, str) else [str(s) for s in sensitive]
    if missing not in ("any", "category"):
        raise ParameterError(f"missing must be 'any' or 'category' (got {missing!r})")
    _check_columns(df, keys, weight, household, sensitive)
    from dpstudio.engine.measures.reid_models import check_threshold
    from dpstudio.engine.measures.suda2 import check_dis_fraction, check_max_size

    reid_threshold = check_threshold(reid_threshold)
    if suda:  # parameters checked before any work
        check_dis_fraction(suda_dis_fraction)
        check_max_size(suda_max_size, len(keys))
    n = len(df)
    w = _weights(df, weight) if weight is not None else None

    fk, Fk, group, G = _key_counts(df, keys, missing, w)
    rk = bf_individual_risk(fk, Fk if w is not None else None)
    hh_risk = _household_risk(df, household, rk) if household is not None else None
    hh_er = float(hh_risk.sum()) if hh_risk is not None else None
    ldiv, ldiv_rec = _ldiversity_summary(df, sensitive, group, G, l_recursive_c)

    suda_res = None
    if suda:
        from dpstudio.engine.measures.suda2 import suda2

        suda_res = suda2(
            df,
            keys,
            dis_fraction=suda_dis_fraction,
            max_size=suda_max_size,
            progress=progress,
            check_cancel=check_cancel,
        )

    q50, q90, q99 = np.quantile(rk, [0.5, 0.9, 0.99])  # R's default type 7 = numpy's linear
    er = float(rk.sum())
    return RiskReport(
        records=n,
        key_combinations=G,
        sample_uniques=int(np.count_nonzero(fk == 1)),
        records_fk_lt_2=int(np.count_nonzero(fk < 2)),
        records_fk_lt_3=int(np.count_nonzero(fk < 3)),
        records_fk_lt_5=int(np.count_nonzero(fk < 5)),
        global_risk=er / n,
        expected_reidentifications=er,
        household_expected_reidentifications=hh_er,
        individual_risk_summary={
            "max": float(rk.max()),
            "mean": float(rk.mean()),
            "q50": float(q50),
            "q90": float(q90),
            "q99": float(q99),
        },
        l_diversity=ldiv,
        keys=keys,
        weight=weight,
        household=household,
        missing=missing,
        fk=fk,
        Fk=Fk if Fk is not None else fk.copy(),
        individual_risk=rk,
        household_risk=hh_risk,
        l_diversity_per_record=ldiv_rec,
        reid_threshold=reid_threshold,
        suda=suda_res,
    )


def _key_counts(
    df: pd.DataFrame, keys: list[str], missing: str, w: np.ndarray | None
) -> tuple[np.ndarray, Any, np.ndarray, int]:
    """:func:`assess_risk`'s counts of the key combinations: every record's f_k and F_k
    (``missing`` matching as asked) and its exact combination (a missing value is its own
    category: key_combinations and l-diversity, where sdcMicro groups exactly too) as group
    ids ``0 .. G-1``.
    """
    n = len(df)
    codes, cards = encode_keys(df, keys, missing)
    index = WildcardIndex.build(codes, cards, w)
    if index is not None:
        fk, Fk = index.self_counts()
        group, G = index.exact_groups()
    else:  # codes too wide for one integer: the general path
        fk, Fk = _wildcard_counts_pairwise(codes, cards, d_weights=w)
        ex_codes, ex_cards = codes, cards
        if missing == "any" and (codes < 0).any():
            ex_codes, ex_cards = np.where(codes < 0, cards[None, :], codes), cards + 1
        group, G = _group_ids([ex_codes[:, j] for j in range(len(keys))], list(ex_cards), n)
        group, uniq = pd.factorize(group)
        G = len(uniq)
    return fk, Fk, group, G


def _household_risk(df: pd.DataFrame, household: str, rk: np.ndarray) -> np.ndarray:
    """Every record's household risk (sdcMicro's ``measure_risk(hid=)``): one minus the
    chance that no member of its household is re-identified, from the records' risks ``rk``.
    """
    h = df[household]
    if h.isna().any():
        raise InputError(
            f"household column '{household}': {int(h.isna().sum())} record(s) have "
            "no household id; give every record one (a person living alone is "
            "a household of one)"
        )
    hid, hu = pd.factorize(h)
    with np.errstate(divide="ignore"):
        logsurv = np.bincount(hid, weights=np.log1p(-np.minimum(rk, 1.0)), minlength=len(hu))
    hh = 1.0 - np.exp(logsurv)
    return hh[hid]


def _ldiversity_summary(
    df: pd.DataFrame, sensitive: list[str], group: np.ndarray, G: int, c: float
) -> tuple[dict, dict]:
    """l-diversity of each sensitive column over the exact key combinations ``group``: the
    summary :attr:`RiskReport.l_diversity` shows and the per-record values.
    """
    ldiv, ldiv_rec = {}, {}
    for s in sensitive:
        per = _ldiversity(group.astype(np.int64), G, df[s], c)
        ldiv_rec[s] = per
        ldiv[s] = {
            "distinct_min": int(per["distinct"].min()),
            "records_l1": int(np.count_nonzero(per["distinct"] == 1)),
            "entropy_min": float(per["entropy"].min()),
            "records_entropy_lt_2": int(np.count_nonzero(per["entropy"] < 2)),
            "recursive_min": int(per["recursive"].min()),
            "recursive_c": float(c),
        }
    return ldiv, ldiv_rec


def release_with_household_ids(result: Any, household: str) -> pd.DataFrame:
    """The release of ``result`` with the ORIGINAL household id of every released record in
    column ``household``, so that the household risk of the release can be assessed ("after",
    next to the original's "before") when the household id itself is not released (issue 23
    §3).  Private: for the operator's eyes and private reports, never for a public file.

    >>> import pandas as pd
    >>> from dpstudio import engine
    >>> df = pd.DataFrame({"hh": [1, 1, 2, 2, 3, 3], "sex": [1, 2, 1, 2, 1, 1]})
    >>> res = engine.protect(df, "recode", {"hh": "household"}, merge={"sex": "1+2:9"}, seed=1)
    >>> "hh" in res.data.columns, sorted(release_with_household_ids(res, "hh")["hh"])
    (False, [1, 1, 2, 2, 3, 3])
    """
    if household in result.data.columns:
        return result.data
    original = result.aligned_original()
    if household not in original.columns:
        raise InputError(f"household column {household!r} is not in the original data")
    out = result.data.copy(deep=False)
    out[household] = original[household].to_numpy()
    return out
