"""A sweep's progress moves inside a cell (issue 24 §6, issue 27 §4: a long MDAV sweep showed
0 % until its first point): the clustering reports as it goes, the sweep maps it into the
cell's share, and nothing is reported backwards or past the cell before the point arrives.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.algorithms import microaggregation as MA


def _numbers(n: int = 6000, m: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({f"x{i}": np.round(rng.gamma(2.0, 1000.0, n), 1) for i in range(m)})


def _events(df, method, ks, **kw) -> list[tuple[str, float]]:
    events: list[tuple[str, float]] = []
    roles = {c: "k-quasi" for c in df.columns}
    for pt in engine.sweep(
        df, method, roles, ks=ks, epsilons=[], progress=lambda f: events.append(("progress", f)), **kw
    ):
        events.append(("point", pt.index))
    return events


def _before_first_point(events) -> list[float]:
    first = events.index(("point", 0))
    return [f for kind, f in events[:first] if kind == "progress"]


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_mdav_sweep_reports_progress_inside_the_first_cell(monkeypatch, backend):
    if backend == "numpy":
        monkeypatch.setenv("DPSTUDIO_MDAV_NUMPY", "1")
    else:
        pytest.importorskip("numba")
        monkeypatch.delenv("DPSTUDIO_MDAV_NUMPY", raising=False)
        monkeypatch.setattr(MA, "_kernel_pays", lambda n, m, k: True)
    ks = [2, 3, 4, 5]
    events = _events(_numbers(), "mdav", ks, measures=("sse",))
    early = _before_first_point(events)
    share = 1 / len(ks)  # the first cell's share of the sweep
    assert len(early) >= 3, early  # several steps before the first cell's point
    assert 0 < early[0] < share
    assert max(early) <= share + 1e-12
    progress = [f for kind, f in events if kind == "progress"]
    assert progress == sorted(progress) and progress[-1] == 1.0


def test_a_slow_cell_reports_its_own_progress(monkeypatch):
    """A fake slow clustering that reports 10 %, 20 % … 90 %: each report reaches the caller
    (within the cell's share) before the point is yielded.
    """
    real = MA.mdav
    seen: list[float] = []

    def slow(X, k, *, progress=None, **kw):
        for i in range(1, 10):
            if progress is not None:
                progress(i / 10)
            seen.append(i / 10)
        return real(X, k, **kw)

    monkeypatch.setattr(MA, "mdav", slow)
    ks = [2, 3]
    events = _events(_numbers(400), "mdav", ks, measures=("sse",))
    early = _before_first_point(events)
    assert seen and len(early) >= 5
    # the method's progress fills 80 % of the cell's share: its 90 % is 0.36 of the sweep,
    # reported before the method's end (0.4: the measures follow) and the cell's (0.5)
    inside = [f for f in early if f < 0.8 / len(ks) - 1e-9]
    assert len(inside) >= 4 and inside[-1] == pytest.approx(0.8 * 0.9 / len(ks), abs=0.01)
    assert max(early) <= 1 / len(ks) + 1e-12
