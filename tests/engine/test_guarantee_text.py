"""Guarantee sentences name every column they do not cover (issue 11 defect 9), also in the
published metadata and release note."""

import re

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.report import render_release_note


def _frame(n=60, extra=9, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.uniform(0, 100, n), "y": rng.uniform(0, 100, n)})
    for i in range(extra):
        df[f"other_column_{i}"] = rng.integers(0, 5, n)
    df["sampling_weight"] = rng.uniform(1, 3, n)
    return df


@pytest.mark.parametrize(
    "method,params",
    [
        ("laplace", {"epsilon": 1.0}),  # "Not covered: ..." clause
        ("insensitive-dp", {"k": 5, "epsilon": 1.0}),  # scoped sentence of a clustered DP release
        ("insensitive-dp", {"k": 5, "epsilon": 1.0, "layout": "separate-tables"}),  # not released
    ],
)
def test_sentence_names_every_column_it_does_not_cover(method, params):
    df = _frame()
    others = [c for c in df.columns if c not in ("x", "y")]
    res = engine.protect(
        df, method, {"x": "eps-quasi", "y": "eps-quasi"}, {"x": (0, 100), "y": (0, 100)}, seed=1, **params
    )
    assert not re.search(r"and \d+ more", res.guarantee)
    for c in others:
        assert c in res.guarantee, c
        assert c in res.public_metadata()["guarantee"], c
    note = render_release_note(res)
    for c in others:
        assert c in note, c


def _shipped_methods() -> list[dict]:
    """The methods of the listed modules (tests may register test-only methods)."""
    import importlib

    from dpstudio.engine.registry import METHOD_MODULES, module_specs

    return [s.to_dict() for mod in METHOD_MODULES for s in module_specs(importlib.import_module(mod))]


def test_method_papers_cite_publications_not_internal_numbers():
    """Issue 11 defect 10: "Paper: thesis §2.8 (004)" was an internal reference."""
    for m in _shipped_methods():
        paper = m["paper"]
        assert not re.search(r"\(00\d\)|papers? 00\d", paper), (m["id"], paper)
        assert re.search(r"\b(19|20)\d\d\b", paper), (m["id"], paper)  # a year
        assert "“" in paper and "”" in paper, (m["id"], paper)  # a title


def test_report_shows_unset_parameters_plainly():
    """Issue 11 defect 10: "epsilon None" / "weights None" in the report."""
    from dpstudio.engine.report import render_assessment

    df = _frame(extra=0)
    prep = engine.prepare(
        df, "insensitive-dp", {"x": "eps-quasi", "y": "eps-quasi"}, {"x": (0, 100), "y": (0, 100)}, k=5
    )
    res = engine.run_prepared(prep, rng=np.random.default_rng(1), epsilon=None)  # sweep baseline
    res.params["weights"] = None
    assert res.params["epsilon"] is None
    for page in (render_release_note(res), render_assessment(res, None)):
        assert "None" not in page
        assert "no noise (baseline)" in page
