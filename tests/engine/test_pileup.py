"""Clamping pile-up notes (issue 11): share of a noisy attribute's released values on the
bounds of its declared domain -- private notes, in the assessment, never in public files."""

import json
import re

import numpy as np
import pandas as pd

from dpstudio import engine
from dpstudio.engine.pileup import bound_shares
from dpstudio.engine.report import render_assessment, render_release_note

DOMS = {"age": (0, 100), "expend": (0, 100_000)}


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n), "expend": rng.lognormal(7, 1, n).round()})


def test_small_epsilon_piles_values_on_the_bounds_and_says_so_privately():
    df = _frame()
    res = engine.protect(
        df, "laplace", {"age": "eps-quasi", "expend": "eps-quasi"}, DOMS, epsilon=0.5, seed=3
    )
    notes = [w for w in res.private_notes if w.startswith("Pile-up at the domain bounds")]
    assert len(notes) == 2
    for col, note in zip(("age", "expend"), sorted(notes, key=lambda w: "expend" in w)):
        assert repr(col) in note
        x = res.data[col].to_numpy(dtype=float)
        lo, hi = DOMS[col]
        share = np.mean((x == lo) | (x == hi))
        assert share > 0.5  # the noise really piled them up
        got = float(re.search(r"([\d.]+) % of the released values", note).group(1))
        assert abs(got - 100 * share) < 0.1
        assert "larger ε" in note and "tighter declared domain" in note
    # private only: not in the public warnings, metadata or release note; in the assessment
    assert not [w for w in res.public_warnings if "Pile-up" in w]
    assert "Pile-up" not in json.dumps(res.public_metadata(), ensure_ascii=False)
    assert "Pile-up" not in render_release_note(res)
    page = render_assessment(res, None)
    assert "Pile-up at the domain bounds" in page and "Values at the domain bounds" in page


def test_no_note_when_the_noise_is_small_against_the_domain():
    df = _frame()
    res = engine.protect(
        df, "laplace", {"age": "eps-quasi", "expend": "eps-quasi"}, DOMS, epsilon=2000.0, seed=3
    )
    assert not [w for w in res.warnings if "Pile-up" in w]
    s = bound_shares(res.data, ["age", "expend"], DOMS)
    assert s["age"]["total"] < 0.05


def test_clustered_method_note_names_k_and_no_note_without_noise():
    df = _frame()
    res = engine.protect(
        df, "insensitive-dp", {"age": "eps-quasi", "expend": "eps-quasi"}, DOMS, k=2, epsilon=0.05, seed=1
    )
    notes = [w for w in res.private_notes if "Pile-up" in w]
    assert notes and all("larger k" in w for w in notes)
    mdav = engine.protect(df.assign(age=0), "mdav", {"age": "k-quasi"}, k=3, seed=1)
    assert not [w for w in mdav.warnings if "Pile-up" in w]  # no noise: nothing to say


def test_keps_note_does_not_advise_a_larger_k_or_a_tighter_domain():
    """k-eps noise is each class's own range / ε: neither a larger k (wider classes, more
    noise) nor a tighter declared domain reduces it, so the advice must not say so."""
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"region": rng.integers(1, 4, 600), "expend": rng.lognormal(7, 1.2, 600).round()})
    res = engine.protect(
        df,
        "k-eps",
        {"region": "k-quasi", "expend": "eps-quasi"},
        {"expend": (0, 100_000)},
        k=5,
        epsilon=0.2,
        seed=4,
    )
    notes = [w for w in res.private_notes if "Pile-up" in w]
    assert notes, res.private_notes
    assert all(
        "noise of a cluster mean shrinks" not in w and "tighter declared domain" not in w for w in notes
    )
    assert all("class's own range" in w and "larger k widens the classes" in w for w in notes)
