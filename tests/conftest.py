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
SHARED = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def census() -> pd.DataFrame:
    """The CASC Census sample bundled in resources/ (1,080 x 13, integers)."""
    return pd.read_csv(ROOT / "resources" / "census.csv")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def shared_path(*parts: str) -> Path:
    """A file under ../shared/data (skip the test when the folder is absent)."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"reference data not available: {p}")
    return p
