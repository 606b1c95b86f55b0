"""The cases of ``tests/engine/test_assess_golden.py``: protect → measure as the command line,
the app and the sweep did it before ``engine.assess`` (issue 22 §2), under pinned seeds.

``golden/assess.json`` holds the figures the OLD paths computed (captured by commit
4172337 of the branch t-chain, before any change to them: ``cli._evaluate_result``,
``app.compute.protect_and_evaluate``, ``engine.sweep``); the test checks that the one assess
path gives the same numbers, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tests.conftest import shared_path

SEED = 0x5EED5EED5EED5EED5EED5EED5EED5EED

ADULT_H = shared_path("adult", "hierarchies")


def census() -> pd.DataFrame:
    return pd.read_csv(shared_path("census.csv"))


def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


def adult() -> pd.DataFrame:
    df = pd.read_csv(shared_path("adult", "adult.csv"), sep=";")
    hours = pd.read_csv(shared_path("adult", "adult_hours-per-week.csv"))["hours-per-week"]
    return df.assign(**{"hours-per-week": hours.to_numpy()}).head(3000)


#: name -> (data, method, roles, domains, hierarchies, params)
PROTECT_CASES = {
    "census-ir-dp": (
        census,
        "ir-dp",
        {"FICA": "eps-quasi", "FEDTAX": "eps-quasi", "POTHVAL": "confidential"},
        {"FICA": (0.0, 12000.0), "FEDTAX": (0.0, 32000.0)},
        {},
        {"k": 10, "epsilon": 1.0},
    ),
    "census-mdav": (
        census,
        "mdav",
        {"FICA": "k-quasi", "FEDTAX": "k-quasi", "INTVAL": "k-quasi", "POTHVAL": "confidential"},
        {},
        {},
        {"k": 5},
    ),
    "census-laplace": (
        census,
        "laplace",
        {"FICA": "eps-quasi", "FEDTAX": "eps-quasi", "AGI": "confidential"},
        {"FICA": (0.0, 12000.0), "FEDTAX": (0.0, 32000.0)},
        {},
        {"epsilon": 2.0, "budget": "per-attribute"},
    ),
    "free1-local-suppression": (
        free1,
        "local-suppression",
        {
            "SEX": "k-quasi",
            "AGE": "k-quasi",
            "MARSTAT": "k-quasi",
            "WEIGHT": "weight",
            "EDUC1": "confidential",
        },
        {},
        {},
        {"k": 3},
    ),
    "adult-k-eps": (
        adult,
        "k-eps",
        {"age": "k-quasi", "sex": "k-quasi", "hours-per-week": "eps-quasi"},
        {"hours-per-week": (0.0, 100.0)},
        {"age": str(ADULT_H / "adult_hierarchy_age.csv"), "sex": str(ADULT_H / "adult_hierarchy_sex.csv")},
        {"k": 5, "epsilon": 1.0},
    ),
    "census-t-close-dp": (
        census,
        "t-close-dp",
        {"FICA": "k-quasi", "FEDTAX": "confidential"},
        {},
        {},
        {"epsilon": 1.0},
    ),
}

#: name -> (data, method, roles, domains, hierarchies, ks, epsilons, repeats, params)
SWEEP_CASES = {
    "census-ir-dp": (
        census,
        "ir-dp",
        {"FICA": "eps-quasi", "FEDTAX": "eps-quasi"},
        {"FICA": (0.0, 12000.0), "FEDTAX": (0.0, 32000.0)},
        {},
        [2, 5, 10],
        [0.5, 2.0],
        3,
        {},
    ),
    "census-mdav": (
        census,
        "mdav",
        {"FICA": "k-quasi", "FEDTAX": "k-quasi"},
        {},
        {},
        [2, 7],
        [],
        1,
        {},
    ),
    "free1-local-suppression": (
        free1,
        "local-suppression",
        {"SEX": "k-quasi", "AGE": "k-quasi", "MARSTAT": "k-quasi", "WEIGHT": "weight"},
        {},
        {},
        [2, 3],
        [],
        1,
        {},
    ),
    "census-laplace": (
        census,
        "laplace",
        {"FICA": "eps-quasi", "FEDTAX": "eps-quasi"},
        {"FICA": (0.0, 12000.0), "FEDTAX": (0.0, 32000.0)},
        {},
        [],
        [0.5, 1.0],
        4,
        {},
    ),
}


def plain(v):
    """``v`` as JSON that keeps every float bit (NaN and ±inf as text, arrays as lists)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    return v
