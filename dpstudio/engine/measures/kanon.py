"""k-anonymity of a release: equivalence classes on the k-quasi-identifiers and their sizes
(docs/measures.md "k-anonymity check").

The one implementation of the class count: the k-anonymity measure, the (k, ε) measures
(:mod:`.keps`) and the generaliser's own release check
(:func:`dpstudio.engine.algorithms.generalization.verify_k_anonymity`) all call
:func:`class_codes`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd


def class_codes(columns: Iterable) -> np.ndarray:
    """Equivalence-class index (0 … classes − 1) of every record, given the record values of
    each k-quasi-identifier (Series or 1-d arrays of equal length).  Values are compared as
    they are (a missing value is a value of its own); no column: one class.

    >>> class_codes([[1, 1, 2, 2], ["a", "b", "a", "a"]]).tolist()
    [0, 1, 2, 2]
    """
    codes: np.ndarray | None = None
    for col in columns:
        s = col if isinstance(col, pd.Series) else pd.Series(np.asarray(col, dtype=object), dtype=object)
        cc, uniq = pd.factorize(s, use_na_sentinel=False)
        cc = cc.astype(np.int64)
        if codes is None:
            codes = cc
            continue
        # combine, then renumber densely (keeps the combined key below n · (m + 1))
        codes = pd.factorize(codes * (len(uniq) + 1) + cc)[0].astype(np.int64)
    return np.zeros(0, dtype=np.int64) if codes is None else codes


def class_sizes(columns: Iterable, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, sizes)``: :func:`class_codes` and the size of each class."""
    cols = list(columns)
    if not cols:
        codes = np.zeros(int(n or 0), dtype=np.int64)
    else:
        codes = class_codes(cols)
    return codes, np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)


def k_anonymity_check(protected: pd.DataFrame, k_quasis: Iterable[str], k: int) -> dict[str, float]:
    """Smallest equivalence class on ``k_quasis`` and the share of records in classes < k.

    >>> import pandas as pd
    >>> k_anonymity_check(pd.DataFrame({"a": [1, 1, 2]}), ["a"], 2)["share_below_k"]
    0.3333333333333333
    """
    from dpstudio.engine.measures._base import _col

    q = [str(c) for c in k_quasis]
    n = len(protected)
    if not q or n == 0:
        return {"min_class_size": n, "classes": 1 if n else 0, "records_below_k": 0, "share_below_k": 0.0}
    codes, sizes = class_sizes(_col(protected, c) for c in q)
    below = int((sizes[codes] < int(k)).sum())
    return {
        "min_class_size": int(sizes.min()),
        "classes": int(sizes.size),
        "records_below_k": below,
        "share_below_k": below / n,
    }


__all__ = ["class_codes", "class_sizes", "k_anonymity_check"]
