"""k-anonymity of a release: equivalence classes on the k-quasi-identifiers and their sizes
(docs/measures.md "k-anonymity check").

The class count itself is :func:`dpstudio.engine.algorithms.frequencies.class_codes`, the one
implementation that this measure, the (k, ε) measures (:mod:`.keps`) and the generaliser's own
release check (:func:`dpstudio.engine.algorithms.generalization.verify_k_anonymity`) call.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from dpstudio.engine.algorithms.frequencies import class_sizes


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


__all__ = ["k_anonymity_check"]
