"""Issue 8 §5/§6: honest DP flags and weak-parameter warnings.

* Clustered DP releases (k ≥ 2) with columns released unchanged beside the protected ones are
  not ε-DP for the records: neighbouring data sets that differ in ONE protected value release
  different numbers of distinct rows (the audit's 2 vs 4).  The flag must say so and the
  guarantee sentence must lead with that scope.
* The 'separate-tables' layout (one independently shuffled one-column table per protected
  attribute, other columns not released) is ε-DP by sequential composition.
* Declared domains equal to data-derived bounds, and very large composed ε, are warned.
"""

import json

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine import api
from dpstudio.engine.export import export_release

SCOPE = "Per-attribute only — not ε-differential privacy for the records:"
DOM = {"x": (0.0, 10.0)}


def _neighbours():
    """One ε-quasi x, one confidential y released unchanged; D2 differs from D1 only in the
    protected value of record 0 (1 -> 10)."""
    d1 = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": ["a", "a", "b", "b"]})
    d2 = d1.copy()
    d2.loc[0, "x"] = 10.0
    return d1, d2


def _distinct_rows(res) -> int:
    return len(res.data.drop_duplicates())


@pytest.mark.parametrize("method", ["ir-dp", "insensitive-dp"])
def test_audit_unchanged_column_reveals_grouping_and_flag_is_false(method):
    d1, d2 = _neighbours()
    roles = {"x": "eps-quasi", "y": "confidential"}
    kw = dict(k=2, epsilon=10.0)
    runs = 300
    n1 = [_distinct_rows(engine.protect(d1, method, roles, DOM, seed=s, **kw)) for s in range(runs)]
    n2 = [_distinct_rows(engine.protect(d2, method, roles, DOM, seed=s, **kw)) for s in range(runs)]
    # D1: both clusters are y-homogeneous -> never more than 2 distinct rows;
    # D2: both clusters mix 'a' and 'b' -> 4 distinct rows (unless clamping merges values)
    assert max(n1) == 2
    assert sum(v == 4 for v in n2) >= 0.95 * runs
    # an event of probability 0 under D1 and ~1 under D2: no finite ε bounds the ratio
    res = engine.protect(d1, method, roles, DOM, seed=1, **kw)
    assert res.is_dp is False
    assert res.public_metadata()["differential_privacy"] is False
    assert res.guarantee.startswith(SCOPE)
    assert "(y)" in res.guarantee and "different numbers of distinct records" in res.guarantee
    assert "separate-tables" in res.guarantee  # the remedy is offered
    # what holds per attribute is still stated (after the scope)
    assert "-differential privacy" in res.guarantee.split(SCOPE)[1]


@pytest.mark.parametrize("method", ["ir-dp", "insensitive-dp"])
def test_flag_stays_true_without_unchanged_columns(method):
    d1, _ = _neighbours()
    alone = engine.protect(d1[["x"]], method, {"x": "eps-quasi"}, DOM, k=2, epsilon=1.0, seed=1)
    assert alone.is_dp and alone.guarantee.startswith("1-differential privacy")
    # identifiers are dropped from the release, so they do not reveal the grouping
    with_id = d1.assign(pid=[11, 12, 13, 14])[["pid", "x"]]
    res = engine.protect(
        with_id, method, {"x": "eps-quasi", "pid": "identifier"}, DOM, k=2, epsilon=1.0, seed=1
    )
    assert "pid" not in res.data.columns
    assert res.is_dp and res.guarantee.startswith("1-differential privacy")


def test_unclustered_releases_keep_their_flag():
    """k = 1 (and plain Laplace) noise every record on its own: no grouping to reveal."""
    d1, _ = _neighbours()
    roles = {"x": "eps-quasi", "y": "confidential"}
    for method, kw in (("laplace", {}), ("ir-dp", {"k": 1})):
        res = engine.protect(d1, method, roles, DOM, epsilon=1.0, seed=1, **kw)
        assert res.is_dp and res.guarantee.startswith("1-differential privacy")
        assert "Not covered" in res.guarantee and "(y)" in res.guarantee


def test_idp_and_categorical_lead_with_scope():
    d1, _ = _neighbours()
    roles = {"x": "eps-quasi", "y": "confidential"}
    res = engine.protect(d1, "idp-ls", roles, DOM, k=2, epsilon=1.0, seed=1)
    assert not res.is_dp
    assert res.guarantee.startswith(
        "Per-attribute only — not individual differential privacy for the records:"
    )
    df = pd.DataFrame({"x": np.arange(20.0), "o": np.arange(20) % 3})
    cat = engine.protect(df, "categorical-dp", {"x": "eps-quasi"}, {"x": (0, 100)}, k=4, epsilon=1.0, seed=1)
    assert not cat.is_dp and cat.guarantee.startswith(SCOPE)
    cat1 = engine.protect(
        df[["x"]], "categorical-dp", {"x": "eps-quasi"}, {"x": (0, 100)}, k=4, epsilon=1.0, seed=1
    )
    assert cat1.is_dp and not cat1.guarantee.startswith("Per-attribute")


def test_multi_attribute_ir_dp_leads_with_scope():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.uniform(0, 10, 40), "y": rng.uniform(0, 10, 40)})
    res = engine.protect(
        df,
        "ir-dp",
        {"x": "eps-quasi", "y": "eps-quasi"},
        {"x": (0, 10), "y": (0, 10)},
        k=4,
        epsilon=1.0,
        seed=2,
    )
    assert not res.is_dp
    assert res.guarantee.startswith(SCOPE)
    assert not res.guarantee.startswith("1-differential")
    assert "separate-tables" in res.guarantee


# ----------------------------------------------------------------- separate-tables layout


def _pair_frame(n=300, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 100, n)
    return pd.DataFrame(
        {"pid": np.arange(n), "x": x, "y": 2 * x + rng.normal(0, 1, n), "z": rng.integers(0, 4, n)}
    )


ROLES2 = {"pid": "identifier", "x": "eps-quasi", "y": "eps-quasi", "z": "confidential"}
DOM2 = {"x": (0, 100), "y": (-10, 210)}


@pytest.mark.parametrize("method", ["ir-dp", "insensitive-dp", "idp-ls"])
def test_separate_tables_same_values_independent_orders(method):
    df = _pair_frame()
    kw = dict(k=5, epsilon=5000.0, seed=7)  # little noise: the pairing would be obvious
    rec = engine.protect(df, method, ROLES2, DOM2, **kw)
    sep = engine.protect(df, method, ROLES2, DOM2, layout="separate-tables", **kw)
    assert set(sep.tables) == {"x", "y"}
    assert all(list(t.columns) == [c] and len(t) == len(df) for c, t in sep.tables.items())
    assert list(sep.data.columns) == ["x", "y"] and "z" not in sep.data and sep.row_map is None
    for c in ("x", "y"):  # same clustering and noise: each column's multiset is unchanged
        np.testing.assert_array_equal(np.sort(sep.tables[c][c].to_numpy()), np.sort(rec.data[c].to_numpy()))
        np.testing.assert_array_equal(sep.data[c].to_numpy(), sep.tables[c][c].to_numpy())
    # records: x and y of a row belong together (corr ~ 1); tables: independent orders
    assert np.corrcoef(rec.data["x"], rec.data["y"])[0, 1] > 0.9
    assert abs(np.corrcoef(sep.tables["x"]["x"], sep.tables["y"]["y"])[0, 1]) < 0.25
    assert sep.info["layout"] == "separate-tables" and sep.info["columns_not_released"] == ["z"]
    assert any("'z'" not in w and "z are not released" in w for w in sep.warnings)
    if method == "idp-ls":
        assert not sep.is_dp  # individual DP stays individual DP
    else:
        assert sep.is_dp and sep.public_metadata()["differential_privacy"] is True
        assert sep.guarantee.startswith("5000-differential privacy")
        assert "Not released in this layout" in sep.guarantee and "(z)" in sep.guarantee


def test_separate_tables_orders_are_independent_permutations():
    """Over many seeds the rank of one value in table x does not predict its partner's rank in
    table y (a shared permutation would keep the pairs of the records layout)."""
    df = _pair_frame(n=60)
    same = 0
    for s in range(40):
        sep = engine.protect(df, "ir-dp", ROLES2, DOM2, k=3, epsilon=50.0, seed=s, layout="separate-tables")
        rec = engine.protect(df, "ir-dp", ROLES2, DOM2, k=3, epsilon=50.0, seed=s)
        pairs_sep = set(zip(sep.tables["x"]["x"], sep.tables["y"]["y"]))
        pairs_rec = set(zip(rec.data["x"], rec.data["y"]))
        same += len(pairs_sep & pairs_rec)
    assert same < 40 * 60 * 0.2


def test_separate_tables_per_attribute_budget_is_m_eps():
    df = _pair_frame(n=100)
    sep = engine.protect(
        df, "ir-dp", ROLES2, DOM2, k=5, epsilon=1.0, budget="per-attribute", layout="separate-tables", seed=1
    )
    assert sep.is_dp and sep.guarantee.startswith("(2·1 = 2)-differential privacy")


def test_separate_tables_export_writes_only_tables(tmp_path):
    df = _pair_frame(n=50)
    sep = engine.protect(df, "ir-dp", ROLES2, DOM2, k=5, epsilon=1.0, layout="separate-tables", seed=1)
    written = export_release(sep, tmp_path / "rel.csv")
    assert "data" not in written and not (tmp_path / "rel.csv").exists()
    tx = pd.read_csv(written["table:x"])
    ty = pd.read_csv(written["table:y"])
    assert list(tx.columns) == ["x"] and list(ty.columns) == ["y"]
    meta = json.loads((tmp_path / "rel.metadata.json").read_text())
    assert meta["differential_privacy"] is True
    assert meta["files"]["output"]["layout"] == "separate-tables"


def test_layout_param_validated():
    df = _pair_frame(n=20)
    with pytest.raises(engine.ParameterError, match="layout"):
        engine.protect(df, "ir-dp", ROLES2, DOM2, k=2, epsilon=1.0, layout="columns")
    with pytest.raises(engine.ParameterError, match="layout"):
        engine.protect(df, "mdav", {"x": "k-quasi"}, k=2, layout="separate-tables")


def test_describe_release_matches_protect():
    """What the app's method panel shows before running equals the result's sentence."""
    d1, _ = _neighbours()
    roles = {"x": "eps-quasi", "y": "confidential"}
    for layout in ("records", "separate-tables"):
        res = engine.protect(d1, "ir-dp", roles, {"x": (-50, 50)}, k=2, epsilon=1.0, seed=1, layout=layout)
        text, is_dp = api.describe_release(
            list(d1.columns),
            "ir-dp",
            roles,
            data=d1,
            domains={"x": (-50, 50)},
            k=2,
            epsilon=1.0,
            layout=layout,
        )
        assert (text, is_dp) == (res.guarantee, res.is_dp)


# ----------------------------------------------------------------- §6 weak parameters


def _col(n=30, seed=2):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(5, 80, n).round(1)})


@pytest.mark.parametrize("how", ["minmax", "max", "suggestion"])
def test_data_derived_domain_is_a_private_note_only(how):
    """Issue 21 §3 N1 (reverses issue 11's public warning): whether a bound coincides with the
    data is a fact about the data, so it is a private note with a code -- shown to the user,
    never in the guarantee, the public warnings or the metadata."""
    df = _col()
    lo, hi = float(df["x"].min()), float(df["x"].max())
    dom = {"minmax": (lo, hi), "max": (0.0, hi), "suggestion": (0.0, 1.5 * hi)}[how]
    res = engine.protect(df, "laplace", {"x": "eps-quasi"}, {"x": dom}, epsilon=1.0, seed=1)
    w = [m for m in res.private_notes if "declared domain of 'x' coincides" in m]
    assert len(w) == 1 and w[0].code == "domain-at-data-bound"
    meta = json.dumps(res.public_metadata(), ensure_ascii=False)
    assert "coincides" not in meta and "derived from the original data" not in meta
    assert "coincides" not in res.guarantee and "weaker than stated" not in res.guarantee
    assert not any("coincides" in m for m in res.public_warnings)


def test_population_domain_not_warned():
    df = _col()
    for dom in ((0.0, 100.0), (-10.0, 1000.0)):
        res = engine.protect(df, "laplace", {"x": "eps-quasi"}, {"x": dom}, epsilon=1.0, seed=1)
        assert not any("coincides" in m for m in res.warnings)
        assert "derived from the original data" not in res.guarantee
    # a lower bound of 0 that happens to be the data's minimum is the natural bound of amounts
    df0 = pd.DataFrame({"x": [0.0, 3.0, 7.5, 9.0]})
    res = engine.protect(df0, "laplace", {"x": "eps-quasi"}, {"x": (0, 100)}, epsilon=1.0, seed=1)
    assert not any("coincides" in m for m in res.warnings)


def test_large_epsilon_warning_uses_composed_total():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({c: rng.uniform(0, 10, 20) for c in "abc"})
    roles = {c: "eps-quasi" for c in "abc"}
    doms = {c: (-100, 100) for c in "abc"}

    def large(res):
        return [w for w in res.warnings if "very large" in w]

    assert not large(engine.protect(df, "laplace", roles, doms, epsilon=10, seed=1))
    per = large(engine.protect(df, "laplace", roles, doms, epsilon=10, budget="per-attribute", seed=1))
    assert len(per) == 1 and "3·10 = 30" in per[0]
    assert large(engine.protect(df, "laplace", roles, doms, epsilon=25, seed=1))


# ----------------------------------------------------------------- CLI


def test_cli_layout_and_remedy(tmp_path, capsys):
    from dpstudio import cli

    d1, _ = _neighbours()
    src = tmp_path / "in.csv"
    d1.to_csv(src, index=False)
    base = [
        "protect",
        str(src),
        "--method",
        "ir-dp",
        "--k",
        "2",
        "--epsilon",
        "1",
        "--role",
        "x=eps-quasi",
        "--role",
        "y=confidential",
        "--domain",
        "x=-50:50",
        "--no-measures",
    ]
    assert cli.main([*base[:2], str(tmp_path / "a.csv"), *base[2:]]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("Guarantee: " + SCOPE)
    assert "--layout separate-tables" in out.err
    assert json.loads((tmp_path / "a.metadata.json").read_text())["differential_privacy"] is False
    assert cli.main([*base[:2], str(tmp_path / "b.csv"), *base[2:], "--layout", "separate-tables"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("Guarantee: 1-differential privacy")
    assert (tmp_path / "b.x.csv").exists() and not (tmp_path / "b.csv").exists()
    assert json.loads((tmp_path / "b.metadata.json").read_text())["differential_privacy"] is True


def test_cli_prints_domain_warning(tmp_path, capsys):
    from dpstudio import cli

    df = _col()
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    hi = float(df["x"].max())
    code = cli.main(
        [
            "protect",
            str(src),
            str(tmp_path / "o.csv"),
            "--method",
            "laplace",
            "--epsilon",
            "1",
            "--role",
            "x=eps-quasi",
            "--domain",
            f"x=0:{hi!r}",
            "--no-measures",
        ]
    )
    assert code == 0
    assert "declared domain of 'x' coincides" in capsys.readouterr().err
