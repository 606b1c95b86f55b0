"""The synthetic 200,000-person household file of the app benchmarks (bench_app_workflow.py,
probe_open_gil.py): household ids as texts, region, sex, age, income, weight, free comments."""

import numpy as np
import pandas as pd

COMMENTS = ["à l'école", "Zürich — Ångström", "niño", "", "café crème", "0012 Straße"]


def household(n: int, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hh = np.repeat(np.arange(1, n // 3 + 2), 3)[:n]
    return pd.DataFrame(
        {
            "hh_id": [f"{h:06d}" for h in hh],
            "region": rng.choice([11, 12, 21, 22, 31], n, p=[0.3, 0.25, 0.2, 0.15, 0.1]),
            "sex": rng.choice([1, 2], n),
            "age": rng.integers(16, 96, n),
            "income": np.round(rng.lognormal(10, 0.8, n), 2),
            "weight": np.round(rng.uniform(50, 400, n), 3),
            "comment": rng.choice(COMMENTS, n),
        }
    )
