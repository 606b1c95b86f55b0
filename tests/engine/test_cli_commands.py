"""The command line as a package (issue 22.5): one module per command, each declaring its own
parser and run; the recipe applied as data (one settings object, the command line over the
recipe per column); the demo's notes on lines of their own.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dpstudio.cli as cli
from dpstudio.cli._settings import from_command_line, merge
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.recipe import Recipe

ROOT = Path(__file__).resolve().parents[2]


def test_every_command_module_declares_its_parser_and_run():
    sub = argparse.ArgumentParser(prog="dpstudio").add_subparsers(dest="command")
    for name, path in cli.COMMAND_MODULES.items():
        mod = importlib.import_module(path)
        assert callable(mod.run) and callable(mod.add_parser), name
        p = mod.add_parser(sub)
        assert isinstance(p, argparse.ArgumentParser) and p.prog == f"dpstudio {name}", name
    assert cli.COMMANDS == tuple(cli.COMMAND_MODULES)


def test_every_public_module_of_the_package_is_a_registered_command():
    """A new command is a new module AND a registry entry: no module is left unreachable."""
    mods = {m.name for m in pkgutil.iter_modules(cli.__path__) if not m.name.startswith("_")}
    assert mods == {p.rsplit(".", 1)[1] for p in cli.COMMAND_MODULES.values()}


def test_top_level_help_lists_every_command_with_its_summary(capsys):
    assert cli.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name, path in cli.COMMAND_MODULES.items():
        summary = " ".join(importlib.import_module(path).SUMMARY.split())
        assert f"{name} {summary}" in out, name


def test_a_command_parses_with_only_its_own_module(tmp_path):
    """`dpstudio verify X` builds verify's parser only: the other commands are bare names."""
    code = (
        "import sys\nfrom dpstudio.cli import main\n"
        "main(['verify', 'nope.csv'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('dpstudio.cli.')))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = (
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=str(tmp_path),
            env=env,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    loaded = set(eval(out))
    commands = set(cli.COMMAND_MODULES.values())
    assert loaded & commands == {"dpstudio.cli.verify"}, loaded


def test_unknown_command_lists_every_command(capsys):
    assert cli.main(["protcet", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpstudio: error: ") and len(err.strip().splitlines()) == 1
    for name in cli.COMMANDS:
        assert repr(name) in err


# ----------------------------------------------------------------------- settings as data


def _args(command: str, argv: list[str]) -> argparse.Namespace:
    sub = argparse.ArgumentParser(prog="dpstudio").add_subparsers(dest="command")
    cli.command_module(command).add_parser(sub)
    return sub.choices[command].parse_args(argv)


def _settings(command: str, argv: list[str], source: Recipe | None) -> Recipe:
    return merge(from_command_line(_args(command, argv), command), source, command, source_name="r.json")


SOURCE = Recipe(
    method="ir-dp",
    params={"k": 3, "epsilon": 1.0, "shuffle": False},
    roles={"x": "eps-quasi", "y": "eps-quasi", "id": "identifier"},
    types={"x": "numeric", "z": "text"},
    domains={"x": (0.0, 100.0), "y": (0.0, 50.0), "z": (-9.0, 9.0)},
    precision={"x": 0.5, "z": 0.1},
    read_options={"sep": ";", "encoding": "latin-1"},
    seed=12345,
    seed_pinned=False,
    sweep={"ks": [2, 4], "epsilons": "1", "repeats": 3},
    extra={"query_ledger": {"path": "l.json"}},
)


def test_command_line_wins_per_column_and_parameter():
    s = _settings(
        "protect",
        [
            "in.csv",
            "o.csv",
            "--epsilon",
            "2",
            "--role",
            "y=other",
            "--domain",
            "x=-1:101",
            "--type",
            "x=integer",
            "--sep",
            ",",
            "--order",
            "random",
        ],
        SOURCE,
    )
    assert s.method == "ir-dp"
    assert s.params == {
        "k": 3,
        "epsilon": "2",
        "order": "random",
    }  # the old 'shuffle' read as 'order', --order over it
    assert s.roles == {"x": "eps-quasi", "y": "other", "id": "identifier"}
    assert s.domains == {"x": (-1.0, 101.0)}  # y no longer protected, z never: their domains not passed
    assert s.precision == {"x": 0.5}
    assert s.types == {"x": "integer", "z": "categorical"}  # the app's 'text' is a category
    assert s.read_options == {"sep": ",", "encoding": "latin-1"}
    assert s.seed is None and not s.seed_pinned  # the recipe's seed was not pinned
    assert s.extra == SOURCE.extra and s.sweep == SOURCE.sweep  # carried to --save-recipe
    assert s.input_path == os.path.abspath("in.csv")


def test_seed_only_when_pinned_and_command_line_seed_wins():
    pinned = Recipe(**{**SOURCE.__dict__, "seed_pinned": True})
    assert _settings("protect", ["in.csv", "o.csv"], pinned).seed == 12345
    s = _settings("protect", ["in.csv", "o.csv", "--seed", "7"], pinned)
    assert s.seed == 7 and s.seed_pinned


def test_evaluate_takes_roles_types_hierarchies_and_method_only():
    s = _settings("evaluate", ["a.csv", "b.csv"], SOURCE)
    assert s.method == "ir-dp" and s.roles == SOURCE.roles
    assert s.domains == {} and s.precision == {} and s.read_options == {} and s.seed is None


def test_sweep_grid_from_the_recipe_and_the_command_line():
    s = _settings("sweep", ["in.csv", "--out", "s.csv", "--epsilon", "0.5,2"], SOURCE)
    assert s.sweep == {"ks": "2,4", "epsilons": "0.5,2", "repeats": 3}  # a list grid read as its text
    assert "k" not in s.params and "epsilon" not in s.params  # the grid sets them


def test_parameters_of_another_method_are_not_carried_over():
    s = _settings("protect", ["in.csv", "o.csv", "--method", "mdav"], SOURCE)
    assert s.method == "mdav" and s.params == {}


def test_recipe_hierarchy_must_be_a_file(tmp_path):
    gen = Recipe(**{**SOURCE.__dict__, "hierarchies": {"x": {"generated": True}}})
    with pytest.raises(ParameterError, match=r"--hierarchy x=FILE"):
        _settings("protect", ["in.csv", "o.csv"], gen)
    missing = Recipe(**{**SOURCE.__dict__, "hierarchies": {"x": {"path": str(tmp_path / "no.csv")}}})
    with pytest.raises(ParameterError, match="not found"):
        _settings("protect", ["in.csv", "o.csv"], missing)
    # a hierarchy of a column that is not protected is not used (nor checked)
    other = Recipe(**{**SOURCE.__dict__, "hierarchies": {"id": {"generated": True}}})
    assert _settings("protect", ["in.csv", "o.csv"], other).hierarchies == {}


# ----------------------------------------------------------------------- demo


def test_demo_prints_its_private_notes_each_on_a_line_of_its_own():
    """stdout and stderr into one pipe (as in a terminal or with 2>&1): the summary first, then
    every warning and private note at the start of a line.  Standard output block-buffered (as
    in a pipe, without PYTHONUNBUFFERED): the notes must still come after the summary."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "dpstudio", "demo", "--seed", hex(2**100 + 3)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert sum("dpstudio: private note [pile-up]" in ln for ln in lines) >= 1
    for ln in lines:
        assert "dpstudio:" not in ln or ln.startswith("dpstudio"), ln
    rl = next(i for i, ln in enumerate(lines) if ln.startswith("SSE raw"))
    first_note = next(i for i, ln in enumerate(lines) if ln.startswith("dpstudio: private note"))
    assert first_note > rl
