"""Classification utility (paper 001 §4.2; docs/measures.md "Classification utility").

Does a model learnt from the release predict as well as one learnt from the original data?

* a random forest (scikit-learn) is trained on the first 66 % of the **protected** records
  (features and class attribute as released) and tested on the remaining **original** records;
* the same model (same settings and seed) is trained on the first 66 % of the **original**
  records and tested on the same original records -- the reference;
* reported: the F-measure of each class for both, their macro averages and the ratio
  ``f1_macro_protected / f1_macro_original`` (1 = no loss).

Records are compared position by position (row j of the release protects row j of the
original: pass ``result.aligned_original()``).  The split is by position, as in the paper;
shuffle the file beforehand if its order is not random.

The class attribute: a categorical one is used as is; a numeric one is binarised, by
``binarise="median"`` (class 1 = at least the original median), ``"mean"`` or a number
(the threshold).  Categorical features are coded with codes shared by both files; numeric
ones are used as numbers; missing values (suppressed cells) are passed to the forest as
missing (scikit-learn's forests handle them).  Training records whose released class is
missing are left out.  Deterministic for a given ``seed``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.errors import InputError, ParameterError

__all__ = ["classification_utility", "TRAIN_SHARE"]

#: Share of records the models are trained on (paper 001 §4.2).
TRAIN_SHARE = 0.66


def _binarise(orig: pd.Series, prot: pd.Series, how: Any, name: str) -> tuple[np.ndarray, np.ndarray, list]:
    x = pd.to_numeric(orig, errors="coerce").to_numpy(dtype=np.float64)
    y = pd.to_numeric(prot, errors="coerce").to_numpy(dtype=np.float64)
    if how in (None, "median"):
        thr = float(np.nanmedian(x))
    elif how == "mean":
        thr = float(np.nanmean(x))
    else:
        try:
            thr = float(how)
        except (TypeError, ValueError):
            raise ParameterError(
                f"The 'binarise' parameter must be 'median', 'mean' or a number "
                f"(the threshold of {name!r}). Got {how!r} instead."
            ) from None
    lab = [f"{name} < {thr:g}", f"{name} ≥ {thr:g}"]
    cx = np.where(np.isnan(x), -1, (x >= thr).astype(np.int64))
    cy = np.where(np.isnan(y), -1, (y >= thr).astype(np.int64))
    return cx, cy, lab


def _features(
    original: pd.DataFrame, protected: pd.DataFrame, cols: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    n = len(original)
    X = np.empty((n, len(cols)))
    Y = np.empty((n, len(cols)))
    for j, c in enumerate(cols):
        a, b = original[c], protected[c]
        if (
            pd.api.types.is_numeric_dtype(a)
            and not pd.api.types.is_bool_dtype(a)
            and pd.api.types.is_numeric_dtype(b)
            and not pd.api.types.is_bool_dtype(b)
        ):
            X[:, j] = a.to_numpy(dtype=np.float64, na_value=np.nan)
            Y[:, j] = b.to_numpy(dtype=np.float64, na_value=np.nan)
            continue
        # categories (or a numeric column released as text, e.g. intervals): shared codes
        both = pd.concat([a.astype(object), b.astype(object)], ignore_index=True)
        lab = both.where(both.isna(), both.astype(str))
        codes, _ = pd.factorize(lab, use_na_sentinel=True)
        codes = codes.astype(np.float64)
        codes[codes < 0] = np.nan
        X[:, j], Y[:, j] = codes[:n], codes[n:]
    return X, Y


def classification_utility(
    original: pd.DataFrame,
    protected: pd.DataFrame,
    target: str,
    features: Iterable[str] | None = None,
    *,
    binarise: Any = "median",
    categorical_target: bool | None = None,
    seed: int = 0,
    train_share: float = TRAIN_SHARE,
    n_estimators: int = 100,
) -> dict:
    """F-measure per class of a random forest trained on the release vs on the original.

    Parameters
    ----------
    original, protected : DataFrame
        Row-aligned (row j of ``protected`` protects row j of ``original``).
    target : str
        The class attribute.
    features : list of str, optional
        Predictors (default: every other column present in both files).
    binarise : "median", "mean" or a number
        How a numeric class attribute is made binary (ignored for a categorical one).
    categorical_target : bool, optional
        Force the class attribute to be treated as categorical (True) or numeric (False);
        default: categorical unless numeric with more than 10 distinct values.
    seed : int
        The forests' random_state (the result is deterministic for a seed).

    Returns
    -------
    dict
        ``classes``, ``f1_protected`` / ``f1_original`` ({class: F}), ``f1_macro_protected``,
        ``f1_macro_original``, ``f1_ratio``, ``train_records``, ``test_records``.
    """
    try:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.metrics import f1_score
    except ImportError:  # pragma: no cover - a declared dependency
        raise InputError("Classification utility needs scikit-learn: pip install scikit-learn") from None
    target = str(target)
    for what, df in (("original", original), ("protected", protected)):
        if target not in df.columns:
            raise ParameterError(
                f"The class attribute {target!r} is not a column of the {what} "
                "data; pick the attribute to predict (--class-attribute)."
            )
    if len(original) != len(protected):
        raise InputError(
            f"Classification utility compares record j with record j: the original "
            f"has {len(original)} records and the release {len(protected)}. Pass "
            "the original records aligned with the release."
        )
    if not 0 < float(train_share) < 1:
        raise ParameterError(f"train_share must be in (0, 1). Got {train_share!r}.")
    if features is None:
        pcols = {str(c) for c in protected.columns}
        features = [str(c) for c in original.columns if str(c) in pcols and str(c) != target]
    feats = [str(c) for c in features if str(c) != target]
    missing = [c for c in feats if c not in original.columns or c not in protected.columns]
    if missing:
        raise ParameterError(f"Feature column(s) {', '.join(map(repr, missing))} are not in both files.")
    if not feats:
        raise ParameterError("Classification utility needs at least one feature besides the class attribute.")
    to, tp = original[target], protected[target]
    numeric = pd.api.types.is_numeric_dtype(to) and not pd.api.types.is_bool_dtype(to)
    if categorical_target is None:
        categorical_target = not numeric or to.nunique(dropna=True) <= 10
    if categorical_target:
        both = pd.concat([to.astype(object), tp.astype(object)], ignore_index=True)
        lab = both.where(both.isna(), both.astype(str))
        codes, uniq = pd.factorize(lab, use_na_sentinel=True)
        cx, cy, names = codes[: len(to)], codes[len(to) :], [str(u) for u in uniq]
    else:
        cx, cy, names = _binarise(to, tp, binarise, target)
    X, Y = _features(original, protected, feats)
    n = len(original)
    cut = int(round(float(train_share) * n))
    if cut < 2 or n - cut < 1:
        raise InputError(f"Classification utility needs more records (got {n}).")
    test = np.arange(cut, n)
    test = test[cx[test] >= 0]
    if test.size == 0:
        raise InputError(f"No test record has a value of the class attribute {target!r}.")
    labels = sorted(set(cx[test].tolist()))

    def fit_score(F: np.ndarray, c: np.ndarray) -> np.ndarray:
        tr = np.arange(cut)
        tr = tr[c[tr] >= 0]
        if tr.size == 0 or len(set(c[tr].tolist())) < 2:
            raise InputError(
                f"The training records hold fewer than two classes of {target!r}: "
                "pick another class attribute or binarisation."
            )
        model = RandomForestClassifier(n_estimators=n_estimators, random_state=int(seed), n_jobs=1)
        model.fit(F[tr], c[tr])
        pred = model.predict(X[test])  # tested on the ORIGINAL records
        return f1_score(cx[test], pred, labels=labels, average=None, zero_division=0)

    f_prot = fit_score(Y, cy)
    f_orig = fit_score(X, cx)
    mp, mo = float(np.mean(f_prot)), float(np.mean(f_orig))
    return {
        "class_attribute": target,
        "classes": [names[i] for i in labels],
        "f1_protected": {names[i]: float(v) for i, v in zip(labels, f_prot)},
        "f1_original": {names[i]: float(v) for i, v in zip(labels, f_orig)},
        "f1_macro_protected": mp,
        "f1_macro_original": mo,
        "f1_ratio": mp / mo if mo > 0 else float("nan"),
        "train_records": cut,
        "test_records": int(test.size),
    }
