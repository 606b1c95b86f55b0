"""Issue 15, "tracebacks instead of messages": every bad parameter through the command line is
ONE line on stderr naming the parameter, exit code 2, never a traceback, and no release file.

Each case runs ``dpstudio.cli.main`` in-process.  The cases of the issue's catalogue come first
(ε = 1e-300 / 5e-324, staircase with ε = 1e300 / 1e-300, a ±1e308 domain, --seed -1,
--weights a=x, empty values of required numbers), then the ones found by trying.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine.errors import DPStudioError, ParameterError, ParameterTypeError

N = 30


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_input")
    rng = np.random.default_rng(0)
    pd.DataFrame(
        {
            "id": range(N),
            "x": rng.uniform(0, 100, N).round(2),
            "y": rng.integers(0, 50, N),
            "c": rng.choice(list("abc"), N),
        }
    ).to_csv(d / "d.csv", index=False)
    return d


# {d}: the data folder, {o}: the case's own output folder.  Each case: (argv, a word the message must contain: the parameter).
P = "protect {d}/d.csv {o}/out.csv --no-measures --role x=eps-quasi --domain x=0:100".split()
PK = "protect {d}/d.csv {o}/out.csv --no-measures --role c=k-quasi --method k-eps --k 3".split()
S = ("sweep {d}/d.csv --out {o}/sweep.csv --role x=eps-quasi --domain x=0:100 --repeats 1").split()
Q = ["query", "{d}/d.csv", "mean(x)", "--range", "x=0:100"]
R = "risk {d}/d.csv --role c=k-quasi".split()
E = "evaluate {d}/d.csv {d}/d.csv".split()
LAP = ["--method", "laplace"]
IRDP = ["--method", "ir-dp", "--k", "3"]

CASES = [
    # ---- the catalogue
    (P + LAP + ["--epsilon", "1e-300"], "epsilon"),  # was OverflowError
    (P + LAP + ["--epsilon", "5e-324"], "epsilon"),  # was ValueError (sampler)
    (P + IRDP + ["--epsilon", "5e-324"], "epsilon"),  # ir-dp, same
    (P + LAP + ["--epsilon", "1e300", "--noise", "staircase"], "epsilon"),  # ZeroDivisionError
    (P + LAP + ["--epsilon", "1e-300", "--noise", "staircase"], "epsilon"),
    (P[:-1] + ["x=-1e308:1e308"] + LAP + ["--epsilon", "1"], "x"),  # width overflows
    (P + LAP + ["--epsilon", "1", "--seed", "-1"], "--seed"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=a=x"], "weights"),
    (P + LAP + ["--epsilon", ""], "epsilon"),  # was "not given"
    (P + IRDP[:2] + ["--k", "", "--epsilon", "1"], "'k'"),
    (PK + ["--epsilon", "1", "--suppression", ""], "suppression"),
    # ---- ε: outside [1e-06, 1e4], not a number, not finite
    (P + LAP + ["--epsilon", "0"], "epsilon"),
    (P + LAP + ["--epsilon", "-1"], "epsilon"),
    (P + LAP + ["--epsilon", "1e-7"], "epsilon"),
    (P + LAP + ["--epsilon", "1e5"], "epsilon"),
    (P + LAP + ["--epsilon", "nan"], "epsilon"),
    (P + LAP + ["--epsilon", "inf"], "epsilon"),
    (P + LAP + ["--epsilon", "one"], "epsilon"),
    (P + LAP + ["--epsilon", " "], "epsilon"),
    (P + IRDP + ["--epsilon", "1e-300", "--noise", "staircase"], "epsilon"),
    (P + LAP + ["--param", "epsilon="], "epsilon"),
    # ---- budget weights: each in [0.001, 1000]
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=x:a"], "weights"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=x:0"], "weights"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=x:1e-300"], "weights"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=x:1e300"], "weights"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights=x:nan"], "weights"),
    (P + LAP + ["--epsilon", "1", "--budget", "weights", "--param", "weights="], "weights"),
    # ---- other parameters: empty, wrong type, out of range
    (P + LAP + ["--epsilon", "1", "--noise", ""], "noise"),
    (P + LAP + ["--epsilon", "1", "--noise", "gauss"], "noise"),
    (P + LAP + ["--epsilon", "1", "--budget", ""], "budget"),
    (P + IRDP[:2] + ["--k", "0", "--epsilon", "1"], "'k'"),
    (P + IRDP[:2] + ["--k", "2.5", "--epsilon", "1"], "'k'"),
    (P + IRDP[:2] + ["--k", "1e300", "--epsilon", "1"], "'k'"),
    (P + IRDP[:2] + ["--k", "nan", "--epsilon", "1"], "'k'"),
    (P + IRDP + ["--epsilon", "1", "--param", "shuffle=maybe"], "shuffle"),
    (P + IRDP + ["--epsilon", "1", "--param", "shuffle="], "shuffle"),
    (PK + ["--epsilon", "1", "--suppression", "1.5"], "suppression"),
    (PK + ["--epsilon", "1", "--suppression", "nan"], "suppression"),
    (PK + ["--epsilon", "1", "--confidence", ""], "confidence"),
    (P + LAP + ["--epsilon", "1", "--seed", "1.5"], "--seed"),
    (P + LAP + ["--epsilon", "1", "--seed", ""], "--seed"),
    # ---- domains within ±1e15, finite, lower < upper
    (P[:-1] + ["x=0:1e16"] + LAP + ["--epsilon", "1"], "x"),
    (P[:-1] + ["x=0:inf"] + LAP + ["--epsilon", "1"], "x"),
    (P[:-1] + ["x=nan:100"] + LAP + ["--epsilon", "1"], "x"),
    (P[:-1] + ["x=100:0"] + LAP + ["--epsilon", "1"], "x"),
    (P[:-1] + ["x=0:"] + LAP + ["--epsilon", "1"], "x"),
    # ---- precision (output grid γ)
    (P + LAP + ["--epsilon", "1", "--precision", "x=1e-300"], "x"),
    (P + LAP + ["--epsilon", "1", "--precision", "x=0"], "x"),
    (P + LAP + ["--epsilon", "1", "--precision", "x=-1"], "x"),
    (P + LAP + ["--epsilon", "1", "--precision", "x=inf"], "x"),
    (P + LAP + ["--epsilon", "1", "--precision", "x="], "x"),
    (P + LAP + ["--epsilon", "1", "--precision", "x=1e300"], "x"),
    (P[:-1] + ["x=0:1e15"] + LAP + ["--epsilon", "1", "--precision", "x=1e-3"], "x"),
    # ---- sweep
    (S + LAP + ["--epsilon", "1e-300"], "epsilon"),
    (S + LAP + ["--epsilon", "1,1e300", "--noise", "staircase"], "epsilon"),
    (S + LAP + ["--epsilon", ""], "--epsilon"),
    (S + LAP + ["--epsilon", "1", "--seed", "-1"], "--seed"),
    (S + LAP + ["--epsilon", "1", "--repeats", "0"], "--repeats"),
    (S + ["--method", "ir-dp", "--k", "", "--epsilon", "1"], "--k"),
    (S + ["--method", "ir-dp", "--k", "2:1e300", "--epsilon", "1"], "--k"),  # was out of memory
    (S + ["--method", "ir-dp", "--k", "1e300", "--epsilon", "1"], "'k'"),
    (S[:5] + ["x=-1e308:1e308"] + S[6:] + LAP + ["--epsilon", "1"], "x"),
    # ---- query
    (Q + ["--epsilon", "1", "--seed", "-1"], "--seed"),  # was ValueError
    (Q + ["--epsilon", "1e-300"], "ε"),
    (Q + ["--epsilon", ""], "--epsilon"),
    (Q + ["--epsilon", "1", "--split", "nan"], "split"),
    (Q[:-1] + ["x=-1e308:1e308", "--epsilon", "1"], "x"),  # was OverflowError
    (Q[:-1] + ["x=0:100:0", "--epsilon", "1"], "step"),
    # ---- risk / evaluate
    (R + ["--threshold", "nan"], "--threshold"),  # was a success
    (R + ["--threshold", "2"], "--threshold"),
    (R + ["--threshold", ""], "--threshold"),
    (E + ["--attributes", ""], "--attributes"),
    (E + ["--attributes", "x,zz"], "zz"),
    # ---- demo
    (["demo", "--epsilon", "1e-300"], "epsilon"),
    (["demo", "--k", "0"], "'k'"),
]


def _ids():
    return [f"{i:02d}-" + " ".join(a for a in argv if "{" not in a)[:70] for i, (argv, _) in enumerate(CASES)]


@pytest.mark.parametrize("argv,needle", CASES, ids=_ids())
def test_bad_input_is_one_line_naming_the_parameter(files, tmp_path, capsys, argv, needle):
    args = [a.replace("{d}", str(files)).replace("{o}", str(tmp_path)) for a in argv]
    code = cli.main(args)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert len(lines) == 1, err
    assert lines[0].startswith("dpstudio: error: "), err
    assert needle in lines[0], err
    assert list(tmp_path.iterdir()) == []  # no release, no partial file


def test_catalogue_size():
    assert len(CASES) >= 40


# ---------------------------------------------------------------- the engine / app message path


def _frame():
    rng = np.random.default_rng(1)
    return pd.DataFrame({"x": rng.uniform(0, 100, N).round(2), "y": rng.integers(0, 50, N)})


ENGINE_CASES = [
    (dict(epsilon=1e-300), ParameterError, "'epsilon'"),
    (dict(epsilon=5e-324), ParameterError, "'epsilon'"),
    (dict(epsilon=1e300, noise="staircase"), ParameterError, "'epsilon'"),
    (dict(epsilon=""), ParameterTypeError, "'epsilon'"),
    (dict(epsilon="1", budget="weights", weights={"x": "a"}), ParameterTypeError, "'weights'"),
    (dict(epsilon=1, budget="weights", weights={"x": 0.0}), ParameterError, "'weights'"),
    (dict(epsilon=1, domains={"x": (-1e308, 1e308)}), ParameterError, "'x'"),
    (dict(epsilon=1, domains={"x": (0, 100, 5)}), ParameterError, "'x'"),
    (dict(epsilon=1, precision={"x": 1e-300}), ParameterError, "'x'"),
    (dict(epsilon=1, precision={"x": "fine"}), ParameterError, "'x'"),
]


@pytest.mark.parametrize("kw,exc,needle", ENGINE_CASES)
def test_engine_message_is_plain(kw, exc, needle):
    """The app shows ``str(exc)`` of what the engine raises: one plain line naming the
    parameter, of the one validation path's types (a ValueError, or a TypeError for types)."""
    kw = dict(kw)
    domains = kw.pop("domains", {"x": (0, 100)})
    with pytest.raises(exc) as info:
        engine.protect(_frame(), "laplace", {"x": "eps-quasi"}, domains, seed=1, **kw)
    msg = str(info.value)
    assert isinstance(info.value, DPStudioError) and isinstance(info.value, ValueError)
    assert "\n" not in msg and "Traceback" not in msg and needle in msg
    assert len(msg) < 400


def test_ranges_are_declared_for_the_forms():
    """The ranges live in the Param declarations (the app's forms read them) and the message
    says the same range."""
    from dpstudio.engine.registry import get_method

    spec = get_method("laplace")
    eps = spec.param("epsilon")
    assert (eps.minimum, eps.maximum) == (1e-6, 1e4)
    assert eps.to_dict()["minimum"] == 1e-6 and eps.to_dict()["maximum"] == 1e4
    w = spec.param("weights")
    assert (w.minimum, w.maximum) == (1e-3, 1e3)
    with pytest.raises(ParameterError, match=r"\[1e-06, 10000\]\. Got 1e-300 instead"):
        eps.check(1e-300, "laplace")
    # the ends of the range are allowed and the arithmetic there is finite
    for e in (1e-6, 1e4):
        res = engine.protect(_frame(), "laplace", {"x": "eps-quasi"}, {"x": (0, 100)}, epsilon=e, seed=2)
        v = res.data["x"].to_numpy(dtype=float)
        assert np.all(np.isfinite(v)) and v.min() >= 0 and v.max() <= 100
