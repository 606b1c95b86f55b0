"""Start-up (issue 13): the command line imports only what a command needs.  Checked as
which modules a fresh interpreter loaded (a property), not as a timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_after(code: str, tmp_path) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"],
                         capture_output=True, text=True, cwd=str(tmp_path), env=env, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_version_and_help_do_not_import_the_engine_stack(tmp_path):
    mods = _modules_after("from dpstudio.__main__ import main\n"
                          "import contextlib, io\n"
                          "with contextlib.redirect_stdout(io.StringIO()):\n"
                          "    main(['--version'])\n", tmp_path)
    heavy = {"pandas", "numpy", "scipy", "pyarrow", "numba", "PySide6"} & mods
    assert not heavy, heavy


def test_engine_errors_import_is_light(tmp_path):
    mods = _modules_after("import dpstudio.engine.errors\nimport dpstudio.engine\n", tmp_path)
    assert not {"pandas", "numpy", "scipy"} & mods


def test_protect_on_census_sized_data_does_not_import_scipy_or_numba(tmp_path):
    code = ("from dpstudio.__main__ import main\nimport contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    rc = main(['protect', {str(ROOT / 'resources' / 'census.csv')!r}, 'out.csv', "
            "'--method', 'ir-dp', '--k', '10', '--epsilon', '1', '--role', 'FICA=eps-quasi', "
            "'--domain', 'FICA=0:12000', '--seed', '7'])\n"
            "assert rc == 0, rc\n")
    mods = _modules_after(code, tmp_path)
    assert "pandas" in mods                    # it did run
    assert not {"scipy", "numba", "PySide6", "sklearn", "dask", "distributed", "psutil", "pyqtgraph"} & mods


def test_lazy_engine_names_resolve():
    from dpstudio import engine

    for name in engine.__all__:
        assert getattr(engine, name) is not None
    from dpstudio.engine import protect, sweep  # noqa: F401  (from-imports resolve too)
