"""The three survey methods as steps of a chain (issue 23 §1 with §2's engine): their declared
:class:`~dpstudio.engine.guarantee.Effects` decide what the composed guarantee says -- a fixed
recoding or top-code before a DP step keeps its claim, a quantile one (data-dependent) loses
it; PRAM of a key after local suppression ends the k-anonymity, its plausible deniability
stays; the four-step survey chain recode → top-code → suppress → PRAM runs end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.chain import protect_chain
from dpstudio.engine.guarantee import Model
from tests.conftest import shared_path

SEED = 20261127
KEYS = {"SEX": "k-quasi", "AGE": "k-quasi", "MARSTAT": "k-quasi"}
INCOME = {"INCOME": (0.0, 2_000_000.0)}


@pytest.fixture(scope="module")
def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


@pytest.mark.parametrize("top, dp_kept", [("1500000", True), ("p99", False)])
def test_top_code_before_laplace_fixed_keeps_dp_quantile_loses_it(free1, top, dp_kept):
    res = protect_chain(
        free1,
        [
            {"method": "top-bottom-coding", "params": {"top": {"INCOME": top}}},
            {"method": "laplace", "params": {"epsilon": 1.0}},
        ],
        {"INCOME": "eps-quasi"},
        INCOME,
        seed=SEED,
    )
    g = res.guarantee_info
    lost = [c.text for c in g.clauses if c.code == "lost"]
    if dp_kept:
        assert g.model is Model.EPSILON_DP and not lost and g.epsilon_total == 1.0
    else:
        assert g.model is not Model.EPSILON_DP and not res.is_dp
        assert len(lost) == 1 and "step 2 (laplace)" in lost[0] and "step 1 (top-bottom-coding)" in lost[0]


@pytest.mark.parametrize("breaks", ["0,500000,1000000,2000000", "quantile:4"])
def test_recode_of_another_column_never_touches_dp(free1, breaks):
    """Recoding INCOME (fixed or quantile breaks) before Laplace on MONEY: the DP step neither
    reads nor protects INCOME, so its claim holds either way (intervals are text: a DP step
    cannot run on a recoded column itself)."""
    res = protect_chain(
        free1,
        [
            {"method": "recode", "params": {"breaks": {"INCOME": breaks}}},
            {"method": "laplace", "params": {"epsilon": 1.0}},
        ],
        {"MONEY": "eps-quasi"},
        {"MONEY": (0.0, 2_000_000.0)},
        seed=SEED,
    )
    assert res.guarantee_info.model is Model.EPSILON_DP
    assert not [c for c in res.guarantee_info.clauses if c.code == "lost"]


def test_the_survey_chain_recode_topcode_suppress_pram(free1):
    steps = [
        {"method": "recode", "params": {"breaks": {"AGE": "0,15,30,45,60,120"}}},
        {"method": "top-bottom-coding", "params": {"top": {"INCOME": "p99"}}},
        {"method": "local-suppression", "params": {"k": 3}},
        {"method": "pram", "params": {"variables": "MARSTAT"}},
    ]
    res = protect_chain(
        free1,
        steps,
        {**KEYS, "WEIGHT": "weight"},
        seed=SEED,
        types={c: "categorical" for c in ("SEX", "MARSTAT")},
    )
    g = res.guarantee_info
    assert g.model is Model.PLAUSIBLE_DENIABILITY and g.k is None
    lost = [c.text for c in g.clauses if c.code == "lost"]
    assert len(lost) == 1 and "step 3 (local-suppression)" in lost[0] and "MARSTAT" in lost[0]
    for n, name in enumerate(["recode", "top-bottom-coding", "local-suppression", "pram"], 1):
        assert f"Step {n} ({name})" in res.guarantee
    assert "transition_matrix" in res.tables
    assert set(res.data["AGE"].dropna().astype(str)) <= {
        "[0, 15]",
        "(15, 30]",
        "(30, 45]",
        "(45, 60]",
        "(60, 120]",
    }
    aligned = res.aligned_original()
    q = float(np.quantile(free1["INCOME"], 0.99))
    assert res.data["INCOME"].max() == pytest.approx(q)
    assert res.data["WEIGHT"].equals(aligned["WEIGHT"])


def test_pram_then_suppression_keeps_k_anonymity(free1):
    """PRAM first, suppression after: the k-anonymity is of the released (PRAMmed) keys.
    (chain.py lets only the last step release extra tables: a PRAM step before the last
    keeps its matrix private here -- reported to t-chain.)"""
    res = protect_chain(
        free1,
        [
            {"method": "pram", "params": {"variables": "MARSTAT", "publish_matrix": False}},
            {"method": "local-suppression", "params": {"k": 3}},
        ],
        {**KEYS, "WEIGHT": "weight"},
        seed=SEED,
        types={c: "categorical" for c in KEYS},
    )
    g = res.guarantee_info
    models = [p.model for p in g.parts]
    assert Model.K_ANONYMITY in models and Model.PLAUSIBLE_DENIABILITY in models
