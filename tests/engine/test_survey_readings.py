"""Issue 24 §7: measures and readings must fit the method and the column types -- no Δ mean
for a column typed categorical, record linkage on a k-anonymous release read against 1/k
(7.75 % was read as '1.1e+03× chance').
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio import engine
from dpstudio.engine.measures.readings import reading


def test_no_delta_for_columns_typed_categorical():
    rng = np.random.default_rng(1)
    n = 600
    df = pd.DataFrame(
        {"age": rng.integers(18, 91, n), "educ": rng.integers(1, 8, n), "PID": rng.integers(0, 7, n)}
    )
    roles = {"age": "k-quasi", "educ": "k-quasi", "PID": "k-quasi"}
    types = {"educ": "categorical", "PID": "ordinal"}
    res = engine.protect(df, "local-suppression", roles, {}, k=3, seed=1, types=types)
    a = engine.assess(res, level="full", weighted=False)
    ev = a.measures if hasattr(a, "measures") else a
    dm = ev.get("delta_mean") or {}
    assert "educ" not in dm and "PID" not in dm  # codes of categories have no mean
    assert "age" in dm


def test_rl_reading_on_a_k_anonymous_release():
    t = reading("rl", 7.75, {"n": 14_000, "k": 3, "k_anonymous": 3})
    assert "× chance" not in t and "33.3 %" in t and "at or below that" in t
    t = reading("rl", 50.0, {"n": 14_000, "k": 3, "k_anonymous": 3})
    assert "1.5× that" in t
    # not k-anonymous: the 1/n chance level as before
    assert "25× chance" in reading("rl", 2.5, {"n": 1000})
