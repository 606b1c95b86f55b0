"""Issue 21 §3: nothing public may depend on the original beyond the release.

Each test reproduces one attack of the issue and shows that it fails now:

* N1 -- a declared bound equal to the data's maximum put "coincides with the data's maximum"
  into the guarantee, the metadata and the release note: neighbouring data sets with the same
  release gave different public files.
* N2 -- the default output precision γ came from the column's dtype: one record of 40.5 or one
  missing value changed it from 1 to 10⁻⁴ in every released value.
* N3 -- with a pinned seed, laplace at ε = 1 and ε = 2 gave 2·y₂ − y₁ = the original value;
  neighbouring files released with one seed differed by exactly the true change.
* order -- non-DP releases kept the input order: household members stayed in adjacent rows.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine.export import export_release


def _strip_time(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?( UTC|\+00:00)?", "<time>", text)


def _in_input_order(res, col: str) -> np.ndarray:
    """The released values of ``col`` put back in input order (by ``row_map``)."""
    v = res.data[col].to_numpy(dtype=np.float64)
    if res.row_map is None:
        return v
    out = np.empty_like(v)
    out[np.asarray(res.row_map)] = v
    return out


# ------------------------------------------------------------------ N1: public files


def _days(n: int = 213, seed: int = 4) -> pd.DataFrame:
    """A questionnaire item 'days per week' (0–7) and an income band (1–24): real limits that
    the data reaches."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"days": rng.integers(0, 8, n), "band": rng.integers(1, 25, n), "w": rng.uniform(1, 3, n).round(2)}
    )


DAYS_ROLES = {"days": "eps-quasi", "band": "eps-quasi", "w": "weight"}
DAYS_DOMS = {"days": (0, 7), "band": (1, 24)}


def _neighbours_at_the_bound():
    """Two data sets differing in one record: in ``b`` nobody reaches the upper bounds 7 and
    24; ``a`` is ``b`` with ONE record moved to them."""
    b = _days()
    b["days"] = b["days"].clip(upper=6)
    b["band"] = b["band"].clip(lower=2, upper=23)
    a = b.copy()
    a.loc[0, "days"], a.loc[0, "band"] = 7, 24
    assert (a != b).any(axis=1).sum() == 1
    return a, b


@pytest.mark.parametrize(
    "method,params",
    [
        ("laplace", {"epsilon": 1.0}),
        ("ir-dp", {"epsilon": 1.0, "k": 5}),
        ("insensitive-dp", {"epsilon": 1.0, "k": 20}),
    ],
)
def test_neighbours_with_the_same_release_give_byte_identical_public_files(tmp_path, method, params):
    """N1: ``a`` reaches the declared bounds (days = 7, band = 24), its neighbour ``b`` does
    not.  Given the same release, every public file is the same byte for byte: whether anyone
    sits at a bound is not disclosed (on the old code the guarantee, the metadata's warnings
    and the release note said "coincides with the data's maximum")."""
    a, b = _neighbours_at_the_bound()
    kw = dict(seed=5, types={"days": "integer", "band": "integer"}, **params)
    ra = engine.protect(a, method, DAYS_ROLES, DAYS_DOMS, **kw)
    rb = engine.protect(b, method, DAYS_ROLES, DAYS_DOMS, **kw)
    same = dataclasses.replace(rb, data=ra.data, row_map=ra.row_map, tables=ra.tables)
    files = {}
    for name, res in (("a", ra), ("b", same)):
        d = tmp_path / name
        d.mkdir()
        files[name] = export_release(res, d / "rel.csv", release_note=True)
    for kind in ("data", "metadata", "release_note"):
        ta = _strip_time(Path(files["a"][kind]).read_text(encoding="utf-8"))
        tb = _strip_time(Path(files["b"][kind]).read_text(encoding="utf-8"))
        assert ta == tb, kind
    text = Path(files["a"]["metadata"]).read_text(encoding="utf-8")
    assert "coincides" not in text and "weaker" not in text
    # the user is told, privately: a note with a code, in the audit trail
    assert any(getattr(n, "code", "") == "domain-at-data-bound" for n in ra.private_notes)
    assert not any(getattr(n, "code", "") == "domain-at-data-bound" for n in rb.private_notes)
    trail = json.loads(Path(files["a"]["private"]).read_text(encoding="utf-8"))
    assert any("coincides" in w for w in trail["private_notes"])


def test_real_limits_do_not_weaken_the_published_guarantee():
    """Days per week 0–7 and income bands 1–24 are the population's limits: the public text
    must not call the guarantee weaker because the data reaches them (it did)."""
    a, _ = _neighbours_at_the_bound()
    res = engine.protect(
        a, "laplace", DAYS_ROLES, DAYS_DOMS, epsilon=1.0, seed=1, types={"days": "integer", "band": "integer"}
    )
    assert "weaker" not in res.guarantee and "derived from the original" not in res.guarantee
    assert res.is_dp and res.guarantee.startswith("1-differential privacy")


@pytest.mark.parametrize(
    "method,roles,doms,params",
    [
        ("laplace", {"x": "eps-quasi", "c": "eps-quasi"}, {"x": (0, 100), "c": (0, 100)}, {"epsilon": 1}),
        (
            "ir-dp",
            {"x": "eps-quasi", "c": "eps-quasi"},
            {"x": (0, 100), "c": (0, 100)},
            {"epsilon": 1, "k": 4},
        ),
        ("mdav", {"x": "k-quasi", "c": "k-quasi"}, {}, {"k": 4}),
        ("k-eps", {"g": "k-quasi", "x": "eps-quasi"}, {"x": (0, 100)}, {"epsilon": 1, "k": 4}),
        ("local-suppression", {"g": "k-quasi", "h": "k-quasi"}, {}, {"k": 3}),
    ],
)
def test_public_metadata_is_a_function_of_the_parameters_and_the_release(method, roles, doms, params):
    """Over methods: the public metadata of neighbouring inputs (one record moved to the bound,
    a column made constant) differs only in what the release itself shows (its records and
    digest), never in the guarantee, the warnings or the precision."""
    rng = np.random.default_rng(8)
    n = 80
    a = pd.DataFrame(
        {
            "x": rng.integers(1, 99, n),
            "c": np.full(n, 50),
            "g": rng.choice(list("pq"), n),
            "h": rng.choice(list("uvw"), n),
        }
    )
    b = a.copy()
    b.loc[0, "x"] = 100  # b reaches the upper bound
    b.loc[1, "c"] = 51  # and its column c is no longer constant
    hier = {"g": [["p", "*"], ["q", "*"]]} if method == "k-eps" else None
    kw = dict(seed=3, hierarchies=hier, **params)
    ma = engine.protect(a, method, roles, doms, **kw).public_metadata()
    mb = engine.protect(b, method, roles, doms, **kw).public_metadata()
    for m in (ma, mb):
        m.pop("output_sha256"), m.pop("records_released")
    assert ma == mb


# ------------------------------------------------------------------ N2: default precision


def _counts(n: int = 200, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"hours": rng.integers(0, 80, n)})


@pytest.mark.parametrize("types", [None, {"hours": "integer"}])
def test_default_precision_does_not_depend_on_the_values_or_dtype(types):
    """N2: one record of 40.5, one missing value (pandas then reads floats) or SPSS's float64
    codes used to change γ from 1 to 10⁻⁴ (or 10⁻⁶), visibly in every released value.  The
    default now follows the declared type and domain only."""
    base = _counts()
    half = base.astype(float)
    half.loc[7, "hours"] = 40.5
    missing = base.astype(float)
    missing.loc[7, "hours"] = np.nan
    spss = base.astype(np.float64)  # integer codes read as float64
    variants = {"int": base, "40.5": half, "missing": missing, "float64": spss}
    seen = {}
    for name, df in variants.items():
        res = engine.protect(
            df,
            "laplace",
            {"hours": "eps-quasi"},
            {"hours": (0, 100)},
            epsilon=1.0,
            seed=2,
            drop_missing=True,
            types=types,
        )
        md = res.public_metadata()
        seen[name] = (md["precision"]["hours"], res.guarantee, str(res.data["hours"].dtype))
    assert len(set(seen.values())) == 1, seen
    gamma = seen["int"][0]
    assert gamma == (1.0 if types else 1e-4)


def test_cli_prints_a_private_hint_for_integer_valued_columns(tmp_path, capsys):
    """The CLI tells the user (stderr only) that a noisy column looks integer-valued and how to
    declare it; nothing of it reaches the public files."""
    src = tmp_path / "in.csv"
    _counts().to_csv(src, index=False)
    out = tmp_path / "rel.csv"
    base = [
        "protect",
        str(src),
        str(out),
        "--method",
        "laplace",
        "--epsilon",
        "1",
        "--role",
        "hours=eps-quasi",
        "--domain",
        "hours=0:100",
        "--no-measures",
        "--report",
        str(tmp_path / "rel.note.html"),
    ]
    assert cli.main(base) == 0
    err = capsys.readouterr().err
    assert "private note [integer-valued-untyped]" in err and "--type hours=integer" in err
    for p in (out.with_suffix(".metadata.json"), tmp_path / "rel.note.html"):
        assert "integer-valued" not in p.read_text(encoding="utf-8")
    assert json.loads(out.with_suffix(".metadata.json").read_text())["precision"] == {"hours": 0.0001}
    # declared: γ = 1, whole numbers out, no hint
    assert cli.main([*base[:2], str(tmp_path / "rel2.csv"), *base[3:], "--type", "hours=integer"]) == 0
    err = capsys.readouterr().err
    assert "integer-valued" not in err
    rel = pd.read_csv(tmp_path / "rel2.csv")
    assert pd.api.types.is_integer_dtype(rel["hours"])


# ------------------------------------------------------------------ N3: keyed randomness


def test_pinned_seed_at_two_epsilons_does_not_give_the_original_back():
    """N3: laplace at ε = 1 and ε = 2 with one pinned seed: 2·y₂ − y₁ was the original value
    for 213 of 213 values.  The run's generator now depends on ε: the combination is noise."""
    df = _days()
    kw = dict(seed=2024, types={"days": "integer", "band": "integer"})
    y1 = engine.protect(df, "laplace", DAYS_ROLES, DAYS_DOMS, epsilon=1.0, **kw)
    y2 = engine.protect(df, "laplace", DAYS_ROLES, DAYS_DOMS, epsilon=2.0, **kw)
    for c in ("days", "band"):
        est = 2 * _in_input_order(y2, c) - _in_input_order(y1, c)
        hits = np.mean(est == df[c].to_numpy())
        assert hits < 0.2, (c, hits)  # old code: 0.28 for days here (clamped), up to 1.0


def test_neighbouring_files_with_one_seed_do_not_show_the_true_change():
    """N3: two neighbouring files released with one pinned seed gave releases whose difference
    was exactly the true change (every other record released identically)."""
    rng = np.random.default_rng(12)
    a = pd.DataFrame({"x": rng.integers(20, 81, 300)})  # noise scale 10: little clamping
    b = a.copy()
    b.loc[5, "x"] = 21 if a.loc[5, "x"] != 21 else 22
    kw = dict(seed=77, epsilon=10.0, types={"x": "integer"})
    ra = engine.protect(a, "laplace", {"x": "eps-quasi"}, {"x": (0, 100)}, **kw)
    rb = engine.protect(b, "laplace", {"x": "eps-quasi"}, {"x": (0, 100)}, **kw)
    diff = _in_input_order(ra, "x") - _in_input_order(rb, "x")
    true = (a["x"] - b["x"]).to_numpy()
    assert np.mean(diff == true) < 0.2  # old code: 1.0 (same noise on every record)
    ka = engine.protect(a, "ir-dp", {"x": "eps-quasi"}, {"x": (0, 100)}, k=5, **kw)
    kb = engine.protect(b, "ir-dp", {"x": "eps-quasi"}, {"x": (0, 100)}, k=5, **kw)
    assert np.mean(_in_input_order(ka, "x") == _in_input_order(kb, "x")) < 0.5


def test_same_seed_data_and_parameters_reproduce_exactly_and_other_methods_differ():
    df = _days()
    kw = dict(seed=9, epsilon=1.0, types={"days": "integer", "band": "integer"})
    a = engine.protect(df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, **kw)
    b = engine.protect(df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, **kw)
    pd.testing.assert_frame_equal(a.data, b.data)
    np.testing.assert_array_equal(a.row_map, b.row_map)
    c = engine.protect(df, "idp-ls", DAYS_ROLES, DAYS_DOMS, k=5, **kw)  # same clusters
    assert not np.array_equal(a.row_map, c.row_map)
    # only the arrangement changes with 'order': the same noisy values, input order
    d = engine.protect(df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, order="input", **kw)
    np.testing.assert_array_equal(_in_input_order(a, "band"), d.data["band"].to_numpy(float))


def test_sweep_cells_and_protect_use_keyed_generators():
    """Sweep cells are keyed by their own ε and k as well: two ε run from one cell generator
    are independent (2·y₂ − y₁ is not the original)."""
    from dpstudio.engine.api import prepare, run_prepared
    from dpstudio.engine.random import point_rng

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.integers(20, 81, 400)})  # noise scale 10 and 5: little clamping
    prep = prepare(
        df,
        "laplace",
        {"x": "eps-quasi"},
        {"x": (0, 100)},
        epsilon=10.0,
        types={"x": "integer"},
        order="input",
    )
    y1 = run_prepared(prep, rng=point_rng(5, 0, 0, 0), epsilon=10.0).data["x"].to_numpy()
    y2 = run_prepared(prep, rng=point_rng(5, 0, 0, 0), epsilon=20.0).data["x"].to_numpy()
    assert np.mean(2 * y2 - y1 == df["x"].to_numpy()) < 0.2


# ------------------------------------------------------------------ the data digest


def test_digest_is_partition_independent_order_dependent_and_dtype_free():
    from dpstudio.engine.keying import combine_partials, data_digest, digest_partial

    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"x": rng.integers(0, 100, 1000), "s": rng.choice(list("abc"), 1000), "y": rng.normal(size=1000)}
    )
    cols = ["x", "s", "y"]
    whole = data_digest(df, cols)
    for cuts in ([0, 1000], [0, 1, 999, 1000], [0, 333, 334, 700, 1000]):
        parts = [digest_partial(df.iloc[a:b], cols) for a, b in zip(cuts[:-1], cuts[1:])]
        assert combine_partials(parts) == whole
    assert data_digest(df.astype({"x": float}), cols) == whole  # 1 and 1.0 agree
    assert data_digest(df.iloc[::-1].reset_index(drop=True), cols) != whole  # order counts
    for i in (0, 500, 999):  # any one record
        nb = df.copy()
        nb.loc[i, "y"] += 1e-12
        assert data_digest(nb, cols) != whole
    swapped = df.copy()
    swapped.iloc[[3, 4]] = df.iloc[[4, 3]].to_numpy()
    assert data_digest(swapped, cols) != whole
    assert data_digest(df.iloc[:999], cols) != whole


def test_dask_release_keyed_on_the_data_as_in_memory():
    """On Dask the digest is combined from the partitions: the same release as in memory for
    the same seed, and neighbouring files no longer share the noise."""
    dd = pytest.importorskip("dask.dataframe")
    import dask

    from dpstudio.engine.backends import dask_backend as DB

    a = _days(400)
    b = a.copy()
    b.loc[10, "band"] = 1 if a.loc[10, "band"] != 1 else 2
    kw = dict(seed=31, epsilon=1.0, types={"days": "integer", "band": "integer"})
    out = {}
    with dask.config.set(scheduler="synchronous"):
        for name, df in (("a", a), ("b", b)):
            mem = engine.protect(df, "laplace", DAYS_ROLES, DAYS_DOMS, **kw)
            got = DB.protect_dask(
                dd.from_pandas(df, npartitions=3), "laplace", DAYS_ROLES, DAYS_DOMS, **kw
            ).compute()
            pd.testing.assert_frame_equal(got, mem.data, check_dtype=False)
            out[name] = mem
    same = np.mean(_in_input_order(out["a"], "days") == _in_input_order(out["b"], "days"))
    assert same < 0.5


# ------------------------------------------------------------------ record order, households


def _silc(n_households: int = 150, seed: int = 6) -> pd.DataFrame:
    """An EU-SILC-like person file: members of a household in adjacent rows, household-level
    columns (region, tenure, household size) identical inside a household."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in range(n_households):
        size = int(rng.integers(1, 6))
        region, tenure = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        for _ in range(size):
            rows.append(
                {
                    "hid": f"H{h:04d}",
                    "region": region,
                    "tenure": tenure,
                    "hhsize": size,
                    "sex": int(rng.integers(1, 3)),
                    "agegroup": int(rng.integers(1, 8)),
                    "weight": 100.0 + h,
                }
            )
    return pd.DataFrame(rows)


SILC_ROLES = {
    "hid": "household",
    "region": "k-quasi",
    "sex": "k-quasi",
    "agegroup": "k-quasi",
    "weight": "weight",
}


def _adjacent_same_household(res) -> float:
    """Share of adjacent released rows whose records belong to one household."""
    hid = res.aligned_original()["hid"].to_numpy()
    return float(np.mean(hid[1:] == hid[:-1]))


def test_households_are_not_adjacent_in_a_local_suppression_release():
    """Household id not released, household-level columns identical: in input order the
    members sat in adjacent rows and households could be rebuilt.  The release is in random
    order: adjacency of members is at chance level."""
    df = _silc()
    res = engine.protect(df, "local-suppression", SILC_ROLES, k=3, seed=4)
    assert "hid" not in res.data.columns
    sizes = df.groupby("hid").size().to_numpy()
    chance = float((sizes * (sizes - 1)).sum()) / (len(df) * (len(df) - 1))
    inp = float(np.mean(df["hid"].to_numpy()[1:] == df["hid"].to_numpy()[:-1]))
    assert inp > 0.5  # the input: members adjacent
    assert _adjacent_same_household(res) < chance + 0.05  # the release: chance
    # a permutation that does not follow the input order: a sorted copy of the input gives
    # a release just as mixed
    resorted = df.sort_values(["region", "hid"]).reset_index(drop=True)
    res2 = engine.protect(resorted, "local-suppression", SILC_ROLES, k=3, seed=4)
    assert _adjacent_same_household(res2) < chance + 0.05
    assert "random order" in res.guarantee
    # keeping the input order is a labelled choice
    kept = engine.protect(df, "local-suppression", SILC_ROLES, k=3, seed=4, order="input")
    assert kept.row_map is None or np.array_equal(kept.row_map, np.arange(len(df)))
    assert "INPUT ORDER" in kept.guarantee
    assert any("order=input" in w for w in kept.public_warnings)


def test_old_shuffle_parameter_is_read_as_order():
    df = _days()
    a = engine.protect(df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, epsilon=1.0, seed=1, shuffle=False)
    assert a.params["order"] == "input" and "shuffle" not in a.params
    with pytest.raises(engine.ParameterError, match="'order' only"):
        engine.protect(
            df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, epsilon=1.0, seed=1, shuffle=False, order="random"
        )
    with pytest.raises(engine.ParameterError, match="'shuffle' parameter"):
        engine.protect(df, "ir-dp", DAYS_ROLES, DAYS_DOMS, k=5, epsilon=1.0, seed=1, shuffle="maybe")


def test_keyed_permutation_is_the_order_of_its_sort_keys_also_with_ties():
    """The release order (every method, both backends): ids ordered by (first word, second
    word) of their keyed sort keys; the fast path (one argsort) must agree with lexsort."""
    from dpstudio.engine.algorithms import keyed as K

    st = K.KeyedStream((1, 2), K.PURPOSE_SHUFFLE, 0)
    k0, k1 = K.sort_keys(st, np.arange(5000))
    np.testing.assert_array_equal(K.permutation(st, 5000), np.lexsort((k1, k0)))

    class Tied:  # first words tie in threes: the second word decides
        def block(self, ids, rnd=0, lane=0):
            ids = np.asarray(ids, dtype=np.int64)
            w = np.zeros((ids.size, 4), dtype=np.uint64)
            w[:, 0] = ids // 3
            w[:, 1] = np.uint64(1000) - ids.astype(np.uint64)
            return w

    np.testing.assert_array_equal(K.permutation(Tied(), 10), [2, 1, 0, 5, 4, 3, 8, 7, 6, 9])


# ------------------------------------------------------------------ hostile input, new options


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--order", "sideways"], "--order"),
        (["--order", ""], "--order"),
        (["--param", "order=households"], "'order' parameter"),
        (["--param", "shuffle=maybe"], "'shuffle' parameter"),
        (["--param", "shuffle=false", "--order", "random"], "'order' only"),
        (["--type", "x=integer", "--type", "y=whole-ish"], "unknown type"),
    ],
)
def test_cli_bad_order_or_type_is_one_line_exit_2(tmp_path, capsys, extra, needle):
    src = tmp_path / "in.csv"
    pd.DataFrame({"x": range(20), "y": range(20)}).to_csv(src, index=False)
    out = tmp_path / "o.csv"
    options = "--method ir-dp --k 3 --epsilon 1 --role x=eps-quasi --domain x=0:100".split()
    rc = cli.main(["protect", str(src), str(out), *options, *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_declared_integer_with_fractions_and_text_columns(tmp_path, capsys):
    """A column declared integer that holds 40.5 is rounded to the grid (a private note says
    so); a text column declared integer is refused in one line, naming it."""
    df = _counts().astype(float)
    df.loc[3, "hours"] = 40.5
    res = engine.protect(
        df,
        "laplace",
        {"hours": "eps-quasi"},
        {"hours": (0, 100)},
        epsilon=1.0,
        seed=1,
        types={"hours": "integer"},
    )
    notes = [n for n in res.private_notes if n.code == "non-integer-values"]
    assert len(notes) == 1 and "row(s) 4" in notes[0] and "40.5" in notes[0]
    assert pd.api.types.is_integer_dtype(res.data["hours"]) and res.precision == {"hours": 1.0}
    assert "40.5" not in json.dumps(res.public_metadata())
    text = pd.DataFrame({"hours": ["a", "b"] * 10})
    with pytest.raises(engine.InputError, match="'hours'.*must be numeric"):
        engine.protect(
            text,
            "laplace",
            {"hours": "eps-quasi"},
            {"hours": (0, 100)},
            epsilon=1.0,
            types={"hours": "integer"},
        )


def test_an_old_recipes_shuffle_is_read_as_order_and_the_command_line_overrides_it(tmp_path, capsys):
    from dpstudio.engine.recipe import Recipe

    src = tmp_path / "in.csv"
    pd.DataFrame({"x": range(30)}).to_csv(src, index=False)
    rec = tmp_path / "old.recipe.json"
    rec.write_text(
        json.dumps(
            Recipe(
                method="ir-dp",
                roles={"x": "eps-quasi"},
                domains={"x": (0, 100)},
                params={"k": 3, "epsilon": 1.0, "shuffle": False},
            ).to_dict()
        )
    )
    base = ["protect", str(src), "--recipe", str(rec), "--no-measures"]
    assert cli.main([base[0], base[1], str(tmp_path / "a.csv"), *base[2:]]) == 0
    assert "INPUT ORDER" in capsys.readouterr().out
    assert cli.main([base[0], base[1], str(tmp_path / "b.csv"), *base[2:], "--order", "random"]) == 0
    out = capsys.readouterr().out
    assert "random order" in out and "INPUT ORDER" not in out
