"""The contract every registered method keeps (issue 9): parameters validated through the one
path and its message format, seeded runs repeat bit for bit, cancel stops cleanly, the
guarantee names the protected columns, and the measures run through :func:`engine.evaluate`.

It runs over :func:`engine.methods` -- a new method is checked without writing a line here.
"""

from __future__ import annotations

import importlib
import re

import numpy as np
import pandas as pd
import pytest

from dpstudio import engine
from dpstudio.engine.errors import Cancelled, ParameterError
from dpstudio.engine.params import invalid_values
from dpstudio.engine.registry import METHOD_MODULES, get_method, module_specs
from dpstudio.engine.roles import Role

N = 60
#: One column per role, with names that cannot occur in a sentence by chance.
COLUMN_OF = {Role.K_QUASI: "kq_age", Role.EPS_QUASI: "eq_income", Role.CONFIDENTIAL: "conf_wage"}
#: The methods of the listed modules (specs that tests register for themselves are not
#: methods of the product and keep no contract).
SPECS = [s for name in METHOD_MODULES for s in module_specs(importlib.import_module(name))]
METHOD_IDS = [s.id for s in SPECS]


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(20240509)
    return pd.DataFrame(
        {
            "kq_age": rng.integers(18, 90, N).astype(float),
            "eq_income": rng.integers(0, 1000, N).astype(float),
            "conf_wage": rng.integers(0, 500, N).astype(float),
            "region": rng.integers(0, 4, N),
        }
    )


def setup(method_id: str):
    spec = get_method(method_id)
    roles = {COLUMN_OF[r]: r.value for r in spec.protects}
    domains = {"kq_age": (0, 120), "eq_income": (0, 1000), "conf_wage": (0, 500)}
    return spec, roles, {c: domains[c] for c in roles}


def test_every_listed_method_is_registered():
    assert len(METHOD_IDS) == len(set(METHOD_IDS)) >= 11
    registered = [m["id"] for m in engine.methods()]
    assert registered[: len(METHOD_IDS)] == METHOD_IDS  # menu order = list order
    listed = [m for m in engine.methods() if m["id"] in METHOD_IDS]
    assert sum(m["recommended"] for m in listed) == 1
    for m in listed:  # the flag says what the sentence claims
        claims = re.match(r"(k|\d+)-anonymity", m["guarantee"]) is not None
        assert m["k_anonymous"] == claims, m["id"]


def _cases():
    for spec in SPECS:
        for p in spec.params:
            for value, expected in invalid_values(p):
                yield pytest.param(spec.id, p.name, value, expected, id=f"{spec.id}-{p.name}-{value!r}")


@pytest.mark.parametrize("method_id,name,value,expected", list(_cases()))
def test_invalid_parameter_values_raise_the_one_format(data, method_id, name, value, expected):
    spec, roles, domains = setup(method_id)
    with pytest.raises(ParameterError) as exc:
        engine.protect(data, method_id, roles, domains, seed=1, **{name: value})
    err = exc.value
    assert isinstance(err, expected)
    assert isinstance(err, TypeError) == (expected is TypeError), (type(err), str(err))
    msg = str(err)
    assert "\n" not in msg
    assert re.fullmatch(
        rf"The '{re.escape(name)}' parameter of method '{re.escape(method_id)}' "
        r"must be .+\. Got .+ instead\.",
        msg,
    ), msg


@pytest.mark.parametrize("method_id", [m for m in METHOD_IDS if get_method(m).uses_k])
def test_k_too_large_for_the_data_raises_the_one_format(data, method_id):
    spec, roles, domains = setup(method_id)
    with pytest.raises(ParameterError) as exc:
        engine.protect(data, method_id, roles, domains, seed=1, k=N)
    assert not isinstance(exc.value, TypeError)
    assert re.fullmatch(
        rf"The 'k' parameter of method '{re.escape(method_id)}' must be an int in "
        rf"the range \[\d+, {N // 2}\].*\. Got {N} instead\.",
        str(exc.value),
    )


def _same_result(a, b) -> None:
    pd.testing.assert_frame_equal(a.data, b.data, check_exact=True)
    assert a.guarantee == b.guarantee
    assert sorted(a.tables) == sorted(b.tables)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], check_exact=True)
    assert (a.row_map is None) == (b.row_map is None)
    if a.row_map is not None:
        np.testing.assert_array_equal(a.row_map, b.row_map)


@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_seeded_run_repeats_bit_for_bit(data, method_id):
    spec, roles, domains = setup(method_id)
    first = engine.protect(data, method_id, roles, domains, seed=123)
    again = engine.protect(data, method_id, roles, domains, seed=123)
    _same_result(first, again)
    if spec.uses_epsilon or method_id in ("mdav-swap", "ir-swap"):  # randomised methods
        other = engine.protect(data, method_id, roles, domains, seed=124)
        assert (
            not other.data.equals(first.data)
            or other.tables.keys() != first.tables.keys()
            or any(not other.tables[t].equals(first.tables[t]) for t in first.tables)
        )


@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_release_order_is_random_by_default_and_input_only_on_request(data, method_id):
    """Issue 21 §3: every method releases its records in a keyed random order; keeping the
    input order is the labelled choice order='input' (stated in the guarantee, warned)."""
    spec, roles, domains = setup(method_id)
    p = spec.param("order")
    assert p.kind == "choice" and p.default == "random" and "input" in p.choices
    res = engine.protect(data, method_id, roles, domains, seed=123)
    assert res.row_map is not None
    assert not np.array_equal(np.sort(res.row_map), res.row_map)  # not the input order
    assert "random order" in res.guarantee
    assert not any("order=input" in w for w in res.warnings)
    kept = engine.protect(data, method_id, roles, domains, seed=123, order="input")
    assert kept.row_map is None or bool(np.all(np.diff(kept.row_map) > 0))
    assert "INPUT ORDER" in kept.guarantee
    assert any("order=input" in w for w in kept.public_warnings)
    # the same values, only arranged otherwise (the order is not part of the run's key)
    for c in res.data.columns:
        if pd.api.types.is_numeric_dtype(res.data[c]):
            np.testing.assert_array_equal(
                np.sort(res.data[c].to_numpy(float)), np.sort(kept.data[c].to_numpy(float))
            )


@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_cancel_stops_cleanly(data, method_id):
    spec, roles, domains = setup(method_id)
    before = data.copy()
    calls = []

    def cancel():
        calls.append(1)
        raise Cancelled()

    with pytest.raises(Cancelled):
        engine.protect(data, method_id, roles, domains, seed=1, check_cancel=cancel)
    assert calls == [1]  # the method asked, once, and stopped at the answer
    pd.testing.assert_frame_equal(data, before)
    # and a run after the cancelled one is unaffected
    _same_result(
        engine.protect(data, method_id, roles, domains, seed=5),
        engine.protect(data, method_id, roles, domains, seed=5),
    )


@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_guarantee_names_the_protected_columns(data, method_id):
    spec, roles, domains = setup(method_id)
    res = engine.protect(data, method_id, roles, domains, seed=1)
    assert res.protected_attributes
    for c in res.protected_attributes:
        assert c in res.guarantee, (c, res.guarantee)
    text, is_dp = engine.api.describe_release(
        list(data.columns), method_id, roles, data=data, domains=domains
    )
    assert is_dp == res.is_dp
    for c in res.protected_attributes:
        assert c in text


@pytest.mark.parametrize("method_id", METHOD_IDS)
def test_measures_run_through_engine_evaluate(data, method_id):
    spec, roles, domains = setup(method_id)
    res = engine.protect(data, method_id, roles, domains, seed=1)
    out = engine.evaluate(
        res.aligned_original(), res.data, result=res, measures=("sse", "rl", "delta", "corr", "kanon")
    )
    assert isinstance(out, dict) and isinstance(out.get("warnings"), list)
    scalars = {k: v for k, v in out.items() if isinstance(v, float)}
    assert scalars, out
    # the kanon measure follows the spec's k_anonymous flag, not a list of method ids
    assert ("k_min_class_size" in out) == spec.k_anonymous, sorted(out)
    if spec.k_anonymous:
        assert out["k_min_class_size"] >= res.params["k"]


def test_a_listed_module_that_cannot_be_imported_fails_loudly(monkeypatch):
    from dpstudio.engine import registry

    monkeypatch.setattr(
        registry, "METHOD_MODULES", registry.METHOD_MODULES + ("dpstudio.engine.protection.no_such_method",)
    )
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_LOADED", False)
    with pytest.raises(ModuleNotFoundError, match="no_such_method"):
        registry.all_methods()
    with pytest.raises(ModuleNotFoundError):  # and again: never a half-loaded registry
        registry.get_method("mdav")


NUMERIC_ONLY = [s.id for s in SPECS if s.numeric_only]


@pytest.mark.parametrize("kind", ["categorical", "ordinal"])
@pytest.mark.parametrize("method_id", NUMERIC_ONLY)
def test_numeric_only_methods_refuse_a_categorical_column(data, method_id, kind):
    """Issue 10: sex = 1/2 typed categorical is never averaged into 1.5."""
    spec, roles, domains = setup(method_id)
    col = next(iter(roles))
    with pytest.raises(engine.NotApplicableError) as exc:
        engine.protect(data, method_id, roles, domains, seed=1, types={col: kind})
    msg = str(exc.value)
    assert "\n" not in msg and repr(col) in msg and kind in msg, msg
    fit = [m.id for m in SPECS if not m.numeric_only and Role(roles[col]) in m.protects]
    assert fit and all(m in msg for m in fit), msg
    # typed numeric it runs
    engine.protect(data, method_id, roles, domains, seed=1, types={col: "numeric"})
