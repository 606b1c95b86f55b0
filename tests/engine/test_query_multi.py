"""Multicomponent queries (thesis §5.3, Examples 7-8, Proposition 4): joint refinement over the
product range, per-component refinement with a budget split, disjoint components."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query import (
    ALPHA_BITS,
    BudgetLedger,
    CategoricalRange,
    MultiQuery,
    NumericRange,
    Prior,
    disjoint_components,
    eps_fraction,
    evaluate_filter,
    exp_bounds,
    factors,
    joint_distances,
    parse_any,
    parse_filter,
    refine_multicomponent,
    refine_query,
    refine_weights,
    refined_probabilities,
)
from dpstudio.engine.query.multi import _component_distance, _joint_weights, _split_epsilons
from dpstudio.engine.query.refinement import _center

E = math.e


def _bound(eps) -> Fraction:
    return exp_bounds(eps if isinstance(eps, Fraction) else eps_fraction(eps), 80)[0]


def exact_joint(df, mq, priors, eps, distance, kind="statistical"):
    """The exact joint distribution refine_multicomponent samples in mode joint."""
    comps = mq.components
    w = _joint_weights(priors, None)
    au, ad = factors(eps, kind)
    cd = []
    for q, p in zip(comps, priors):
        c, _, _ = _center(df, q, p.support, evaluate_filter(df, parse_filter(q.where)))
        cd.append(_component_distance(p.support, c))
    if all(d == [0] * len(d) and m == 1 for d, m in cd) and all(
        _center(df, q, p.support, evaluate_filter(df, parse_filter(q.where)))[0] is None
        for q, p in zip(comps, priors)
    ):
        cls, mass = [2] * len(w), [0, 0, (1 << ALPHA_BITS) * sum(w)]
    else:
        cls, mass, _ = refine_weights(
            w, joint_distances([d for d, _ in cd], [m for _, m in cd], distance), au, ad
        )
    return refined_probabilities(w, cls, mass)


def exact_split(df, mq, priors, eps_list):
    """The exact product distribution of mode split (independent components)."""
    comp = []
    for q, p, e in zip(mq.components, priors, eps_list):
        w = p.weights()
        au, ad = factors(e, q.kind)
        c, _, _ = _center(df, q, p.support, evaluate_filter(df, parse_filter(q.where)))
        if c is None:
            cls, mass = [2] * len(w), [0, 0, (1 << ALPHA_BITS) * sum(w)]
        else:
            cls, mass, _ = refine_weights(w, _component_distance(p.support, c)[0], au, ad)
        comp.append(refined_probabilities(w, cls, mass))
    return [math.prod(t) for t in itertools.product(*comp)]


# ============================================================== parsing


def test_parse_multicomponent_forms():
    mq = parse_any("mean(income), mean(age) where region == 3")
    assert isinstance(mq, MultiQuery) and [q.describe() for q in mq.components] == [
        "mean(income) where region == 3",
        "mean(age) where region == 3",
    ]
    mq = parse_any("mean(income) where region in (1, 2); count where age > 30")
    assert [q.where for q in mq.components] == ["region in (1, 2)", "age > 30"]
    assert parse_any("mean(income) where region in (1, 2)").agg == "mean"  # one component
    mq = parse_any("count, proportion where name == 'a, b; c'")
    assert len(mq.components) == 2 and mq.components[0].where == "name == 'a, b; c'"
    for bad in ("mean(x), where a == 1", "count; ", "count, count", "count, mean(x) by g"):
        with pytest.raises(ParameterError):
            parse_any(bad)


def test_disjointness_is_read_from_the_query_text():
    d = lambda t: disjoint_components(parse_any(t).components)  # noqa: E731
    assert d("value(B) where id == 1; value(B) where id == 2")
    assert d("count where age < 30; count where age >= 30 and region == 1")
    assert d("mean(x) where g in (1, 2); mean(x) where g == 3; sum(x) where g in (4, 5)")
    assert d("count where age <= 30; count where age == 31")
    assert not d("count where age <= 30; count where age >= 30")
    assert not d("count where g == 1; count where h == 2")
    assert not d("count where g == 1; count where not g == 1")  # 'not' is not used
    assert not d("proportion where g == 1; proportion where g == 2")  # shared denominator
    assert not d("count where g == 1 or g == 2; count where g == 2")


# ============================================================== Example 8 / Tables 5.3-5.4 / Prop. 4


def test_thesis_example_8_tables_5_3_and_5_4():
    """f1, f2 = value of B for individuals 1 and 2, uniform priors on {0, 1}, ε = 1, both true
    values 0: P(K = 1 | f = 0) = 0.5αd = 0.1839, 0.8161; the joint response is the product
    (Table 5.3); removing individual 1 or 2 (Table 5.4) changes it by ratios αd and 2 − αd
    only, within [e^−1, e]: max εi = 1, not 2 (Proposition 4)."""
    df = pd.DataFrame({"ID": [1, 2, 3], "B": [0, 0, 1]})
    q = "value(B) where ID == 1; value(B) where ID == 2"
    pr = [Prior.uniform(NumericRange(0, 1, 1))] * 2
    ans = refine_multicomponent(df, q, pr, 1.0, mode="split", rng=0)
    assert ans.epsilon == 1.0 and ans.epsilons == [1.0, 1.0] and "Proposition 4" in ans.guarantee
    ad = 1 / E
    for r in ans.refined:
        assert r == pytest.approx([1 - 0.5 * ad, 0.5 * ad]) and round(r[1], 4) == 0.1839
    mq = parse_any(q)
    t53 = exact_split(df, mq, pr, [Fraction(1)] * 2)
    assert [float(x) for x in t53] == pytest.approx(
        [(1 - 0.5 * ad) ** 2, (1 - 0.5 * ad) * 0.5 * ad, (1 - 0.5 * ad) * 0.5 * ad, 0.25 * ad * ad]
    )
    ratios = set()
    for drop in (0, 1):
        t54 = exact_split(df.drop(index=drop), mq, pr, [Fraction(1)] * 2)
        for a, b in zip(t53, t54):
            ratios.add(round(float(a / b), 9))
            assert a / b <= _bound(1.0) and b / a <= _bound(1.0)
    assert ratios == {round(ad, 9), round(2 - ad, 9)}


# ============================================================== property: exact ratios ≤ e^ε

QUERIES = [
    "mean(x), count where g == 2",
    "median(x) where g != 1; proportion where x >= 5",
    "sum(x), mode(g)",
    "count where g == 1; count where g == 2; mean(x) where g == 3",
    "value(x) where id == 1; mean(x)",
    "value(x), value(g) where id == 2",
]


def _support(q, data):
    if q.agg == "mode":
        return CategoricalRange((1, 2, 3), ordered=data.draw(st.booleans()))
    if q.agg in ("proportion",):
        return NumericRange(0, 1, 0.25)
    if q.agg in ("mean", "median"):
        return NumericRange(0, 9, data.draw(st.sampled_from([1.0, 3.0])))
    return NumericRange(0, data.draw(st.sampled_from([4, 9])), 1)


def _prior(sup, data):
    if isinstance(sup, NumericRange) and data.draw(st.booleans()):
        return Prior.normal(data.draw(st.floats(sup.lo, sup.hi)), data.draw(st.floats(0.3, 5)), sup)
    if data.draw(st.booleans()):
        ws = data.draw(st.lists(st.floats(0.05, 5), min_size=sup.size, max_size=sup.size))
        return Prior.categorical(dict(zip(sup.values(), ws)), sup)
    return Prior.uniform(sup)


def _neighbours(data):
    n = data.draw(st.integers(1, 9))
    df = pd.DataFrame(
        {
            "id": list(range(1, n + 1)),
            "x": data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)),
            "g": data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)),
        }
    )
    return df, df.drop(index=data.draw(st.integers(0, n - 1))).reset_index(drop=True)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.floats(0.05, 4.0), st.sampled_from(["max", "sum", "euclidean", "priority"]))
def test_joint_refinement_ratio_never_exceeds_e_eps_on_neighbours(data, eps, distance):
    """Random D, D' = D minus a record, random multicomponent query, priors and distance: the
    exact joint output distributions (over the whole product range) differ by at most e^ε."""
    df, df2 = _neighbours(data)
    mq = parse_any(data.draw(st.sampled_from(QUERIES)))
    priors = [_prior(_support(q, data), data) for q in mq.components]
    kind = mq.kind
    p1 = exact_joint(df, mq, priors, eps, distance, kind)
    p2 = exact_joint(df2, mq, priors, eps, distance, kind)
    assert sum(p1) == 1 == sum(p2)
    b = _bound(eps)
    for a, c in zip(p1, p2):
        if a or c:
            assert a and c and a / c <= b and c / a <= b


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.floats(0.05, 3.0))
def test_split_refinement_ratio_within_the_composed_epsilon(data, eps):
    """Mode split: the product distribution's ratio on neighbours is ≤ e^(Σεi), and ≤ e^(max εi)
    when the filters are disjoint (Proposition 4) -- with the εi the engine chose."""
    df, df2 = _neighbours(data)
    mq = parse_any(
        data.draw(
            st.sampled_from(
                QUERIES[:5]
                + [
                    "value(x) where id == 1; value(x) where id == 2",
                    "count where g == 1; mean(x) where g == 2",
                ]
            )
        )
    )
    priors = [_prior(_support(q, data), data) for q in mq.components]
    ans = refine_multicomponent(df, mq, priors, eps, mode="split", rng=0)
    eps_list, total = _split_epsilons(eps, len(mq.components), disjoint_components(mq.components))
    assert ans.epsilons == [pytest.approx(float(e)) for e in eps_list]
    assert total == (max(eps_list) if disjoint_components(mq.components) else sum(eps_list))
    assert total == eps_fraction(eps)  # the ε asked is the ε spent
    p1, p2 = exact_split(df, mq, priors, eps_list), exact_split(df2, mq, priors, eps_list)
    b = _bound(total)
    for a, c in zip(p1, p2):
        if a or c:
            assert a and c and a / c <= b and c / a <= b


# ============================================================== API behaviour

DF = pd.DataFrame(
    {
        "income": [10, 20, 30, 40, 50],
        "age": [20, 30, 40, 50, 60],
        "region": [3, 3, 1, 3, 2],
        "id": [1, 2, 3, 4, 5],
    }
)
PR = [Prior.uniform(NumericRange(0, 60, 1)), Prior.uniform(NumericRange(0, 80, 2))]


def test_joint_answer_spends_one_epsilon_and_samples_the_exact_distribution():
    led = BudgetLedger(1.0)
    q = "mean(income), mean(age) where region == 3"
    ans = refine_query(DF, q, PR, 0.5, rng=1, ledger=led)
    assert ans.mode == "joint" and ans.epsilon == 0.5 and led.remaining == 0.5
    assert set(ans.public()["response"]) == {"mean(income) where region == 3", "mean(age) where region == 3"}
    assert ans.true_value == [pytest.approx(70 / 3), pytest.approx(100 / 3)]
    assert "jointly" in ans.guarantee and "number of components" in ans.guarantee
    assert "true_value" not in ans.public() and "refined" not in ans.public()
    assert led.entries[0]["query"] == q and "70" not in str(led.entries[0])
    # the sampler follows the exact joint distribution (chi-square on a small product range)
    from scipy.stats import chisquare

    small = [Prior.uniform(NumericRange(0, 60, 20)), Prior.normal(40, 20, NumericRange(0, 80, 20))]
    mq = parse_any(q)
    p = exact_joint(DF, mq, small, 1.0, "sum")
    rng = np.random.default_rng(5)
    vals = [
        tuple(refine_multicomponent(DF, mq, small, 1.0, distance="sum", rng=rng).response)
        for _ in range(3000)
    ]
    grid = list(itertools.product(small[0].support.values(), small[1].support.values()))
    counts = np.array([vals.count((int(a), int(b))) for a, b in grid])
    assert chisquare(counts, np.array([float(x) for x in p]) * len(vals)).pvalue > 1e-4


def test_joint_distance_shapes_the_set_uu():
    """Example 7: 'priority' favours the first component; the symmetric distances do not."""
    d1, d2 = [0, 1, 2], [0, 1, 2]
    assert joint_distances([d1, d2], [2, 2], "max") == [0, 1, 2, 1, 1, 2, 2, 2, 2]
    assert joint_distances([d1, d2], [2, 2], "sum") == [0, 1, 2, 1, 2, 3, 2, 3, 4]
    assert joint_distances([d1, d2], [2, 2], "euclidean") == [0, 1, 4, 1, 2, 5, 4, 5, 8]
    assert joint_distances([d1, d2], [2, 2], "priority") == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    # components in different units weigh alike: one step of 2 vs one step of 4 (as fractions)
    assert joint_distances([[0, 1, 2], [0, 1, 2, 3, 4]], [2, 4], "max")[:5] == [0, 1, 2, 3, 4]


def test_split_epsilons_and_refusals():
    led = BudgetLedger(1.0)
    ans = refine_multicomponent(
        DF, "mean(income), mean(age)", PR, [0.3, 0.2], mode="split", rng=0, ledger=led
    )
    assert ans.epsilons == [0.3, 0.2] and ans.epsilon == 0.5 and led.remaining == 0.5
    assert "Σεi = 0.5" in ans.guarantee
    ans = refine_multicomponent(DF, "mean(income), mean(age)", PR, 0.3, mode="split", rng=0)
    assert ans.epsilons == [0.15, 0.15] and ans.epsilon == 0.3
    bad = [
        dict(query="mean(income), mean(age)", priors=PR[:1], epsilon=0.1),
        dict(query="mean(income), mean(age)", priors=PR, epsilon=[0.1, 0.1]),  # joint takes one ε
        dict(query="mean(income), mean(nope)", priors=PR, epsilon=0.1),
        dict(query="mean(income), mean(age)", priors=PR, epsilon=0.1, distance="chebyshev"),
        dict(query="mean(income), mean(age)", priors=PR, epsilon=0.1, kind="individual"),
        dict(query="mean(income), mean(age)", priors=PR, epsilon=[0.3], mode="split"),
        dict(query="mean(income), mean(age)", priors=PR, epsilon=0.6),  # over the budget
        dict(
            query="mean(income), mean(age)", priors=[Prior.uniform(NumericRange(0, 1000, 1))] * 2, epsilon=0.1
        ),  # product too big
    ]
    for kw in bad:
        with pytest.raises(ParameterError):
            refine_multicomponent(DF, ledger=led, rng=0, **kw)
    assert led.remaining == 0.5 and len(led.entries) == 1


def test_joint_individual_vector_of_one_record():
    pr = [Prior.uniform(NumericRange(0, 60, 10)), Prior.uniform(NumericRange(0, 80, 10))]
    ans = refine_multicomponent(DF, "value(income), value(age) where id == 2", pr, 1.0, rng=0)
    assert ans.kind == "individual" and "Proposition 3" in ans.guarantee
    assert ans.true_value == [20, 30]
    # refined marginal of each component within e^ε of its prior marginal (Prop. 3)
    for r, p in zip(ans.refined, ans.prior_probs):
        assert all(math.exp(-1) - 1e-12 <= a / b <= E + 1e-12 for a, b in zip(r, p))


def test_proportion_by_groups_is_refused():
    with pytest.raises(ParameterError, match="not disjoint"):
        refine_query(
            DF, "proportion by region", Prior.uniform(NumericRange(0, 1, 0.1)), 0.1, groups=[1, 2, 3]
        )


# ============================================================== command line


def test_cli_multicomponent(tmp_path, capsys):
    import json

    from dpstudio import cli
    from dpstudio.engine.query import load_ledger

    data = tmp_path / "d.csv"
    DF.to_csv(data, index=False)
    led = tmp_path / "led.json"
    base = [
        "query",
        str(data),
        "mean(income), mean(age) where region == 3",
        "--range",
        "income=0:60:1",
        "--range",
        "age=0:80:2",
    ]
    assert (
        cli.main(
            base
            + [
                "--prior",
                "normal:30:10",
                "--prior",
                "uniform",
                "--epsilon",
                "0.5",
                "--distance",
                "sum",
                "--ledger",
                str(led),
                "--budget",
                "1",
                "--json",
            ]
        )
        == 0
    )
    pub = json.loads(capsys.readouterr().out)
    assert pub["epsilon"] == 0.5 and len(pub["response"]) == 2 and "jointly" in pub["guarantee"]
    assert cli.main(base + ["--mode", "split", "--epsilon", "0.2,0.1", "--ledger", str(led)]) == 0
    out = capsys.readouterr().out
    assert "remaining budget: 0.2 of 1" in out and "Σεi = 0.3" in out
    assert [e["epsilon"] for e in load_ledger(led).entries] == [0.5, 0.3]
    # εi in the order typed, repeated values kept (not a sorted, deduplicated grid)
    assert cli.main(base + ["--mode", "split", "--epsilon", "0.05,0.05", "--json"]) == 0
    assert "ε1 = 0.05" in capsys.readouterr().out
    assert cli.main(base + ["--mode", "split", "--epsilon", "0.1,0.02", "--json"]) == 0
    assert "ε1 = 0.1 (statistical), ε2 = 0.02" in capsys.readouterr().out
    for bad in (
        ["--epsilon", "0.1", "--prior", "normal:1:1"],  # one prior for two
        ["--epsilon", "0.1,0.2"],  # joint: one ε
        ["--epsilon", "0.1", "--range", "nope=0:1"],  # unknown range key
        ["--epsilon", "0.5", "--ledger", str(led)],
    ):  # over the budget
        assert cli.main(base + bad) == 2
        err = capsys.readouterr().err
        assert err.startswith("dpstudio: error: ") and len(err.strip().splitlines()) == 1
    assert len(load_ledger(led).entries) == 2
