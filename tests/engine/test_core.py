"""Core pieces: roles, parameter validation, hierarchies, the engine stays Qt-free."""

import subprocess
import sys

import pandas as pd
import pytest

from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.hierarchies.hierarchy import Hierarchy
from dpstudio.engine.params import Param
from dpstudio.engine.protection._common import epsilon_param, k_param
from dpstudio.engine.roles import Role, normalize_roles


def test_roles_default_other_and_unknown_column():
    r = normalize_roles(["a", "b"], {"a": "k-quasi"})
    assert r == {"a": Role.K_QUASI, "b": Role.OTHER}
    with pytest.raises(ParameterError, match="'zz'"):
        normalize_roles(["a"], {"zz": "identifier"})
    with pytest.raises(ParameterError, match="unknown role"):
        normalize_roles(["a"], {"a": "secret"})


@pytest.mark.parametrize("bad", [0, -1, 2.5, "x", True])
def test_k_param_rejects(bad):
    with pytest.raises(ParameterError, match="'k'"):
        k_param().check(bad, "demo")


@pytest.mark.parametrize("bad", [0, -0.5, float("inf"), float("nan"), "abc"])
def test_epsilon_param_rejects(bad):
    with pytest.raises(ParameterError, match="'epsilon'"):
        epsilon_param().check(bad, "demo")


def test_choice_param():
    p = Param("noise", "choice", "laplace", "h", choices=("laplace", "staircase"))
    assert p.check(None, "m") == "laplace"
    with pytest.raises(ValueError) as exc:
        p.check("gauss", "m")
    assert str(exc.value) == (
        "The 'noise' parameter of method 'm' must be a str among "
        "{'laplace', 'staircase'}. Got 'gauss' instead."
    )
    assert not isinstance(exc.value, TypeError) and isinstance(exc.value, ParameterError)


def test_hierarchy_roundtrip(tmp_path):
    h = Hierarchy.from_rows([["1", "0-4", "*"], ["7", "5-9", "*"]], name="age")
    assert h.height == 3
    assert list(h.generalize(pd.Series(["7", "1"]), 1)) == ["5-9", "0-4"]
    p = tmp_path / "h.csv"
    h.write_arx(p)
    h2 = Hierarchy.read_arx(p)
    assert (h2.table == h.table).all()
    with pytest.raises(InputError, match="'3'"):
        h.check_values(pd.Series(["1", "3"]), "age")


def test_hierarchy_rejects_inconsistent():
    with pytest.raises(InputError, match="same number of levels"):
        Hierarchy.from_rows([["a", "x", "*"], ["b", "*"]])
    with pytest.raises(InputError, match="two parents"):
        Hierarchy.from_rows([["a", "x", "p", "*"], ["b", "x", "q", "*"]])
    with pytest.raises(InputError, match="twice"):
        Hierarchy.from_rows([["a", "*"], ["a", "*"]])


def test_engine_imports_no_qt():
    code = (
        "import sys, dpstudio.engine, dpstudio.cli; "
        "from dpstudio import engine; engine.methods(); "
        "bad=[m for m in sys.modules if m.startswith(('PySide6','pyqtgraph','dpstudio.app'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_engine_functions_not_shadowed_by_submodules():
    code = (
        "from dpstudio import engine; import dpstudio.engine.sweeps, dpstudio.engine.assessment, dpstudio.engine.protection.mdav; "
        "import pandas as pd; df = pd.DataFrame({'x': [1., 2., 3., 4.]}); "
        "list(engine.sweep(df, 'mdav', roles={'x': 'k-quasi'}, ks=[2])); "
        "assert callable(engine.sweep) and callable(engine.methods) and callable(engine.assess), "
        "(engine.sweep, engine.methods, engine.assess)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
