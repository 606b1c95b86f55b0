"""Chains of steps (issue 23 §2): the composed guarantee of real runs, determinism, undo and
re-run, composed row maps, measures after every step, hostile pipelines.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine import registry
from dpstudio.engine.chain import MAX_STEPS, ChainRun, load_pipeline, parse_steps, protect_chain
from dpstudio.engine.errors import DPStudioError, NotApplicableError, ParameterError
from dpstudio.engine.guarantee import Clause, Effect, Effects, Guarantee, Model, Scope
from dpstudio.engine.protection import _common
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output
from tests.conftest import shared_path

SEED = 0x5EED5EED5EED5EED5EED5EED5EED5EED
KEYS = {"SEX": "k-quasi", "AGE": "k-quasi", "MARSTAT": "k-quasi"}
CAT = {c: "categorical" for c in KEYS}
FREE1_ROLES = {**KEYS, "WEIGHT": "weight", "INCOME": "eps-quasi"}
INCOME = {"INCOME": (0.0, 2_000_000.0)}


@pytest.fixture(scope="module")
def free1() -> pd.DataFrame:
    return pd.read_csv(shared_path("free1", "free1.csv"))


@pytest.fixture(scope="module")
def census() -> pd.DataFrame:
    return pd.read_csv(shared_path("census.csv"))


def _pram_run(job: Job) -> Output:
    """A PRAM stand-in (until t-methods' pram): each key value replaced by a uniformly drawn
    category of its column with probability 0.2."""
    out = job.data.copy()
    for c in job.columns(Role.K_QUASI):
        vals = out[c].to_numpy(dtype=object)
        cats = pd.unique(pd.Series(vals).dropna())
        hit = job.rng.random(len(vals)) < 0.2
        hit &= pd.notna(vals)
        vals[hit] = job.rng.choice(cats, int(hit.sum()))
        out[c] = pd.Series(vals, dtype=object)
    return Output(out, protected=job.columns(Role.K_QUASI))


PRAM_SPEC = MethodSpec(
    id="test-pram",
    name="test PRAM",
    family="test",
    description="test only",
    paper="-",
    params=(_common.ORDER_PARAM,),
    protects=(Role.K_QUASI,),
    requires=(Role.K_QUASI,),
    guarantee=lambda ctx: Guarantee(
        model=Model.PLAUSIBLE_DENIABILITY,
        clauses=(Clause("claim", "Plausible deniability (test PRAM)."),),
        covered=ctx.attributes,
    ),
    run=_pram_run,
    uses_k=False,
    numeric_only=False,
    missing_matches_any=True,  # keeps suppressed (missing) values
    effects=lambda ctx: Effects(changes={c: Effect.PERTURB for c in (ctx.columns(Role.K_QUASI) or [])}),
)


@pytest.fixture
def pram():
    registry.register(PRAM_SPEC)
    yield PRAM_SPEC.id
    registry._REGISTRY.pop(PRAM_SPEC.id, None)


def _ls_irdp(free1, **kw):
    steps = [
        {"method": "local-suppression", "params": {"k": 3}},
        {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
    ]
    return protect_chain(free1, steps, FREE1_ROLES, INCOME, seed=SEED, types=CAT, **kw)


# ------------------------------------------------------------------ the composed guarantee


def test_dp_step_after_suppression_of_other_columns_holds_per_attribute(free1):
    """local-suppression on the keys, then ir-dp on INCOME: the suppression neither reads nor
    changes INCOME, so ir-dp's ε-DP holds -- per attribute, as ir-dp says when other columns
    are released beside its clusters; the keys keep their 3-anonymity; ε = 1."""
    res = _ls_irdp(free1)
    g = res.guarantee_info
    assert g.model is Model.EPSILON_DP and g.scope is Scope.PER_ATTRIBUTE and not res.is_dp
    assert g.epsilon_total == 1.0 and g.epsilon_shares == {"INCOME": 1.0}
    assert [p.model for p in g.parts] == [Model.K_ANONYMITY, Model.EPSILON_DP]
    assert {u.column: u.reason for u in g.uncovered}["SEX"] == "other-claim"
    assert not g.has_clause("lost") and g.narrowed
    assert res.guarantee.startswith("Step 1 (local-suppression): 3-anonymity")
    assert "Step 2 (ir-dp): Per-attribute only" in res.guarantee


def test_dp_step_after_a_data_dependent_step_on_its_column_loses_dp(census):
    """k-eps perturbs FEDTAX from the data (noise scaled to each class) and removes records:
    ir-dp on FEDTAX after it is not ε-DP; the (k, ε)-anonymity of the keys stays."""
    res = protect_chain(
        census,
        [
            {"method": "k-eps", "params": {"k": 5, "epsilon": 1.0}},
            {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
        ],
        {"FICA": "k-quasi", "FEDTAX": "eps-quasi"},
        {"FEDTAX": (0, 32000)},
        seed=SEED,
    )
    g = res.guarantee_info
    assert not res.is_dp and g.model is Model.K_EPSILON_ANONYMITY and g.epsilon_total is None
    assert [p.model for p in g.parts] == [Model.K_EPSILON_ANONYMITY]
    lost = [c.text for c in g.clauses if c.code == "lost"]
    assert len(lost) == 1 and "step 2 (ir-dp)" in lost[0] and "step 1 (k-eps)" in lost[0]
    assert "No differential privacy for the chain." in res.guarantee


def test_budgets_add_up(census):
    roles = {"FICA": "eps-quasi", "FEDTAX": "eps-quasi"}
    doms = {"FICA": (0, 12000), "FEDTAX": (0, 32000)}
    res = protect_chain(
        census,
        [
            {"method": "laplace", "params": {"epsilon": 1.0}},
            {"method": "laplace", "params": {"epsilon": 0.5, "budget": "per-attribute"}},
        ],
        roles,
        doms,
        seed=SEED,
    )
    g = res.guarantee_info
    assert res.is_dp and g.epsilon_total == pytest.approx(2.0)  # 1 (split) + 0.5·2 (per attribute)
    assert g.epsilon_shares == pytest.approx({"FICA": 1.0, "FEDTAX": 1.0})
    assert "with ε = 2 by sequential composition over its 2 DP step(s)" in res.guarantee


def test_k_anonymity_after_microaggregation_then_laplace(census):
    res = protect_chain(
        census,
        [{"method": "mdav", "params": {"k": 5}}, {"method": "laplace", "params": {"epsilon": 1.0}}],
        {"FICA": "k-quasi", "FEDTAX": "eps-quasi"},
        {"FEDTAX": (0, 32000)},
        seed=SEED,
    )
    g = res.guarantee_info
    assert res.is_dp and g.epsilon_total == 1.0 and g.covered == ("FEDTAX",)
    assert [p.model for p in g.parts] == [Model.K_ANONYMITY, Model.EPSILON_DP]
    assert {u.column: u.reason for u in g.uncovered}["FICA"] == "other-claim"
    assert "Not covered by the epsilon-dp claim: FICA" in res.guarantee
    ev = engine.assess(res, level="full").measures
    assert ev["k_min_class_size"] >= 5  # the surviving claim is measured


def test_suppression_then_pram_leaves_no_k_anonymity(free1, pram):
    res = protect_chain(
        free1,
        [{"method": "local-suppression", "params": {"k": 3}}, {"method": pram, "params": {}}],
        {**KEYS, "WEIGHT": "weight"},
        seed=SEED,
        types=CAT,
    )
    g = res.guarantee_info
    assert g.model is Model.PLAUSIBLE_DENIABILITY and g.k is None
    assert not any(p.model in (Model.K_ANONYMITY, Model.PROBABILISTIC_K_ANONYMITY) for p in g.parts)
    lost = [c.text for c in g.clauses if c.code == "lost"]
    assert len(lost) == 1 and "k-anonymity claim of step 1 (local-suppression) does not hold" in lost[0]
    assert "kanon" not in engine.assess(res, level="full").measures.get("warnings", [])
    assert "k_min_class_size" not in engine.assess(res, level="full").measures  # no claim: no check


def test_every_quasi_identifier_needs_a_step(free1):
    with pytest.raises(NotApplicableError, match="INCOME"):
        protect_chain(
            free1,
            [{"method": "local-suppression", "params": {"k": 3}}],
            FREE1_ROLES,
            INCOME,
            seed=SEED,
            types=CAT,
        )


def test_separate_tables_only_as_the_last_step(census):
    roles = {"FICA": "eps-quasi", "FEDTAX": "eps-quasi"}
    doms = {"FICA": (0, 12000), "FEDTAX": (0, 32000)}
    with pytest.raises(ParameterError, match="only be the last step"):
        protect_chain(
            census,
            [
                {"method": "ir-dp", "params": {"k": 5, "layout": "separate-tables"}},
                {"method": "laplace", "params": {}},
            ],
            roles,
            doms,
            seed=SEED,
        )


# ------------------------------------------------------------------ runs


def test_seeded_chain_repeats_bit_for_bit(free1):
    a, b = _ls_irdp(free1), _ls_irdp(free1)
    assert a.data.equals(b.data) and a.guarantee == b.guarantee
    assert np.array_equal(a.row_map, b.row_map)
    c = protect_chain(
        free1,
        [
            {"method": "local-suppression", "params": {"k": 3}},
            {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
        ],
        FREE1_ROLES,
        INCOME,
        seed=SEED + 1,
        types=CAT,
    )
    assert not c.data["INCOME"].equals(a.data["INCOME"])


def test_undo_returns_the_exact_earlier_result(free1, pram):
    run = ChainRun(free1, FREE1_ROLES, INCOME, types=CAT, seed=SEED)
    one = run.run([{"method": "local-suppression", "params": {"k": 3}}])
    first = one.result()
    two = one.run(
        [
            {"method": "local-suppression", "params": {"k": 3}},
            {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
        ]
    )
    assert two.records[0].frame is None  # compacted: only the last release is kept whole
    rebuilt = two.result(0)  # step 1's release rebuilt from its changed columns
    back = two.undo().result()
    for r in (rebuilt, back):
        assert r.data.equals(first.data) and list(r.data.columns) == list(first.data.columns)
        assert r.guarantee == first.guarantee and np.array_equal(r.row_map, first.row_map)
        assert [str(w) for w in r.warnings] == [str(w) for w in first.warnings]
    assert len(two) == 2 and len(one) == 1  # the runs are separate objects
    # three steps: step 2's release rebuilt from columns changed by steps 1 AND 2
    second = two.result()
    three = two.run([*two.steps, {"method": pram, "params": {}}])
    assert three.records[1].frame is None
    for r in (three.result(1), three.undo().result()):
        assert r.data.equals(second.data) and r.guarantee == second.guarantee
        assert np.array_equal(r.row_map, second.row_map)


def test_rerun_from_a_step_keeps_the_earlier_steps(free1):
    steps = [
        {"method": "local-suppression", "params": {"k": 3}},
        {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
    ]
    run = ChainRun(free1, FREE1_ROLES, INCOME, types=CAT, seed=SEED).run(steps)
    full = run.result()
    again = run.run(steps, start=1)
    assert again.records[0].result is run.records[0].result  # not run again
    assert again.result().data.equals(full.data)
    changed = [steps[0], {"method": "ir-dp", "params": {"k": 10, "epsilon": 1.0}}]
    other = run.run(changed)  # starts at the first changed step
    assert other.records[0].result is run.records[0].result and not other.result().data.equals(full.data)
    assert other.result().data.equals(
        ChainRun(free1, FREE1_ROLES, INCOME, types=CAT, seed=SEED).run(changed).result().data
    )


def test_row_maps_compose_with_shuffles_and_drops(free1, pram):
    """Every step shuffles; the second drops the records whose keys were suppressed (mdav
    with drop_missing).  The composed row map must pair each released record with its own
    original: the columns no step changes are equal record by record."""
    f = free1.assign(ID=np.arange(len(free1)))
    roles = {**KEYS, "WEIGHT": "weight"}
    res = protect_chain(
        f,
        [
            {"method": "local-suppression", "params": {"k": 5}},
            {"method": "mdav", "params": {"k": 3, "drop_missing": True}},
            {"method": pram, "params": {}},
        ],
        roles,
        seed=SEED,
    )
    orig = res.aligned_original()
    assert len(orig) == len(res.data) < len(f) and len(res.dropped_rows) == len(f) - len(res.data)
    assert not np.array_equal(res.row_map, np.sort(res.row_map))  # shuffled
    for c in ("ID", "REGION", "WEIGHT", "INCOME", "EDUC1"):
        assert np.array_equal(res.data[c].to_numpy(), orig[c].to_numpy()), c
    # the dropped records are exactly those with a suppressed key after step 1
    step1 = ChainRun(f, roles, seed=SEED).run([{"method": "local-suppression", "params": {"k": 5}}]).result()
    gone = step1.data.loc[step1.data[list(KEYS)].isna().any(axis=1), "ID"]
    assert sorted(gone) == sorted(res.dropped_rows)


def test_measures_after_every_step(free1):
    from dpstudio.engine.chain import chain_figures

    run = ChainRun(free1, FREE1_ROLES, INCOME, types=CAT, seed=SEED).run(
        [
            {"method": "local-suppression", "params": {"k": 3}},
            {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
        ]
    )
    a1, a2 = chain_figures(run)
    f1, f2 = a1.figures(), a2.figures()
    assert f1["risk_records_fk_lt_3"] == 0 == f2["risk_records_fk_lt_3"]
    assert f1["suppressed_cells"] == f2["suppressed_cells"] > 0
    # step 1 leaves INCOME alone: its weighted total is exact; step 2 adds noise to it
    t1 = a1.weighted.table.set_index(["variable", "statistic"]).loc[("INCOME", "total")]
    t2 = a2.weighted.table.set_index(["variable", "statistic"]).loc[("INCOME", "total")]
    assert t1["relative_error"] == 0.0 and t2["relative_error"] != 0.0


# ------------------------------------------------------------------ weighted estimates


def test_weighted_estimates_by_hand_on_free1(free1):
    res = _ls_irdp(free1)
    a = engine.assess(
        res, level="step", weighted={"totals": ["INCOME"], "means": ["INCOME"], "shares": ["SEX", "MARSTAT"]}
    )
    t = a.weighted.table
    w = [float(v) for v in free1["WEIGHT"]]
    x = [float(v) for v in free1["INCOME"]]
    tot = sum(wi * xi for wi, xi in zip(w, x))
    wr = [float(v) for v in res.data["WEIGHT"]]
    xr = [float(v) for v in res.data["INCOME"]]
    tot_r = sum(wi * xi for wi, xi in zip(wr, xr))
    row = t[(t.variable == "INCOME") & (t.statistic == "total")].iloc[0]
    assert row.original == pytest.approx(tot, rel=1e-12) and row.release == pytest.approx(tot_r, rel=1e-12)
    assert row.relative_error == pytest.approx((tot_r - tot) / abs(tot), rel=1e-9)
    mean = t[(t.variable == "INCOME") & (t.statistic == "mean")].iloc[0]
    assert mean.original == pytest.approx(tot / sum(w), rel=1e-12)
    # shares: SEX = 2, by hand; a suppressed value counts in "(missing)"
    sh = t[(t.variable == "SEX") & (t.statistic == "share")].set_index("category")
    by_hand = sum(wi for wi, s in zip(w, free1["SEX"]) if s == 2) / sum(w)
    rel = sum(wi for wi, s in zip(wr, res.data["SEX"]) if s == 2) / sum(wr)
    miss = sum(wi for wi, s in zip(wr, res.data["SEX"]) if pd.isna(s)) / sum(wr)
    assert sh.loc["2", "original"] == pytest.approx(by_hand, rel=1e-12)
    assert sh.loc["2", "release"] == pytest.approx(rel, rel=1e-12)
    assert sh.get("release", pd.Series()).get("(missing)", 0.0) == pytest.approx(miss, abs=1e-15)
    shares = t[(t.variable == "MARSTAT") & (t.statistic == "share")]
    assert shares.original.sum() == pytest.approx(1.0) and shares.release.sum() == pytest.approx(1.0)


def test_weighted_estimates_refuse_bad_weights():
    from dpstudio.engine.errors import InputError
    from dpstudio.engine.measures.weighted import weighted_estimates

    o = pd.DataFrame({"w": [1.0, np.nan], "x": [1.0, 2.0]})
    with pytest.raises(InputError, match="'w'"):
        weighted_estimates(o, o, weight="w", totals=["x"])
    with pytest.raises(ParameterError, match="'nope'"):
        weighted_estimates(o.fillna(1), o.fillna(1), weight="w", totals=["nope"])


# ------------------------------------------------------------------ hostile pipelines


@pytest.mark.parametrize(
    "steps,needle",
    [
        ({"steps": [{"method": "no-such-method"}]}, "Unknown method"),
        ({"steps": [{"method": "mdav", "params": {"k": "five"}}]}, "'k'"),
        ({"steps": [{"method": "mdav", "params": {"k": 3, "bogus": 1}}]}, "bogus"),
        ({"steps": [{"method": "mdav", "params": [3]}]}, "'params' must be an object"),
        ({"steps": [{"method": 7}]}, "'method' must be a method id"),
        ({"steps": [{"method": "mdav", "extra": 1}]}, "unknown key"),
        ({"steps": "mdav"}, "must be a list"),
        ({"steps": []}, "no steps"),
        ({"stages": []}, "unknown key"),
        ({"steps": [{"method": "mdav"}] * 10_000}, "10,000 steps"),
        ([["mdav"]], "must be an object"),
    ],
)
def test_hostile_steps_one_line(steps, needle):
    with pytest.raises(DPStudioError) as e:
        parse_steps(steps)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and len(msg) < 400


def test_hostile_pipeline_files(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"steps": ' + "[" * 5000 + "]" * 5000 + "}")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "many.json"
    big.write_text(json.dumps({"steps": [{"method": "mdav", "params": {"k": 3}}] * 10_000}))
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": [{"method": "mdav", "params": {"k": 3}},]}')
    for p, needle in (
        (deep, "deep"),
        (fifo, "not a regular file"),
        (big, "at most 50"),
        (bad, "bad.json"),
        (tmp_path / "missing.json", "missing.json"),
        (tmp_path, "folder"),
    ):
        with pytest.raises(DPStudioError) as e:
            load_pipeline(p)
        assert "\n" not in str(e.value) and needle.lower() in str(e.value).lower(), (p, str(e.value))
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"steps": [{"method": "mdav", "params": {"k": 3}}]}))
    assert [s.method for s in load_pipeline(ok)] == ["mdav"] and MAX_STEPS == 50


def test_a_failing_step_names_itself(free1):
    """mdav cannot average the suppressed (missing) keys without drop_missing: the error says
    which step."""
    with pytest.raises(DPStudioError, match=r"^Step 2 \(mdav\): "):
        protect_chain(
            free1,
            [{"method": "local-suppression", "params": {"k": 3}}, {"method": "mdav", "params": {"k": 3}}],
            KEYS,
            seed=SEED,
            types=None,
        )


def test_cancel_between_steps(free1):
    calls = []

    def cancel():
        calls.append(1)
        if len(calls) > 3:
            raise engine.Cancelled()

    run = ChainRun(free1, FREE1_ROLES, INCOME, types=CAT, seed=SEED)
    with pytest.raises(engine.Cancelled):
        run.run(
            [
                {"method": "local-suppression", "params": {"k": 3}},
                {"method": "ir-dp", "params": {"k": 5, "epsilon": 1.0}},
            ],
            check_cancel=cancel,
        )
    assert len(run) == 0  # the run it was called on is unchanged


def test_public_metadata_of_a_chain(free1):
    res = _ls_irdp(free1)
    md = res.public_metadata()
    assert md["method"] == "chain" and [s["method"] for s in md["parameters"]["steps"]] == [
        "local-suppression",
        "ir-dp",
    ]
    assert md["guarantee"] == res.guarantee and md["differential_privacy"] is False
    text = json.dumps(md)
    assert "seed" not in text.lower() and "suppressed" not in text.split('"guarantee"')[0]
    assert all(n.public for n in md["warnings"]) if md["warnings"] else True
