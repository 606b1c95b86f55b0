"""ARX's re-identification risk models: prosecutor, journalist and marketer risk.

The three attacker models of El Emam ("Guide to the De-Identification of Personal Health
Information", 2013) as ARX computes them (``org.deidentifier.arx.risk.RiskModelSampleSummary``,
``RiskModelSampleRisks``), from the sample frequency ``f_k`` of each record's key combination
and the population frequency ``F_k``:

* **prosecutor** (the attacker knows the person is in the file): record risk ``1/f_k``;
  highest risk ``1/min f_k``; average risk (ARX's "success rate") ``#classes / n`` = the mean
  of ``1/f_k`` over records; share of records with ``1/f_k > threshold``;
* **journalist** (the attacker knows the person is in the population): record risk
  ``1/F_k``; highest ``1/min F_k``; average ``max(#classes / sum_classes F_k,
  sum_classes (f_k / F_k) / n)``; share of records with ``1/F_k > threshold``;
* **marketer** (re-identify as many records as possible): ``sum_classes (f_k / F_k) / n``
  (journalist-marketer; it is ``#classes / n`` -- prosecutor-marketer -- when F_k = f_k).

ARX takes F_k from a population table that contains the sample (a "research subset").  A
survey has none; we take sdcMicro's estimate instead: ``F_k`` = the sum of the sampling
weights of the records of the combination (``freqCalc``'s Fk, the Horvitz--Thompson
estimate).  Without a weight the file is its own population (F_k = f_k, ARX without a
subset) and journalist = prosecutor.

Written per record, the class sums become record means (sum over a class of f_k records of
1/f_k is 1), which also defines them when a missing key value matches any value (sdcMicro's
rule, our default ``missing="any"``: the f_k are then not the sizes of a partition):
``#classes = sum_i 1/f_i`` and ``sum_classes F_k = sum_i F_i / f_i``.  With
``missing="category"`` (a missing value is a category, as ARX treats its suppressed ``*``)
the figures are exactly ARX's, except that ARX leaves out records whose keys are all
suppressed and we keep them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpstudio.engine.params import as_float, in_interval, interval_text, invalid_value

__all__ = ["reid_models", "check_threshold", "ARX_DEFAULT_THRESHOLD"]

#: ARX's default threshold for the highest acceptable record risk (``ModelRisk``: 0.2).
ARX_DEFAULT_THRESHOLD = 0.2


def check_threshold(value: Any) -> float:
    """A record-risk threshold: a float in [0, 1]."""
    c = f"a float in the range {interval_text(0.0, 1.0)} (a record risk)"
    v = as_float(value, "threshold", None, c)
    if not in_interval(v, 0.0, 1.0):
        raise invalid_value("threshold", None, c, value)
    return v


def _summary(risk: np.ndarray, threshold: float) -> dict:
    hi = float(risk.max())
    return {
        "highest": hi,
        "records_at_highest": int(np.count_nonzero(risk == hi)),
        "records_above_threshold": int(np.count_nonzero(risk > threshold)),
        "share_above_threshold": float(np.count_nonzero(risk > threshold) / len(risk)),
    }


def reid_models(fk: np.ndarray, Fk: np.ndarray | None, *, threshold: float = ARX_DEFAULT_THRESHOLD) -> dict:
    """Prosecutor, journalist and marketer risk (formulas in the module notes).

    Parameters
    ----------
    fk : array
        Sample frequency of every record's key combination (at least 1).
    Fk : array or None
        Estimated population frequency of every record's combination (the sum of the
        sampling weights); None: the file is the population (F_k = f_k).
    threshold : float
        Record risk above which a record counts as at risk (ARX's default 0.2).

    Returns
    -------
    dict
        ``{"threshold", "population", "prosecutor": {...}, "journalist": {...},
        "marketer": {...}}``.
    """
    t = check_threshold(threshold)
    f = np.asarray(fk, dtype=np.float64)
    if len(f) == 0:
        raise ValueError("no records")
    F = f if Fk is None else np.asarray(Fk, dtype=np.float64)
    rp, rj = 1.0 / f, 1.0 / F
    classes = float(rp.sum())  # = number of classes when the f_k partition the file
    pros = _summary(rp, t)
    pros["average"] = classes / len(f)
    jour = _summary(rj, t)
    marketer = float(rj.mean())  # sum over classes of f_k/F_k, divided by n
    jour["average"] = max(classes / float((F / f).sum()), marketer)
    return {
        "threshold": t,
        "population": "sum of sampling weights (F_k)" if Fk is not None else "the file itself (F_k = f_k)",
        "prosecutor": pros,
        "journalist": jour,
        "marketer": {"average": marketer, "prosecutor_marketer": pros["average"]},
    }
