"""``--recipe`` / ``--save-recipe`` on protect, sweep and evaluate (issue 9): the recipe's values,
command-line options over them, the effective recipe written private (0600) and without a seed
unless one was pinned, a newer schema refused in one line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.engine.recipe import SCHEMA_VERSION, Recipe

SEED = 0x9E3779B97F4A7C15F39CC0605CEDC835


def run(capsys, args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpstudio: error: "), err
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]


@pytest.fixture
def src(tmp_path) -> Path:
    rng = np.random.default_rng(3)
    n = 60
    df = pd.DataFrame(
        {
            "id": np.arange(n),
            "x": rng.uniform(0, 100, n).round(2),
            "y": rng.integers(0, 50, n),
            "z": rng.normal(size=n).round(3),
        }
    )
    p = tmp_path / "in.csv"
    df.to_csv(p, index=False)
    return p


def write_recipe(path: Path, **kw) -> Path:
    rec = Recipe(
        method="ir-dp",
        params={"k": 3, "epsilon": 1.0},
        roles={"x": "eps-quasi", "y": "eps-quasi", "id": "identifier"},
        domains={"x": (0.0, 100.0), "y": (0.0, 50.0), "z": (-9.0, 9.0)},
        **kw,
    )
    path.write_text(json.dumps(rec.to_dict()))
    return path


EXPLICIT = [
    "--method",
    "ir-dp",
    "--k",
    "3",
    "--epsilon",
    "1",
    "--role",
    "x=eps-quasi",
    "--role",
    "y=eps-quasi",
    "--role",
    "id=identifier",
    "--domain",
    "x=0:100",
    "--domain",
    "y=0:50",
]


def test_recipe_gives_the_release_of_the_same_options(src, tmp_path, capsys):
    rec = write_recipe(tmp_path / "r.json")
    code, _, err = run(
        capsys, ["protect", src, tmp_path / "a.csv", *EXPLICIT, "--seed", hex(SEED), "--no-measures"]
    )
    assert code == 0, err
    code, _, err = run(
        capsys, ["protect", src, tmp_path / "b.csv", "--recipe", rec, "--seed", hex(SEED), "--no-measures"]
    )
    assert code == 0, err
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    # another seed: another release (the seed really reaches the run)
    code, _, err = run(
        capsys,
        ["protect", src, tmp_path / "c.csv", "--recipe", rec, "--seed", hex(SEED + 1), "--no-measures"],
    )
    assert code == 0, err
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()


def test_options_override_the_recipe_and_save_recipe_is_private(src, tmp_path, capsys):
    rec = write_recipe(tmp_path / "r.json", seed=SEED, seed_pinned=False)
    saved = tmp_path / "eff.json"
    code, _, err = run(
        capsys,
        [
            "protect",
            src,
            tmp_path / "o.csv",
            "--recipe",
            rec,
            "--epsilon",
            "2",
            "--role",
            "y=other",
            "--domain",
            "x=-1:101",
            "--no-measures",
            "--save-recipe",
            saved,
        ],
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "o.metadata.json").read_text())
    assert meta["parameters"]["epsilon"] == 2.0 and meta["parameters"]["k"] == 3
    assert meta["domains"]["x"] == [-1.0, 101.0] and meta["roles"].get("y", "other") == "other"
    eff = Recipe.from_dict(json.loads(saved.read_text()))
    assert eff.params["epsilon"] == 2.0 and eff.params["k"] == 3
    assert eff.roles == {"x": "eps-quasi", "id": "identifier"}  # y=other given: not a role any more
    assert eff.domains["x"] == (-1.0, 101.0)
    assert "y" not in eff.domains and "z" not in eff.domains  # not protected: not passed
    # the recipe's seed was not pinned: neither used nor saved
    assert eff.seed is None and not eff.seed_pinned
    assert json.loads(saved.read_text())["seed"] is None
    if os.name == "posix":
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    # unpinned seed in the recipe: two runs differ (fresh OS entropy)
    code, _, err = run(capsys, ["protect", src, tmp_path / "o2.csv", "--recipe", rec, "--no-measures"])
    code, _, err = run(capsys, ["protect", src, tmp_path / "o3.csv", "--recipe", rec, "--no-measures"])
    assert (tmp_path / "o2.csv").read_bytes() != (tmp_path / "o3.csv").read_bytes()


def test_pinned_seed_is_used_and_saved(src, tmp_path, capsys):
    rec = write_recipe(tmp_path / "r.json", seed=SEED, seed_pinned=True)
    saved = tmp_path / "eff.json"
    code, _, err = run(
        capsys, ["protect", src, tmp_path / "a.csv", "--recipe", rec, "--no-measures", "--save-recipe", saved]
    )
    assert code == 0, err
    code, _, err = run(
        capsys, ["protect", src, tmp_path / "b.csv", *EXPLICIT, "--seed", hex(SEED), "--no-measures"]
    )
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    eff = Recipe.from_dict(json.loads(saved.read_text()))
    assert eff.seed == SEED and eff.seed_pinned
    # the saved recipe reproduces the release, and the seed never reaches a public file
    code, _, err = run(capsys, ["protect", src, tmp_path / "c.csv", "--recipe", saved, "--no-measures"])
    assert code == 0, err
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "c.csv").read_bytes()
    for name in ("a.csv", "a.metadata.json", "a.private.json"):
        text = (tmp_path / name).read_text()
        assert f"{SEED:x}" not in text.lower() and str(SEED) not in text, name


def test_newer_schema_and_bad_files_are_one_line(src, tmp_path, capsys):
    p = tmp_path / "future.json"
    p.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "method": "ir-dp"}))
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--recipe", p])
    one_line_error(code, err, "future.json", "newer", "update dpstudio")
    code, _, err = run(capsys, ["sweep", src, "--out", tmp_path / "s.csv", "--recipe", p])
    one_line_error(code, err, "newer")
    code, _, err = run(capsys, ["evaluate", src, src, "--recipe", p])
    one_line_error(code, err, "newer")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--recipe", bad])
    one_line_error(code, err, "bad.json")
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--recipe", tmp_path / "nope.json"])
    one_line_error(code, err, "nope.json", "no such file")
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--k", "3"])
    one_line_error(code, err, "--method")
    code, _, err = run(capsys, ["evaluate", src, src, "--save-recipe", tmp_path / "e.json"])
    one_line_error(code, err, "--save-recipe", "--method")
    gen = write_recipe(tmp_path / "g.json", hierarchies={"x": {"generated": True}})
    code, _, err = run(capsys, ["protect", src, tmp_path / "o.csv", "--recipe", gen])
    one_line_error(code, err, "'x'", "--hierarchy")
    assert not (tmp_path / "o.csv").exists()
    # --save-recipe over the input: refused before any work, by the one check
    code, _, err = run(
        capsys,
        [
            "protect",
            src,
            tmp_path / "o.csv",
            "--recipe",
            write_recipe(tmp_path / "r.json"),
            "--save-recipe",
            src,
        ],
    )
    one_line_error(code, err, "over the input file")


def test_sweep_and_evaluate_read_the_recipe(src, tmp_path, capsys):
    rec = write_recipe(tmp_path / "r.json", sweep={"ks": "2,4", "epsilons": "1", "repeats": 1})
    out = tmp_path / "s.csv"
    saved = tmp_path / "s.recipe.json"
    code, _, err = run(
        capsys,
        [
            "sweep",
            src,
            "--out",
            out,
            "--recipe",
            rec,
            "--no-baselines",
            "--epsilon",
            "0.5,2",
            "--save-recipe",
            saved,
        ],
    )
    assert code == 0, err
    rows = pd.read_csv(out)
    assert sorted(set(rows["k"])) == [2, 4] and sorted(set(rows["epsilon"])) == [0.5, 2.0]
    assert json.loads(saved.read_text())["sweep"] == {"ks": "2,4", "epsilons": "0.5,2", "repeats": 1}
    code, _, err = run(
        capsys, ["protect", src, tmp_path / "p.csv", "--recipe", rec, "--no-measures", "--seed", hex(SEED)]
    )
    assert code == 0, err
    code, o1, err = run(
        capsys, ["evaluate", src, tmp_path / "p.csv", "--recipe", rec, "--json", "--attributes", "x,y"]
    )
    assert code == 0, err
    code, o2, err = run(
        capsys,
        [
            "evaluate",
            src,
            tmp_path / "p.csv",
            "--method",
            "ir-dp",
            "--role",
            "x=eps-quasi",
            "--role",
            "y=eps-quasi",
            "--role",
            "id=identifier",
            "--json",
            "--attributes",
            "x,y",
        ],
    )
    assert code == 0, err
    assert json.loads(o1) == json.loads(o2)


def test_help_says_options_override(capsys):
    for cmd in ("protect", "sweep", "evaluate"):
        code, out, _ = run(capsys, [cmd, "--help"])
        assert code == 0
        flat = " ".join(out.split())
        assert "--recipe" in flat and "--save-recipe" in flat
        assert "override the recipe" in flat
