import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# CI runs the property tests with a fixed sequence of examples (a red CI blocks a landing,
# so it must not depend on luck); local runs keep exploring new random examples.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
RESOURCES = ROOT / "resources"


@pytest.fixture(scope="session")
def census() -> pd.DataFrame:
    """The CASC Census sample bundled in resources/ (1,080 x 13, integers)."""
    return pd.read_csv(ROOT / "resources" / "census.csv")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def shared_path(*parts: str) -> Path:
    """A reference data file shipped in the repository under ``resources/`` (e.g. ``"adult", "adult.csv"``).

    Tests never look outside the repository (a fresh clone must run every test) and never skip
    for want of data: a missing file fails the test.
    """
    p = RESOURCES.joinpath(*parts).resolve()
    if not p.is_relative_to(ROOT):
        raise ValueError(f"test data must live inside the repository, not {p}")
    if not p.exists():
        raise FileNotFoundError(f"reference data missing from the repository: {p}")
    return p
