"""The one assess path gives the figures of the three old ones (issue 22 §2), bit for bit.

``golden/assess.json`` was written by the OLD code (``scripts/capture_assess_golden.py`` of
commit 4172337, removed since: ``cli._evaluate_result``, the app's ``compute.protect_and_evaluate``
and its correlation matrix, ``engine.sweep``); see ``tests/engine/_assess_cases.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpstudio import engine
from tests.engine._assess_cases import PROTECT_CASES, SEED, SWEEP_CASES, plain

GOLDEN = json.loads((Path(__file__).parent / "golden" / "assess.json").read_text())


def _result(name):
    data, method, roles, domains, hier, params = PROTECT_CASES[name]
    return engine.protect(data(), method, roles, domains, seed=SEED, hierarchies=hier or None, **params)


@pytest.mark.parametrize("name", sorted(PROTECT_CASES))
def test_assess_equals_the_old_cli_and_app_figures(name):
    res = _result(name)
    want = GOLDEN["protect"][name]
    summary = engine.assess(res, level="summary")
    assert plain(summary.measures) == want["cli_summary"] and not summary.notices
    full = engine.assess(res, level="full")
    assert plain(full.measures) == want["cli_full"] == want["app"]
    cols, mat = full.corr_difference
    assert list(cols) == want["app_corr"]["columns"] and plain(mat) == want["app_corr"]["matrix"]


@pytest.mark.parametrize("name", sorted(SWEEP_CASES))
def test_sweep_through_assess_equals_the_old_sweep(name):
    data, method, roles, domains, hier, ks, eps, reps, params = SWEEP_CASES[name]
    pts = list(
        engine.sweep(
            data(),
            method,
            roles,
            domains,
            ks=ks,
            epsilons=eps,
            repeats=reps,
            seed=SEED,
            hierarchies=hier or None,
            **params,
        )
    )
    got = [
        {
            "k": p.k,
            "epsilon": p.epsilon,
            "values": plain(p.values),
            "runs": plain(p.runs),
            "skipped": p.skipped,
        }
        for p in pts
    ]
    assert got == GOLDEN["sweep"][name]


def test_summary_leaves_record_linkage_out_above_the_limit():
    res = _result("census-ir-dp")
    a = engine.assess(res, level="summary", rl_limit=100)
    assert "rl" not in a.measures and "sse_raw" in a.measures
    assert [n.code for n in a.notices] == ["rl-not-computed"] and not a.notices[0].public
    assert "rl" in engine.assess(res, level="full").measures  # full: no limit unless asked
