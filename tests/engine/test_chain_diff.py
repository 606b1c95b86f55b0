"""The chain's test of which columns a step changed (``_same_after``) equals the plain pandas
comparison it replaces (``_same(after, before.iloc[rows])``) on every dtype and row map."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.chain import _same, _same_after


def _columns(rng: np.random.Generator, n: int) -> list[pd.Series]:
    f = rng.normal(size=n)
    f[rng.random(n) < 0.2] = np.nan
    z = np.where(rng.random(n) < 0.5, 0.0, -0.0)
    return [
        pd.Series(rng.integers(0, 3, n)),
        pd.Series(rng.integers(0, 3, n).astype(np.uint8)),
        pd.Series(f),
        pd.Series(z),
        pd.Series(rng.random(n) < 0.5),
        pd.Series(rng.choice(["a", "b", None], n), dtype=object),
        pd.Series(rng.integers(0, 3, n)).astype("Int64"),
        pd.Series(rng.choice(["a", "b"], n)).astype("category"),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_same_after_equals_pandas_comparison(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    for before in _columns(rng, n):
        for rows in (None, rng.permutation(n), rng.permutation(n)[: n // 2]):
            taken = before if rows is None else before.iloc[rows]
            candidates = [taken.reset_index(drop=True), before.reset_index(drop=True)]
            changed = taken.reset_index(drop=True).copy()
            changed.iloc[int(rng.integers(0, len(changed)))] = before.iloc[int(rng.integers(0, n))]
            candidates.append(changed)
            if before.dtype.kind == "f":
                candidates.append(taken.fillna(0.5).reset_index(drop=True))
            candidates.append(taken.astype(object).reset_index(drop=True))
            for after in candidates:
                assert _same_after(after, before, rows) == _same(after, taken), (before.dtype, after.dtype)
