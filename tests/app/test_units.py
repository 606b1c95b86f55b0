"""Pure helpers of the app: number parsing, Pareto front, project files, measures."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


import json
import os
import stat

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstudio import engine
from dpstudio.app import project
from dpstudio.app.widgets.explore_panel import pareto_front, parse_numbers
from dpstudio.app.widgets.results_panel import correlation_difference, flatten_measures


def test_parse_numbers():
    assert parse_numbers("2-5, 10, 20:40:10", integer=True) == [2, 3, 4, 5, 10, 20, 30, 40]
    assert parse_numbers("0.1; 1 10") == [0.1, 1.0, 10.0]
    with pytest.raises(ValueError):
        parse_numbers("2.5", integer=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 100)), min_size=1, max_size=60))
def test_pareto_front_is_exactly_the_non_dominated_set(pts):
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    front = set(pareto_front(x, y).tolist())
    for i in range(len(x)):
        dominated = np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i])))
        if dominated:
            assert i not in front
    # every non-dominated point is on the front or an exact duplicate of one
    for i in range(len(x)):
        dominated = np.any((x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i])))
        if not dominated:
            assert any(x[j] == x[i] and y[j] == y[i] for j in front)
    fx = x[sorted(front, key=lambda j: x[j])]
    assert np.all(np.diff(fx) >= 0)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_correlation_difference_zero_for_identity(seed):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=list("abc"))
    cols, d = correlation_difference(df, df.copy(), ["a", "b", "c"])
    assert cols == ["a", "b", "c"]
    assert np.allclose(d, 0)


def test_flatten_measures():
    rows, table = flatten_measures(
        {"sse_raw": 1.5, "rl": 2.0, "delta_mean": {"a": 0.1, "b": 0.2}, "warnings": []}
    )
    assert ("Record linkage RL (%)", "2") in rows
    assert table.loc["b", "delta_mean"] == 0.2
    assert not any(r[0] == "warnings" for r in rows)


def test_project_roundtrip_private(tmp_path):
    from dpstudio.engine.recipe import Recipe

    rec = Recipe(
        input_path="/data/x.csv",
        read_options={"sep": ";"},
        roles={"a": "eps-quasi", "b": "other"},
        domains={"a": (0.0, 10.0)},
        hierarchies={"c": {"generated": True}},
        method="ir-dp",
        params={"k": np.int64(5), "epsilon": 1.0},
        seed=123,
        sweep={"ks": "2-5"},
    )
    p = tmp_path / "p.dpsproj"
    project.save(p, rec)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    d = json.loads(p.read_text())
    assert d["schema_version"] == project.SCHEMA_VERSION
    assert d["roles"] == {"a": "eps-quasi"}
    assert d["params"] == {"k": 5, "epsilon": 1.0}
    assert d["domains"] == {"a": [0.0, 10.0]}
    back = project.load(p)
    assert back.seed == 123 and back.roles == {"a": "eps-quasi"}  # the seed back as an int
    assert back.domains == {"a": (0.0, 10.0)} and back.sweep == {"ks": "2-5"}
    (tmp_path / "bad.dpsproj").write_text("{not json")
    with pytest.raises(engine.InputError):
        project.load(tmp_path / "bad.dpsproj")
    (tmp_path / "new.dpsproj").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(engine.InputError, match="newer"):
        project.load(tmp_path / "new.dpsproj")
