"""Start-up (issue 13): the command line imports only what a command needs.  Checked as
which modules a fresh interpreter loaded (a property), not as a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str, tmp_path, *, full: bool = False) -> set[str]:
    """Top-level packages (or, ``full``, every module name) a fresh interpreter loaded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    names = "sys.modules" if full else "{m.split('.')[0] for m in sys.modules}"
    out = subprocess.run(
        [sys.executable, "-c", code + f"\nimport sys, json\nprint(json.dumps(sorted({names})))"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env=env,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_version_and_help_do_not_import_the_engine_stack(tmp_path):
    mods = _modules_after(
        "from dpstudio.__main__ import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--version'])\n",
        tmp_path,
    )
    heavy = {"pandas", "numpy", "scipy", "pyarrow", "numba", "PySide6"} & mods
    assert not heavy, heavy


def test_help_does_not_import_the_engine_stack(tmp_path):
    """The top-level --help builds every command's parser; a command's --help its own: no
    numpy, pandas (the commands import the engine in run())."""
    for argv in (["--help"], ["protect", "--help"], ["sweep", "--help"], ["evaluate", "--help"]):
        mods = _modules_after(
            "from dpstudio.__main__ import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main({argv!r})\n",
            tmp_path,
        )
        assert not {"pandas", "numpy", "scipy", "pyarrow", "numba", "PySide6"} & mods, (argv, mods)


def test_version_imports_no_command_module(tmp_path):
    """The command registry (dpstudio.cli.COMMAND_MODULES) imports a command's module only to
    run it: ``--version`` imports none of them."""
    mods = _modules_after(
        "from dpstudio.__main__ import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--version'])\n",
        tmp_path,
        full=True,
    )
    from dpstudio.cli import COMMAND_MODULES

    assert "dpstudio.cli" in mods
    assert not set(COMMAND_MODULES.values()) & mods, sorted(set(COMMAND_MODULES.values()) & mods)


def test_engine_errors_import_is_light(tmp_path):
    mods = _modules_after("import dpstudio.engine.errors\nimport dpstudio.engine\n", tmp_path)
    assert not {"pandas", "numpy", "scipy"} & mods


PROTECT_CENSUS = (
    "from dpstudio.__main__ import main\nimport contextlib, io\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
    f"    rc = main(['protect', {str(ROOT / 'resources' / 'census.csv')!r}, 'out.csv', "
    "'--method', 'ir-dp', '--k', '10', '--epsilon', '1', '--role', 'FICA=eps-quasi', "
    "'--domain', 'FICA=0:12000', '--seed', '7'])\n"
    "assert rc == 0, rc\n"
)

#: dpstudio modules a protect with ir-dp does not need (issue 13): the other methods' modules
#: (the registry imports only the looked-up method's), their kernels and measures, the reports
#: (no --report / --assessment), sweeps, the Dask backend, the other commands' modules.
#: (engine.recipe is on the path since issue 22: the command's settings are a Recipe; it
#: imports nothing beyond engine.errors and engine.random)
NOT_ON_THE_IR_DP_PATH = {
    "dpstudio.engine.protection.mdav",
    "dpstudio.engine.protection.mdav_swap",
    "dpstudio.engine.protection.ir_swap",
    "dpstudio.engine.protection.laplace",
    "dpstudio.engine.protection.insensitive_dp",
    "dpstudio.engine.protection.k_eps",
    "dpstudio.engine.protection.local_suppression",
    "dpstudio.engine.protection.categorical_dp",
    "dpstudio.engine.protection.t_close_dp",
    "dpstudio.engine.algorithms.generalization",
    "dpstudio.engine.algorithms.generalization_metrics",
    "dpstudio.engine.algorithms.ola",
    "dpstudio.engine.algorithms.mondrian",
    "dpstudio.engine.algorithms.local_suppression",
    "dpstudio.engine.measures.survey_risk",
    "dpstudio.engine.measures.keps",
    "dpstudio.engine.measures.semantic",
    "dpstudio.engine.hierarchies",
    "dpstudio.engine.report",
    "dpstudio.engine.sweeps",
    "dpstudio.engine.backends",
    "dpstudio.app",
    "dpstudio.cli.methods",
    "dpstudio.cli.evaluate",
    "dpstudio.cli.sweep",
    "dpstudio.cli.risk",
    "dpstudio.cli.query",
    "dpstudio.cli.verify",
    "dpstudio.cli.demo",
}


def test_protect_on_census_sized_data_does_not_import_scipy_or_numba(tmp_path):
    mods = _modules_after(PROTECT_CENSUS, tmp_path)
    assert "pandas" in mods  # it did run
    assert not {"scipy", "numba", "PySide6", "sklearn", "dask", "distributed", "psutil", "pyqtgraph"} & mods


def test_protect_ir_dp_imports_only_its_own_method_module(tmp_path):
    mods = _modules_after(PROTECT_CENSUS, tmp_path, full=True)
    assert "dpstudio.engine.protection.ir_dp" in mods and "dpstudio.engine.export" in mods  # it ran
    assert not NOT_ON_THE_IR_DP_PATH & mods, sorted(NOT_ON_THE_IR_DP_PATH & mods)


def test_method_ids_map_every_method_to_its_module():
    """registry.METHOD_IDS (one method looked up = one module imported) agrees with the
    modules' own specs: every id, no extra one, the right module."""
    import importlib

    from dpstudio.engine import registry

    declared = {
        spec.id: name
        for name in registry.METHOD_MODULES
        for spec in registry.module_specs(importlib.import_module(name))
    }
    assert registry.METHOD_IDS == declared


def test_one_method_looked_up_first_keeps_the_menu_order(tmp_path):
    """get_method before all_methods (the command line's path) gives the same specs, in the
    same menu order, as loading them all at once."""
    code = (
        "from dpstudio.engine import registry\n"
        "first = registry.get_method('ir-dp')\n"
        "assert 'dpstudio.engine.protection.k_eps' not in __import__('sys').modules\n"
        "assert registry.is_k_anonymous('k-eps') and not registry.is_k_anonymous('ir-dp')\n"
        "ids = [m.id for m in registry.all_methods()]\n"
        "assert registry.get_method('ir-dp') is first\n"
        "print(ids)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-c"]
    lazy = (
        subprocess.run(run + [code], capture_output=True, text=True, cwd=str(tmp_path), env=env, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    eager = (
        subprocess.run(
            run + ["from dpstudio.engine import registry\nprint([m.id for m in registry.all_methods()])"],
            capture_output=True,
            text=True,
            cwd=str(tmp_path),
            env=env,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert lazy == eager
    assert eager.index("'mdav'") < eager.index("'ir-dp'") < eager.index("'k-eps'")


def test_lazy_engine_names_resolve():
    from dpstudio import engine

    for name in engine.__all__:
        assert getattr(engine, name) is not None
    from dpstudio.engine import protect, sweep  # noqa: F401  (from-imports resolve too)


def test_read_table_parses_a_small_csv_once(monkeypatch):
    """read_table parses the file once: the sniffer's 50-row preview (the app's) is not built
    and thrown away (start-up, issue 13); sniff_csv still returns it to the app."""
    from dpstudio.engine import io as dio
    from dpstudio.engine.io import reading

    calls = []
    real = reading._raw_frame

    def counting(*a, **k):
        calls.append(k.get("nrows"))
        return real(*a, **k)

    monkeypatch.setattr(reading, "_raw_frame", counting)
    df, _ = dio.read_table(ROOT / "resources" / "census.csv")
    assert calls == [None] and df.shape == (1080, 13)
    calls.clear()
    assert len(dio.sniff_csv(ROOT / "resources" / "census.csv", nrows=20)["preview"]) == 20
    assert calls == [20]
