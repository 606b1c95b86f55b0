"""Issue 22 §3: methods own their out-of-core plan.  Each method module declares how it runs
out of core (``MethodSpec.outofcore``, :mod:`dpstudio.engine.outofcore`) with its own
calibration functions; the Dask backend keeps partitioning, scheduling and I/O and never tests
a method's id; a calibration changed in the method's module changes both engines alike."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine import outofcore as O  # noqa: E402
from dpstudio.engine import registry  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BACKEND = ROOT / "dpstudio" / "engine" / "backends"


def _strings(path: Path) -> set[str]:
    return {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


@pytest.mark.parametrize("name", ["dask_backend.py", "dask_measures.py"])
def test_the_backend_never_names_a_method(name):
    """No method id appears as a string in the backend's code (docstrings aside): what it does
    for a method comes from the method's plan."""
    ids = {s.id for s in registry.all_methods()}
    tree = ast.parse((BACKEND / name).read_text())
    docs = {
        ast.get_docstring(n, clean=False)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    }
    named = {s for s in _strings(BACKEND / name) if s in ids and s not in docs}
    assert not named, f"{name} tests method id(s) {sorted(named)}"


def test_dask_methods_are_the_methods_with_a_plan():
    with_plan = [s.id for s in registry.all_methods() if s.outofcore is not None]
    assert DB.dask_methods() == tuple(with_plan) == DB.DASK_METHODS
    assert {"laplace", "ir-dp", "idp-ls", "idp-cbls", "ir-swap", "insensitive-dp", "k-eps"} <= set(with_plan)
    kinds = {s.id: s.outofcore.kind for s in registry.all_methods() if s.outofcore is not None}
    assert kinds["laplace"] == "rowwise" and kinds["ir-dp"] == "ranked" and kinds["ir-swap"] == "ranked"
    assert kinds["insensitive-dp"] == "single-order" and kinds["k-eps"] == "frequency-set"


def test_method_modules_and_plans_do_not_import_dask():
    code = (
        "import sys\n"
        "from dpstudio.engine.registry import all_methods\n"
        "import dpstudio.engine.outofcore\n"
        "all_methods()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT)
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_plans_refusal_is_the_methods_own():
    with pytest.raises(DB.NotOnDask, match="single-order"):
        DB.check_runs_on_dask("insensitive-dp", {"variant": "multi"})
    assert DB.check_runs_on_dask("insensitive-dp", {"variant": "single"}).kind == "single-order"
    with pytest.raises(DB.NotOnDask, match="Mondrian"):
        DB.check_runs_on_dask("k-eps", {"algorithm": "mondrian"})
    with pytest.raises(DB.NotOnDask, match="--engine memory"):
        DB.check_runs_on_dask("mdav", {})


def test_cluster_block_refuses_a_partial_cluster():
    b = O.cluster_block(np.arange(6.0), ranks=np.arange(3, 9), n=12, k=3)
    assert b.ids.tolist() == [1, 2] and b.sizes.tolist() == [3, 3] and b.starts.tolist() == [0, 3]
    last = O.cluster_block(np.arange(5.0), ranks=np.arange(6, 11), n=11, k=3)  # the last takes the rest
    assert last.ids.tolist() == [2] and last.sizes.tolist() == [5]
    with pytest.raises(ValueError, match="not whole"):
        O.cluster_block(np.arange(4.0), ranks=np.arange(4, 8), n=12, k=3)


# --------------------------------------------------------------------------- one calibration


def _data(n=800, seed=2):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": np.round(rng.gamma(2.0, 20000.0, n), 2),
            "hours": rng.choice([20.0, 40.0, 60.0], n),
        }
    )


ROLES = {"age": "eps-quasi", "income": "eps-quasi", "hours": "eps-quasi"}
DOMAINS = {"age": (0, 120), "income": (0, 1_000_000), "hours": (0, 100)}


def _both(method, **params):
    df = _data()
    mem = engine.protect(df, method, ROLES, DOMAINS, seed=5, **params).data
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(
            dd.from_pandas(df, npartitions=3), method, ROLES, DOMAINS, seed=5, **params
        ).compute()
    return mem, got


@pytest.mark.parametrize(
    "method,module,name,params",
    [
        ("ir-dp", "ir_dp", "_eps_draw", {"k": 5, "epsilon": 1.0}),
        ("idp-ls", "ir_dp", "_eps_draw", {"k": 4, "epsilon": 1.0}),
        ("insensitive-dp", "insensitive_dp", "_calibration", {"k": 5, "epsilon": 1.0, "variant": "single"}),
    ],
)
def test_a_calibration_changed_in_the_method_module_changes_both_engines(
    monkeypatch, method, module, name, params
):
    """The plan's functions ARE the method's calibration: a change made in the method's module
    (here: twice the budget per draw) reaches the in-memory and the Dask release alike."""
    import importlib

    before_mem, before_dask = _both(method, **params)
    pd.testing.assert_frame_equal(before_dask, before_mem, check_dtype=False)
    mod = importlib.import_module(f"dpstudio.engine.protection.{module}")
    orig = getattr(mod, name)
    if name == "_eps_draw":
        monkeypatch.setattr(mod, name, lambda eps, *a: 2 * orig(eps, *a))
    else:
        monkeypatch.setattr(mod, name, lambda p, nc, k, span, eps: orig(p, nc, k, span, 2 * eps))
    after_mem, after_dask = _both(method, **params)
    pd.testing.assert_frame_equal(after_dask, after_mem, check_dtype=False)
    assert not after_mem.equals(before_mem)


def test_a_new_plan_runs_on_dask_without_a_backend_edit(monkeypatch):
    """A method declared outside the backend (here: ir-dp's spec under another id, its plan's
    release replaced) runs on Dask through its plan alone: every record gets its cluster id."""
    seen = []

    def release(block, a):
        seen.append(a.column)
        return np.repeat(block.ids, block.sizes).astype(np.float64)

    spec = dataclasses.replace(
        registry.get_method("ir-dp"), id="cluster-id-test", outofcore=O.Ranked(release=release)
    )
    monkeypatch.setitem(registry._REGISTRY, spec.id, spec)
    df = _data(60)
    with dask.config.set(scheduler="synchronous"):
        got = DB.protect_dask(
            dd.from_pandas(df, npartitions=4),
            spec.id,
            ROLES,
            DOMAINS,
            seed=1,
            k=7,
            epsilon=1.0,
            order="input",
        ).compute()
    for c in ROLES:
        ranks = np.argsort(np.argsort(df[c].to_numpy(float), kind="stable"), kind="stable")
        np.testing.assert_array_equal(got[c].to_numpy(), np.minimum(ranks // 7, 60 // 7 - 1))
    assert set(seen) == set(ROLES)
