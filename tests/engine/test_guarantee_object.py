"""The guarantee as data (issue 22 §1): :class:`~dpstudio.engine.guarantee.Guarantee`.

* the sentence and the ε-DP flag of every method over a grid of parameters and role layouts,
  through every path that states one, are exactly those of the code before the guarantee
  became an object (``golden/guarantee_sentences.json``, written from that code);
* the object answers the questions (is_dp, scope, ε per attribute and in total, covered and
  uncovered columns) consistently with its sentence, and survives a JSON round trip;
* :func:`~dpstudio.engine.guarantee.compose` for chains of steps;
* no module outside the guarantee module and the method modules decides anything by the
  wording of a sentence or a warning.

``golden/guarantee_sentences.json`` is the old code's; to change the cases, regenerate it
from commit 439c6df (before issue 22 §1) with ``_guarantee_cases.py`` copied into that tree
(its ``outcomes()`` runs on both): the point is comparing with the old sentences, so never
regenerate it from the new code to make a failure go away.  A method added later has no old
code: ``DPSTUDIO_UPDATE_GOLDEN=1`` writes its entry from the current code.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine import api
from dpstudio.engine.guarantee import (
    CLAUSE_CODES,
    Clause,
    Effect,
    Guarantee,
    GuaranteeContext,
    Model,
    Scope,
    Step,
    Uncovered,
    compose,
    sentence_parts,
)
from dpstudio.engine.notices import NOTICE_CODES, Notice, as_notice, is_public
from dpstudio.engine.registry import get_method
from tests.engine import _guarantee_cases as C

GOLDEN = Path(__file__).parent / "golden" / "guarantee_sentences.json"


# ------------------------------------------------------------------ equal to the old sentences


@pytest.fixture(scope="module")
def outcomes() -> dict:
    return C.outcomes()


def _write_new_methods(want: dict, outcomes: dict) -> dict:
    """A new method's entry (it has no old code): written from the current code, only when
    asked (``DPSTUDIO_UPDATE_GOLDEN=1``); existing entries are never rewritten.
    """
    added = {m: rows for m, rows in outcomes.items() if m not in want}
    if added and os.environ.get("DPSTUDIO_UPDATE_GOLDEN") == "1":
        want = {**want, **added}
        lines = [f" {json.dumps(m)}: {json.dumps(r, separators=(',', ':'))}" for m, r in want.items()]
        GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    return want


@pytest.mark.parametrize("method", [s.id for s in C.specs()])
def test_sentence_and_dp_flag_equal_the_old_code(method, outcomes):
    want = _write_new_methods(json.loads(GOLDEN.read_text(encoding="utf-8")), outcomes)
    assert method in want, "a new method: write its entry with DPSTUDIO_UPDATE_GOLDEN=1"
    got = outcomes[method]
    assert len(got) == len(want[method])
    bad = [i for i, (a, b) in enumerate(zip(got, want[method])) if a != b]
    assert not bad, f"{len(bad)} case(s) differ from the old code, first {bad[:5]}"


def test_grid_covers_every_parameter_a_sentence_reads():
    """Each method's grid varies the parameters of its own that appear in GRID."""
    for spec in C.specs():
        combos = list(C.param_grid(spec))
        for name in C.GRID:
            if any(p.name == name for p in spec.params):
                assert len({json.dumps(c.get(name)) for c in combos}) >= 2, (spec.id, name)


# ------------------------------------------------------------------ the object's answers


def _frame(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.uniform(0, 100, n),
            "y": rng.uniform(0, 100, n),
            "o": rng.integers(0, 4, n),
            "w": rng.uniform(1, 3, n),
        }
    )


D = {"x": (0, 100), "y": (0, 100)}
D1 = {"x": (0, 100)}
XY = {"x": "eps-quasi", "y": "eps-quasi"}


def _protect(method, roles=XY, **p):
    return engine.protect(_frame(), method, roles, D, seed=3, **p)


@pytest.mark.parametrize(
    "budget,shares,total",
    [
        ("equal", {"x": 0.5, "y": 0.5}, 1.0),
        ("per-attribute", {"x": 1.0, "y": 1.0}, 2.0),
    ],
)
def test_epsilon_per_attribute_and_total(budget, shares, total):
    res = _protect("laplace", epsilon=1.0, budget=budget)
    g = res.guarantee_info
    assert g.model is Model.EPSILON_DP and g.is_dp and res.is_dp
    assert g.epsilon == 1.0 and g.epsilon_shares == shares and g.epsilon_total == total
    assert g.delta == 0.0 and g.covered == ("x", "y")
    assert str(g) == g.render() == res.guarantee


def test_weights_split_is_the_runs_split():
    res = _protect("laplace", epsilon=2.0, budget="weights", weights={"x": 1, "y": 3})
    assert res.guarantee_info.epsilon_shares == pytest.approx({"x": 0.5, "y": 1.5})
    assert res.guarantee_info.epsilon_shares == pytest.approx(res.info["epsilon_per_attribute"])


def test_uncovered_columns_and_reasons():
    res = _protect("laplace", roles={**XY, "w": "weight"}, epsilon=1.0)
    g = res.guarantee_info
    assert set(g.uncovered) == {Uncovered("o", "released-unchanged"), Uncovered("w", "sampling-weight")}
    assert g.is_dp and g.scope is Scope.RECORDS  # named, not covered: as the sentence says
    assert g.has_clause("not-covered") and g.has_clause("survey")


def test_clustered_release_with_unchanged_columns_is_narrowed():
    res = _protect("insensitive-dp", k=10, epsilon=1.0)
    g = res.guarantee_info
    assert g.narrowed and g.scope is Scope.PER_ATTRIBUTE and not g.is_dp and not res.is_dp
    assert res.guarantee.startswith("Per-attribute only")  # (tests may read the wording)
    assert g.has_clause("remedy-layout")
    tables = _protect("insensitive-dp", k=10, epsilon=1.0, layout="separate-tables")
    t = tables.guarantee_info
    assert t.scope is Scope.TABLES and t.is_dp and not t.narrowed
    assert set(t.not_released) == {"o", "w"} and t.has_clause("not-released")


def test_joint_ranking_offers_the_layout_once():
    res = engine.protect(_frame()[["x", "y"]], "ir-dp", XY, D, seed=1, k=5, epsilon=1.0)
    g = res.guarantee_info
    assert g.narrowed and len(g.scope_reasons) == 1 and not g.is_dp
    wider = _protect("ir-dp", k=5, epsilon=1.0)
    assert len(wider.guarantee_info.scope_reasons) == 2
    assert [c.code for c in wider.guarantee_info.clauses].count("remedy-layout") == 1
    assert wider.guarantee.count("separate-tables") == 1


def test_input_order_voids_a_clustered_dp_release():
    res = engine.protect(
        _frame()[["x"]], "ir-dp", {"x": "eps-quasi"}, D1, seed=1, k=5, epsilon=1.0, order="input"
    )
    g = res.guarantee_info
    assert g.model is Model.EPSILON_DP and g.voided_by == ("input-order",) and not g.is_dp
    plain = engine.protect(
        _frame()[["x"]], "laplace", {"x": "eps-quasi"}, D1, seed=1, epsilon=1.0, order="input"
    )
    assert plain.guarantee_info.is_dp and not plain.guarantee_info.voided_by  # weakened, stated


@pytest.mark.parametrize(
    "method,params,model",
    [
        ("mdav", {"k": 3}, Model.K_ANONYMITY),
        ("mdav-swap", {"k": 3}, Model.PROBABILISTIC_K_ANONYMITY),
        ("idp-ls", {"k": 3, "epsilon": 1.0}, Model.INDIVIDUAL_DP),
        ("insensitive-dp", {"k": 5, "epsilon": 1.0, "calibration": "as-published"}, Model.NONE),
    ],
)
def test_models(method, params, model):
    roles = {"x": "k-quasi"} if method.startswith("mdav") else {"x": "eps-quasi"}
    res = engine.protect(_frame()[["x"]], method, roles, {"x": (0, 100)}, seed=1, **params)
    g = res.guarantee_info
    assert g.model is model and not g.is_dp
    if "k" in params:
        assert g.k == params["k"]


def test_baseline_is_not_dp():
    prep = engine.prepare(_frame()[["x"]], "laplace", {"x": "eps-quasi"}, {"x": (0, 100)})
    res = engine.run_prepared(prep, rng=np.random.default_rng(0), epsilon=None)
    g = res.guarantee_info
    assert g.baseline and g.model is Model.NONE and not g.is_dp and g.has_clause("baseline")


def test_clauses_have_codes_and_concatenate_to_the_sentence():
    for res in (_protect("laplace", epsilon=1.0), _protect("insensitive-dp", k=10, epsilon=1.0)):
        g = res.guarantee_info
        assert all(c.code in CLAUSE_CODES for c in g.clauses)
        assert g.has_clause("grid") and g.has_clause("budget") and g.has_clause("neighbours")
        assert "".join(c.text for c in g.clauses) in res.guarantee
    with pytest.raises(ValueError):
        Clause("no-such-code", "x")


def test_json_round_trip():
    gs = [
        _protect(m, **p).guarantee_info
        for m, p in [
            ("laplace", {"epsilon": 1.0, "budget": "per-attribute"}),
            ("insensitive-dp", {"k": 10, "epsilon": 1.0}),
            ("ir-dp", {"k": 5, "epsilon": 0.5, "layout": "separate-tables"}),
        ]
    ]
    t = engine.protect(
        _frame(), "t-close-dp", {"x": "k-quasi", "y": "confidential"}, seed=1, epsilon=1.0
    ).guarantee_info
    gs += [t, compose([_step("a", gs[0], {"x": Effect.PERTURB}), _step("b", t, {"y": Effect.PERTURB})])]
    for g in gs:
        d = json.loads(json.dumps(g.to_dict()))
        back = Guarantee.from_dict(d)
        assert back == g and back.render() == g.render() and back.is_dp == g.is_dp
        assert d["sentence"] == g.render() and d["is_dp"] == g.is_dp
    inf = Guarantee(model=Model.T_CLOSENESS, clauses=(), t=math.inf)
    assert Guarantee.from_dict(json.loads(json.dumps(inf.to_dict()))).t == math.inf


def test_describe_release_is_the_guarantees_text():
    df = _frame()
    g = api.preview_guarantee(list(df.columns), "insensitive-dp", XY, data=df, domains=D, k=10, epsilon=1.0)
    text, is_dp = api.describe_release(
        list(df.columns), "insensitive-dp", XY, data=df, domains=D, k=10, epsilon=1.0
    )
    assert (text, is_dp) == (g.render(), g.is_dp)
    assert text == _protect("insensitive-dp", k=10, epsilon=1.0).guarantee


def test_context_replaces_underscore_keys():
    """A method's guarantee gets the columns and roles from the context, never from the
    parameters: underscore keys in the parameters are not read."""
    spec = get_method("t-close-dp")
    ctx = GuaranteeContext.of(
        {"epsilon": 1.0, "k": 5, "output": "anatomy"},
        attributes=["q", "c"],
        roles={"q": "k-quasi", "c": "confidential"},
    )
    text = spec.describe(ctx).render()
    assert (
        "Changed: the confidential attribute(s) c" in text
        and "Not changed: the k-quasi-identifiers q" in text
    )
    sneaky = GuaranteeContext.of({"epsilon": 1.0, "k": 5, "_attributes": ["zz"], "_roles": {"zz": "k-quasi"}})
    assert "zz" not in spec.describe(sneaky).render()


# ------------------------------------------------------------------ t-close-dp's achieved t


def _tclose_frame(n=200):
    rng = np.random.default_rng(5)
    return pd.DataFrame({"q": rng.normal(size=n), "C": rng.lognormal(8, 1, n).round()})


ROLES_T = {"q": "k-quasi", "C": "confidential"}


def test_achieved_t_public_in_anatomy_refused_when_permuted(monkeypatch):
    """The achieved t is computed from the grouping.  In the Anatomy layout the groups and
    every record's value are released, so it is a function of the release and the guarantee
    states it; with output='permuted' the groups are not released: the run refuses rather
    than publish a sentence that depends on them (or claims a target it missed)."""
    from dpstudio.engine.protection import t_close_dp as T

    df = _tclose_frame()
    ok = engine.protect(df, "t-close-dp", ROLES_T, seed=2, epsilon=1.0, output="permuted")
    assert "CAVEAT" not in ok.guarantee and ok.guarantee_info.t == pytest.approx(math.e)
    monkeypatch.setattr(T, "achieved_t", lambda counts, supply: 5.0)  # force a miss
    ana = engine.protect(df, "t-close-dp", ROLES_T, seed=2, epsilon=1.0)
    assert ana.guarantee_info.t == 5.0 and ana.guarantee_info.has_clause("caveat")
    assert any(as_notice(w).code == "t-achieved" for w in ana.private_notes)
    with pytest.raises(engine.ParameterError, match="permuted"):
        engine.protect(df, "t-close-dp", ROLES_T, seed=2, epsilon=1.0, output="permuted")
    # before a run (the app's preview) nothing about the groups is known
    pre = api.preview_guarantee(list(df.columns), "t-close-dp", ROLES_T, data=df, epsilon=1.0)
    assert not pre.has_clause("caveat")


def test_public_texts_do_not_depend_on_the_grouping_when_permuted(monkeypatch):
    """Data sets of one size, same parameters: with output='permuted' the public metadata's
    texts (guarantee, warnings) are the same, whatever t the (unreleased) groups achieve --
    forced here to depend on the grouping."""
    from dpstudio.engine.protection import t_close_dp as T

    real = T.achieved_t
    # bucket sizes vary with the ties of C: make the achieved t depend on them
    monkeypatch.setattr(T, "achieved_t", lambda c, s: 5.0 if int(s[0]) % 2 else real(c, s))
    texts, refused = set(), 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        df = pd.DataFrame({"q": rng.normal(size=150), "C": rng.integers(0, 40, 150)})
        try:
            res = engine.protect(df, "t-close-dp", ROLES_T, seed=1, epsilon=1.0, output="permuted")
        except engine.ParameterError:
            refused += 1
            continue
        meta = res.public_metadata()
        texts.add((meta["guarantee"], tuple(meta["warnings"])))
    assert len(texts) == 1 and 0 < refused < 8


# ------------------------------------------------------------------ notices


def test_every_warning_is_a_notice_with_a_declared_code():
    df = _frame()
    df.loc[:4, "x"] = np.nan
    res = engine.protect(
        df, "insensitive-dp", XY, D, seed=1, k=1, epsilon=60.0, order="input", drop_missing=True
    )
    codes = {as_notice(w).code for w in res.warnings}
    assert {"records-dropped", "epsilon-large", "input-order", "rigorous-k1"} <= codes
    for w in res.warnings:
        assert isinstance(w, Notice) and w.code in NOTICE_CODES
        assert w.public == NOTICE_CODES[w.code].public and w.severity == NOTICE_CODES[w.code].severity
    assert [w for w in res.warnings if is_public(w)] == res.public_warnings
    assert all(not n.public for n in res.private_notes)
    assert set(res.public_metadata()["warnings"]) == {str(w) for w in res.public_warnings}


def test_notice_codes_decide_publication():
    assert Notice("epsilon-large", "x").public and not Notice("pile-up", "x").public
    assert not is_public("plain text from a method")  # the safe default
    assert as_notice("plain").code == "method-note"
    with pytest.raises(ValueError):
        Notice("no-such-code", "x")
    n = Notice("records-dropped", "3 dropped")
    import pickle

    back = pickle.loads(pickle.dumps(n))
    assert back == n and back.code == n.code and not back.public
    assert n.to_dict() == {
        "code": "records-dropped",
        "severity": "info",
        "public": False,
        "text": "3 dropped",
    }


# ------------------------------------------------------------------ chains


def _step(name, g, changes, **kw):
    return Step(name=name, guarantee=g, changes=changes, **kw)


def _dp(cols, eps, scope=Scope.RECORDS, model=Model.EPSILON_DP):
    return Guarantee(
        model=model,
        clauses=(Clause("claim", f"{eps:g}-DP on {', '.join(cols)}."),),
        epsilon=eps,
        epsilon_total=eps,
        covered=tuple(cols),
        scope=scope,
        epsilon_per_attribute=tuple((c, eps / len(cols)) for c in cols),
    )


def _kanon(cols, k=3, model=Model.K_ANONYMITY):
    return Guarantee(
        model=model,
        clauses=(Clause("claim", f"{k}-anonymity on {', '.join(cols)}."),),
        k=k,
        covered=tuple(cols),
    )


NONE = Guarantee(model=Model.NONE, clauses=(Clause("mechanism", "recoded."),))


def test_fixed_recode_before_dp_keeps_dp_and_budgets_add():
    g = compose(
        [
            _step("recode", NONE, {"age": Effect.FIXED_MAP}),
            _step("ir-dp", _dp(["age"], 1.0), {"age": Effect.PERTURB}),
            _step("laplace", _dp(["income"], 0.5), {"income": Effect.PERTURB}),
        ]
    )
    assert g.model is Model.EPSILON_DP and g.is_dp and g.epsilon_total == 1.5
    assert g.epsilon_shares == {"age": 1.0, "income": 0.5} and g.delta == 0.0
    assert len(g.parts) == 2 and g.has_clause("composition")


def test_data_dependent_recode_before_dp_loses_dp():
    g = compose(
        [
            _step("quantile-recode", NONE, {"age": Effect.DATA_MAP}),
            _step("ir-dp", _dp(["age"], 1.0), {"age": Effect.PERTURB}),
        ]
    )
    assert not g.is_dp and g.model is Model.NONE and g.has_clause("lost")
    assert "quantile-recode" in g.render()


def test_data_dependent_step_reading_a_later_dp_column_loses_dp():
    """Local suppression of keys that include income, then noise on income: the suppression
    pattern already depends on the unprotected incomes."""
    g = compose(
        [
            _step("local-suppression", _kanon(["region"]), {"region": Effect.SUPPRESS}, reads=("income",)),
            _step("laplace", _dp(["income"], 1.0), {"income": Effect.PERTURB}),
        ]
    )
    assert not g.is_dp and any(p.model is Model.K_ANONYMITY for p in g.parts)


def test_data_dependent_step_on_other_columns_keeps_dp():
    g = compose(
        [
            _step("local-suppression", _kanon(["region"]), {"region": Effect.SUPPRESS}),
            _step("laplace", _dp(["income"], 1.0), {"income": Effect.PERTURB}),
        ]
    )
    assert g.is_dp and g.epsilon_total == 1.0
    assert {p.model for p in g.parts} == {Model.K_ANONYMITY, Model.EPSILON_DP}


def test_steps_after_dp_are_post_processing():
    g = compose(
        [
            _step("laplace", _dp(["income"], 1.0), {"income": Effect.PERTURB}),
            _step("top-code", NONE, {"income": Effect.DATA_MAP}),
            _step("suppress", NONE, {"income": Effect.SUPPRESS}),
        ]
    )
    assert g.is_dp and g.epsilon_total == 1.0


def test_removing_records_before_dp_loses_dp():
    g = compose(
        [
            _step("record-suppression", NONE, {}, removes_records=True),
            _step("laplace", _dp(["income"], 1.0), {"income": Effect.PERTURB}),
        ]
    )
    assert not g.is_dp


def test_k_anonymity_survives_recoding_and_suppression_not_pram():
    keys = {"region": Effect.SUPPRESS, "age": Effect.SUPPRESS}
    base = _step("local-suppression", _kanon(["region", "age"]), keys)
    kept = compose(
        [
            base,
            _step("top-code", NONE, {"age": Effect.FIXED_MAP}),
            _step("recode", NONE, {"region": Effect.DATA_MAP}),
        ]
    )
    assert kept.model is Model.K_ANONYMITY and kept.k == 3 and not kept.has_clause("lost")
    suppressed = compose([base, _step("suppress", NONE, {"age": Effect.SUPPRESS})])
    assert suppressed.model is Model.K_ANONYMITY  # a missing value matches any value
    pram = Guarantee(
        model=Model.PLAUSIBLE_DENIABILITY, clauses=(Clause("claim", "PRAM."),), covered=("region",)
    )
    lost = compose([base, _step("pram", pram, {"region": Effect.PERTURB})])
    assert lost.model is Model.PLAUSIBLE_DENIABILITY and lost.has_clause("lost")
    assert [p.model for p in lost.parts] == [Model.PLAUSIBLE_DENIABILITY]
    assert "does not hold" in lost.render() and "region" in lost.render()
    removed = compose([base, _step("drop", NONE, {}, removes_records=True)])
    assert removed.model is Model.NONE and removed.has_clause("lost")


def test_probabilistic_k_anonymity_does_not_survive_suppression():
    g = compose(
        [
            _step("swap", _kanon(["a"], model=Model.PROBABILISTIC_K_ANONYMITY), {"a": Effect.PERTURB}),
            _step("suppress", NONE, {"a": Effect.SUPPRESS}),
        ]
    )
    assert g.model is Model.NONE


def test_k_anonymity_survives_changes_to_other_columns():
    g = compose(
        [
            _step("mdav", _kanon(["age"]), {"age": Effect.PERTURB}),
            _step("noise", _dp(["income"], 1.0), {"income": Effect.PERTURB}),
        ]
    )
    assert g.is_dp and Model.K_ANONYMITY in {p.model for p in g.parts}


def test_weakest_scope_and_model_win():
    g = compose(
        [
            _step("a", _dp(["x"], 1.0), {"x": Effect.PERTURB}),
            _step("b", _dp(["y"], 1.0, model=Model.INDIVIDUAL_DP), {"y": Effect.PERTURB}),
        ]
    )
    assert g.model is Model.INDIVIDUAL_DP and not g.is_dp and g.epsilon_total == 2.0
    h = compose(
        [
            _step("a", _dp(["x"], 1.0), {"x": Effect.PERTURB}),
            _step("b", _dp(["y"], 1.0, scope=Scope.PER_ATTRIBUTE), {"y": Effect.PERTURB}),
        ]
    )
    assert h.scope is Scope.PER_ATTRIBUTE and not h.is_dp


def test_t_closeness_does_not_survive_a_change_of_its_columns():
    t = Guarantee(model=Model.T_CLOSENESS, clauses=(Clause("claim", "t-close."),), covered=("C",))
    assert (
        compose([_step("tc", t, {"C": Effect.PERTURB}), _step("other", NONE, {"q": Effect.FIXED_MAP})]).model
        is Model.T_CLOSENESS
    )
    assert (
        compose([_step("tc", t, {"C": Effect.PERTURB}), _step("recode", NONE, {"C": Effect.FIXED_MAP})]).model
        is Model.NONE
    )


def test_compose_needs_a_step():
    with pytest.raises(ValueError):
        compose([])


# ------------------------------------------------------------------ no decisions by wording


_WORDING = [
    re.compile(r"""\.startswith\(\s*f?["'][A-Z]"""),  # a sentence's first word
    re.compile(
        r"""["'][A-Za-z][^"']*["']\s+(?:not\s+)?in\s+(?:w|warning|warn|text|guarantee|sentence|note|msg)\b"""
    ),
    re.compile(r"""guarantee\w*\.(?:startswith|endswith|find|count)\("""),
    re.compile(r"""["']_(?:attributes|roles|eps_quasi)["']"""),  # underscore keys in params
]


#: lines that match a pattern but read no sentence: (file, line text)
_NOT_A_SENTENCE: set[tuple[str, str]] = set()


def test_no_decision_by_the_wording_of_a_sentence_or_warning():
    """Outside the guarantee module and the method modules (which own their wording), no
    code tests the words of a guarantee sentence or a warning."""
    root = Path(engine.__file__).resolve().parents[1]
    allowed = {root / "engine" / "guarantee.py"}
    hits = []
    for path in sorted(root.rglob("*.py")):
        if path in allowed or "protection" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if (rel, code.strip()) in _NOT_A_SENTENCE:
                continue
            if any(p.search(code) for p in _WORDING):
                hits.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    assert not hits, "decisions by wording:\n" + "\n".join(hits)


def test_sentence_parts_round_trip():
    for res in (_protect("insensitive-dp", k=10, epsilon=1.0), _protect("laplace", epsilon=1.0)):
        parts = sentence_parts(res.guarantee)
        assert " ".join(t for t, _ in parts) == res.guarantee
    kinds = [k for _, k in sentence_parts(_protect("insensitive-dp", k=10, epsilon=1.0).guarantee)]
    assert kinds[0] == "scope-lead" and "label:Remedies:" in kinds


@pytest.mark.parametrize("layout", ["records", "separate-tables"])
def test_preview_is_the_released_sentence_with_survey_roles(layout):
    """The app's preview states exactly what the release will carry, also in the layout
    'separate-tables' with a sampling weight (it said "The sampling weight w is released
    unchanged" although that layout does not release it)."""
    df = _frame()
    roles = {**XY, "w": "weight"}
    pre = api.preview_guarantee(
        list(df.columns), "insensitive-dp", roles, data=df, domains=D, k=10, epsilon=1.0, layout=layout
    )
    res = engine.protect(df, "insensitive-dp", roles, D, seed=1, k=10, epsilon=1.0, layout=layout)
    assert pre.render() == res.guarantee and pre.is_dp == res.is_dp
    assert ("released unchanged (not protected" in res.guarantee) == (layout == "records")
    no_data = api.preview_guarantee(
        list(df.columns), "insensitive-dp", roles, k=10, epsilon=1.0, layout=layout
    )
    assert no_data.render() in res.guarantee
