"""Issue 15, item 4: combinations of ε (and its split over attributes and clusters), the output
grid and the cluster count that ask the exact sampler for a noise rate below 2^-62 per grid
step (or a sensitivity above 2^50 steps) are refused with ONE clean message naming what to
change -- in the engine (ParameterError, never the sampler's ValueError) and in the command
line (exit 2, one stderr line, nothing written).  No single parameter range expresses them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine.algorithms import noise as N
from dpstudio.engine.errors import ParameterError

NREC = 30


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.uniform(0, 1000, NREC).round(3), "y": rng.uniform(0, 1000, NREC).round(3)})


# (method, params, domains, precision, words the message must contain)
COMBOS = [
    # a single attribute: ε over the span is below the limit -- refused up front, column named
    ("laplace", {"epsilon": 1e-6}, {"x": (0, 1e7)}, {"x": 1e-6}, ["'x'", "precision", "ε", "2^-62"]),
    ("ir-dp", {"epsilon": 1e-6, "k": 3}, {"x": (0, 1e7)}, {"x": 1e-6}, ["'x'", "precision", "2^-62"]),
    (
        "insensitive-dp",
        {"epsilon": 1e-6, "k": 3},
        {"x": (0, 1e7)},
        {"x": 1e-6},
        ["'x'", "precision", "2^-62"],
    ),
    # the ε split: each bound alone is fine, the weight of 1/1001 of ε on x is not
    (
        "laplace",
        {"epsilon": 1e-6, "budget": "weights", "weights": {"x": 1, "y": 1000}},
        {"x": (0, 1e6), "y": (0, 1e3)},
        {"x": 1e-6, "y": 1e-3},
        ["precision", "ε", "2^-62"],
    ),
    # the cluster count: insensitive-dp's L1 sensitivity is (number of clusters) × span
    ("insensitive-dp", {"epsilon": 1e-6, "k": 3}, {"x": (0, 1e6)}, {"x": 1e-6}, ["precision", "ε", "2^-62"]),
]


@pytest.mark.parametrize("method,params,domains,precision,words", COMBOS)
def test_engine_refuses_with_a_parameter_error(method, params, domains, precision, words):
    df = _frame()
    roles = {c: "eps-quasi" for c in domains}
    with pytest.raises(ParameterError) as ei:
        engine.protect(df, method, roles, domains=domains, precision=precision, seed=1, **params)
    msg = str(ei.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def test_a_coarser_precision_as_advised_works():
    df = _frame()
    with pytest.raises(ParameterError) as ei:
        engine.protect(
            df,
            "laplace",
            {"x": "eps-quasi"},
            domains={"x": (0, 1e7)},
            epsilon=1e-6,
            precision={"x": 1e-6},
            seed=1,
        )
    advised = float(str(ei.value).split("--precision x=")[1].split(",")[0])
    res = engine.protect(
        df,
        "laplace",
        {"x": "eps-quasi"},
        domains={"x": (0, 1e7)},
        epsilon=1e-6,
        precision={"x": advised},
        seed=1,
    )
    assert len(res.data) == NREC


def test_the_limit_itself_is_not_refused():
    """Just above the limit the sampler draws (the checks refuse nothing usable)."""
    rng = np.random.default_rng(3)
    sens = 2**40
    eps = N.MIN_NOISE_RATE * sens * 1.01 / (1 - N.EPS_SAFETY)
    z = N.grid_noise("laplace", rng, sens, eps, 5)
    assert z.shape == (5,)
    with pytest.raises(ParameterError):
        N.grid_noise("laplace", rng, sens, eps / 1.02, 5)
    with pytest.raises(ParameterError):
        N.grid_noise("laplace", rng, 2**51, 1.0, 5)


@pytest.mark.parametrize("method,params,domains,precision,words", COMBOS)
def test_cli_exit_2_one_line(tmp_path, capsys, method, params, domains, precision, words):
    _frame().to_csv(tmp_path / "d.csv", index=False)
    argv = [
        "protect",
        str(tmp_path / "d.csv"),
        str(tmp_path / "out.csv"),
        "--no-measures",
        "--method",
        method,
        "--epsilon",
        str(params["epsilon"]),
    ]
    if "k" in params:
        argv += ["--k", str(params["k"])]
    for c, (a, b) in domains.items():
        argv += [
            "--role",
            f"{c}=eps-quasi",
            "--domain",
            f"{c}={a:g}:{b:g}",
            "--precision",
            f"{c}={precision[c]:g}",
        ]
    if params.get("budget") == "weights":
        argv += [
            "--budget",
            "weights",
            "--param",
            "weights=" + ",".join(f"{c}:{w}" for c, w in params["weights"].items()),
        ]
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "out.csv").exists()


def test_fuzzed_combinations_never_raise_the_samplers_error():
    """Seeded random ε (with weights), domain widths, precisions and cluster sizes within the
    declared ranges: each run succeeds or is refused with a DPStudioError -- never a bare
    ValueError / OverflowError from the sampler."""
    rng = np.random.default_rng(15)
    df = _frame()
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(40):
        method = ["laplace", "ir-dp", "insensitive-dp"][int(rng.integers(0, 3))]
        eps = float(10.0 ** rng.uniform(-6, 1))
        width = float(10.0 ** rng.integers(1, 9))
        gamma = float(10.0 ** rng.integers(-8, 0))
        kw = {"k": int(rng.integers(2, 6))} if method != "laplace" else {}
        if rng.random() < 0.5:
            kw.update(budget="weights", weights={"x": 1.0, "y": float(10.0 ** rng.uniform(0, 3))})
        try:
            engine.protect(
                df,
                method,
                {"x": "eps-quasi", "y": "eps-quasi"},
                domains={"x": (0, width), "y": (0, 1000)},
                precision={"x": gamma, "y": 0.001},
                epsilon=eps,
                seed=int(rng.integers(1, 2**31)),
                **kw,
            )
            outcomes["ok"] += 1
        except engine.DPStudioError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["ok"] and outcomes["refused"], outcomes
