"""Plain readings of the measures (issue 11): the numbers they quote are the measures'."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.measures.readings import reading, readings
from dpstudio.engine.report import render_assessment


def test_sse_normalized_reading_scales_with_the_error():
    assert "spread" in reading("sse_normalized", 1.0)
    small, big = reading("sse_normalized", 0.01), reading("sse_normalized", 9.0)
    assert small != big and "larger than the attribute's spread" in big
    # the typical error quoted is √SSE_normalized standard deviations
    assert "≈ 3 standard deviations" in big
    assert "≈ 0.1 standard deviation" in small


@pytest.mark.parametrize("n,rl", [(1000, 2.5), (50, 2.0), (400, 0.25)])
def test_rl_reading_states_the_share_and_the_chance_level(n, rl):
    text = reading("rl", rl, {"n": n})
    assert text.startswith(f"{rl:.3g} % of records re-identified by nearest-neighbour linkage")
    chance = float(re.search(r"chance level ([\d.]+) %", text).group(1))
    assert math.isclose(chance, 100 / n, rel_tol=1e-2)
    assert f"n = {n}" in text
    if rl / (100 / n) >= 1.5:
        assert "× chance" in text
    else:
        assert "at or below chance level" in text


def test_unknown_or_missing_values_read_as_nothing():
    assert reading("no_such_measure", 1.0) == ""
    assert reading("rl", float("nan"), {"n": 10}) == ""
    assert reading("rl", None) == ""
    assert readings({"rl": 1.0, "delta_mean": {"a": 0.1}, "warnings": []}, {"n": 10}).keys() == {"rl"}


def test_assessment_and_cli_show_the_readings(tmp_path, capsys):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.uniform(0, 100, 200), "y": rng.uniform(0, 100, 200)})
    res = engine.protect(df, "mdav", {"x": "k-quasi", "y": "k-quasi"}, k=5, seed=1)
    m = engine.evaluate(res.aligned_original(), res.data, result=res)
    page = render_assessment(res, m)
    # issue 24 §7: a k-anonymous release (MDAV's clusters of ≥ k identical values) is read
    # against 1/k, the chance of a guess among the records sharing the values, not 1/n
    assert "the release is 5-anonymous" in page and "at most 20 % of the time" in page
    assert reading("sse_normalized", m["sse_normalized"]) in page.replace("&#x27;", "'")
    from dpstudio import cli

    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    code = cli.main(
        [
            "protect",
            str(src),
            str(tmp_path / "o.csv"),
            "--method",
            "mdav",
            "--role",
            "x=k-quasi",
            "--role",
            "y=k-quasi",
            "--param",
            "k=5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "RL: " in out and "the release is 5-anonymous" in out and "at most 20 % of the time" in out
    assert "SSE normalized: " in out and "standard deviation" in out
