"""CI run of the settings fuzzer (issue 21): recipes, query expressions, ledgers and release
metadata end with a result or one line -- no traceback, no hang (every case under a timer), no
wrong answer (exact filter reference, disjointness checked on data, edited metadata never OK).
``SFUZZ_CASES`` / ``SFUZZ_SEED`` change the run (scripts/fuzz_campaign.py --settings runs more).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.fuzz import settings_fuzzer as F


def test_fuzz_settings_files_and_queries():
    cases = int(os.environ.get("SFUZZ_CASES", "1200"))
    seed = int(os.environ.get("SFUZZ_SEED", "21"))
    fig = F.run(cases, seed=seed)
    print(fig.line())
    assert fig.uncaught == 0, fig.failures[:5]
    assert fig.slow == 0, fig.failures[:5]
    assert fig.wrong == 0, fig.failures[:5]
    # the cases do reach the code behind the parsers, and every oracle ran
    assert all(n >= cases // 10 for n in fig.per_kind.values()), fig.per_kind
    assert fig.ok >= cases // 4 and fig.clean >= cases // 10
    assert fig.special_paths > 0 and fig.differential_checks >= cases // 10 and fig.disjoint_checks > 0


def test_the_filter_oracle_can_fail(monkeypatch):
    """A comparison that goes through a double (the old 2^53 + 1 bug) is caught."""
    from dpstudio.engine.query import parser as qparser

    real = qparser._numeric_mask

    def through_float(s, op, lit):
        return real(s, op, float(lit) if not isinstance(lit, bool) else lit)

    monkeypatch.setattr(qparser, "_numeric_mask", through_float)
    fig = F.Figures()
    with pytest.raises(F._Wrong):
        F.run_query(f"count where id == {2**53 + 1}", True, np.random.default_rng(0), fig)


def test_the_disjointness_oracle_can_fail(monkeypatch):
    """Open infinite ends (the old bug: x > 5 and x == 1e999 'disjoint') are caught on the
    frame, which holds +inf."""
    from dpstudio.engine.query import parser as qd

    monkeypatch.setattr(qd, "_atoms_disjoint", lambda a, b: True)
    fig = F.Figures()
    with pytest.raises(F._Wrong, match="declared disjoint"):
        F.run_query("count where f == 1e999; count where f > 5", True, np.random.default_rng(0), fig)


def test_the_metadata_oracle_can_fail(monkeypatch, tmp_path):
    """A verify that ignores records_released (the old bug) is caught."""
    from dpstudio.engine import export

    monkeypatch.setattr(export, "verify_release", lambda p: (True, "OK"))
    seeds = F._write_seeds(str(tmp_path))
    fig = F.Figures()
    rng = np.random.default_rng(1)
    for i in range(60):
        F.run_case(i, "metadata", seeds, str(tmp_path), rng, fig)
    assert fig.wrong > 0


def test_json_mutations_are_seeded():
    text = '{"a": [1, 2], "b": {"c": "d"}}'
    a = F.mutate_json(text, np.random.default_rng(7))
    b = F.mutate_json(text, np.random.default_rng(7))
    assert a == b


def test_the_exhaustive_edge_pairs_catch_inexact_disjointness(monkeypatch):
    """Keys compared as doubles (2^53 + 1 == 2^53) make `id == 2^53+1` and `id > 2^53`
    'disjoint': the exhaustive pass over the edge literals finds it."""
    from dpstudio.engine.query import parser as qd

    fig = F.Figures()
    F.check_edge_pairs(fig)
    assert fig.wrong == 0 and fig.disjoint_checks > 100
    monkeypatch.setattr(qd, "_key_number", float)
    fig = F.Figures()
    F.check_edge_pairs(fig)
    assert fig.wrong > 0
