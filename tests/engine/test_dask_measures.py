"""Measures on Dask (issue 12): equal to the in-memory engine.evaluate on the same data
(deterministic measures up to summation order; record linkage exact on the whole data and
within its interval on a sample)."""

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.backends import dask_measures as DM  # noqa: E402
from dpstudio.engine.measures import categorical as C  # noqa: E402
from dpstudio.engine.measures.kanon import k_anonymity_check  # noqa: E402

ROLES = {"id": "identifier", "age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
DOMAINS = {"age": (0, 120), "income": (0, 1_000_000), "hours": (0, 100)}
ATTRS = ["age", "income", "hours"]


def _data(n=1203, seed=7):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "income": np.round(rng.gamma(2.0, 20000.0, n), 2),
            "hours": rng.integers(0, 80, n).astype(float),
            "region": rng.choice(list("abc"), n),
            "sex": rng.choice(["f", "m"], n),
            "w": rng.uniform(1, 40, n).round(1),
        }
    )


def _close(a, b):
    assert a == pytest.approx(b, rel=1e-9, abs=1e-12)


@pytest.fixture(autouse=True)
def _sync():
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.mark.parametrize(
    "method,params",
    [
        ("ir-dp", {"k": 5, "epsilon": 1.0}),
        ("laplace", {"epsilon": 3.0}),
        ("ir-dp", {"k": 3, "epsilon": 50.0}),
    ],
)
@pytest.mark.parametrize("nparts", [1, 4])
def test_measures_equal_memory_on_the_whole_data(method, params, nparts):
    df = _data()
    res = engine.protect(df, method, ROLES, DOMAINS, seed=3, **params)
    mem = engine.evaluate(
        res.aligned_original(),
        res.data,
        ATTRS,
        measures=("sse", "rl", "delta", "corr"),
        confidential=["hours"],
    )
    rel = DB.protect_dask(dd.from_pandas(df, npartitions=nparts), method, ROLES, DOMAINS, seed=3, **params)
    got = DM.evaluate_dask(
        dd.from_pandas(df, npartitions=nparts),
        rel,
        ATTRS,
        measures=("sse", "rl", "delta", "corr"),
        confidential=["hours"],
        rl_sample=len(df),
    )
    for key in (
        "sse_raw",
        "sse_normalized",
        "delta_mean_avg",
        "delta_var_avg",
        "corr_loss_mean",
        "corr_loss_std",
    ):
        _close(got[key], mem[key])
    for a in ATTRS:
        _close(got["delta_mean"][a], mem["delta_mean"][a])
        _close(got["delta_var"][a], mem["delta_var"][a])
    # the sample is the whole data: RL exact, interval collapsed to the point
    _close(got["rl"], mem["rl"])
    assert got["rl_ci_low"] == pytest.approx(got["rl"]) == pytest.approx(got["rl_ci_high"])
    assert got["rl_label"].startswith(f"RL on all {len(df):,} records")


def test_rl_sampled_within_interval_and_labelled():
    df = _data(3000, seed=2)
    res = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=5, k=3, epsilon=30.0)
    mem = engine.evaluate(res.aligned_original(), res.data, ATTRS, measures=("rl",))["rl"]
    _, pr = engine.measures.record_linkage(res.aligned_original(), res.data, ATTRS, return_probabilities=True)
    rel = DB.protect_dask(
        dd.from_pandas(df, npartitions=3), "ir-dp", ROLES, DOMAINS, seed=5, k=3, epsilon=30.0
    )
    rel.aligned = dd.from_pandas(rel.aligned.compute(), npartitions=3)  # computed once
    hits = 0
    for s in range(10):
        got = DM.evaluate_dask(df, rel, ATTRS, measures=("rl",), rl_sample=600, rl_seed=s)
        assert got["rl_sample"] == 600 and got["rl_records"] == 3000
        assert got["rl_ci_low"] < got["rl"] < got["rl_ci_high"]
        assert got["rl_label"].startswith("RL on a 600-record sample:") and "95 % CI" in got["rl_label"]
        hits += got["rl_ci_low"] <= mem <= got["rl_ci_high"]
        # each sampled Pr_j is exact: the estimate is the mean of the in-memory Pr_j of the
        # sampled records (res.row_map: release row -> input row)
        ids = DM._sample_ids(3000, 600, s)
        pos = np.argsort(np.asarray(res.row_map))  # input row -> release row
        _close(got["rl"], 100 * pr[pos[ids]].mean())
    assert hits >= 8
    assert 0 < mem < 100


def test_positional_pairing_of_a_written_release(tmp_path):
    df = _data(700)
    res = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=1, k=4, epsilon=2.0, shuffle=False)
    src, out = tmp_path / "o.parquet", tmp_path / "p.parquet"
    df.to_parquet(src)
    res.data.to_parquet(out)
    mem = engine.evaluate(df, res.data, ATTRS, measures=("sse", "rl"))
    got = DM.evaluate_dask(str(src), str(out), ATTRS, measures=("sse", "rl"), rl_sample=10**6)
    _close(got["sse_raw"], mem["sse_raw"])
    _close(got["rl"], mem["rl"])


def test_kanon_and_risk_group_bys_equal_memory():
    df = _data(2000)
    df["age5"] = df["age"] // 5 * 5
    ddf = dd.from_pandas(df, npartitions=5)
    for kq, k in ((["age5", "sex"], 5), (["age5", "sex", "region"], 3), (["region"], 700)):
        mem = k_anonymity_check(df, kq, k)
        got = DM.kanon_dask(ddf, kq, k)
        assert got["k_min_class_size"] == mem["min_class_size"]
        assert got["k_share_below"] == mem["share_below_k"]
        assert got["k_classes"] == mem["classes"]
    from dpstudio.engine.measures.survey_risk import assess_risk

    for w in (None, "w"):
        mem = assess_risk(df, ["age5", "sex", "region"], weight=w)
        got = DM.risk_dask(ddf, ["age5", "sex", "region"], w)
        for key in (
            "key_combinations",
            "sample_uniques",
            "records_fk_lt_2",
            "records_fk_lt_3",
            "records_fk_lt_5",
        ):
            assert got[key] == getattr(mem, key), key
        _close(got["expected_reidentifications"], mem.expected_reidentifications)
        _close(got["global_risk"], mem.global_risk)
    ev = DM.evaluate_dask(
        ddf, ddf, measures=("reid", "kanon"), keys=["age5", "sex"], weight="w", k_quasis=["age5", "sex"], k=5
    )
    rr = C.release_risk(df, ["age5", "sex"], "w")
    _close(ev["expected_reidentifications"], rr["expected_reidentifications"])
    assert ev["sample_uniques"] == rr["sample_uniques"]


def test_refusals_name_the_memory_engine():
    df = _data(100)
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DM.evaluate_dask(df, df, ATTRS, measures=("eigen",))
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DM.evaluate_dask(df, df, ["region"], measures=("sse",))
    bad = df.copy()
    bad.loc[3, "sex"] = None
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DM.risk_dask(dd.from_pandas(bad, npartitions=2), ["sex"])
    with pytest.raises(engine.InputError, match="records"):
        DM.evaluate_dask(df, df.iloc[:50], ATTRS, measures=("sse",))


def test_wilson_interval():
    lo, hi = DM._wilson(0.004, 100_000, 10**8, 0.95)
    assert lo < 0.004 < hi and hi - lo == pytest.approx(2 * 1.96 * (0.004 * 0.996 / 1e5) ** 0.5, rel=0.02)
    assert DM._wilson(0.3, 500, 500, 0.95) == pytest.approx((0.3, 0.3))


def test_api_backend_dask_dispatches_and_refuses():
    df = _data(500)
    rel = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=4, k=5, epsilon=1.0, backend="dask")
    assert isinstance(rel, DB.DaskRelease)
    mem = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=4, k=5, epsilon=1.0)
    pd.testing.assert_frame_equal(rel.compute(), mem.data, check_dtype=False)
    ev = engine.evaluate(df, rel, ATTRS, measures=("sse",), backend="dask")
    _close(
        ev["sse_raw"], engine.evaluate(mem.aligned_original(), mem.data, ATTRS, measures=("sse",))["sse_raw"]
    )
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        engine.protect(df, "mdav", {"age": "k-quasi"}, k=5, seed=1, backend="dask")
    with pytest.raises(engine.ParameterError, match="backend"):
        engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=4, k=5, epsilon=1.0, backend="spark")


def test_cli_evaluate_engine_dask(tmp_path, capsys):
    import json

    from dpstudio.cli import main

    df = _data(600)
    res = engine.protect(df, "ir-dp", ROLES, DOMAINS, seed=2, k=5, epsilon=1.0, shuffle=False)
    src, out = tmp_path / "o.parquet", tmp_path / "p.parquet"
    df.to_parquet(src)
    res.data.to_parquet(out)
    args = [
        "evaluate",
        str(src),
        str(out),
        "--attributes",
        "age,income,hours",
        "--confidential",
        "hours",
        "--json",
    ]
    assert main(args) == 0
    mem = json.loads(capsys.readouterr().out)
    assert main([*args, "--engine", "dask", "--workers", "1", "--rl-sample", "200"]) == 0
    got = json.loads(capsys.readouterr().out)
    for key in ("sse_raw", "sse_normalized", "delta_mean_avg", "corr_loss_mean"):
        _close(got[key], mem[key])
    assert got["rl_sample"] == 200 and got["rl_label"].startswith("RL on a 200-record sample")
    assert main([*args, "--engine", "dask", "--measures", "eigen"]) != 0
    assert "--engine memory" in capsys.readouterr().err
