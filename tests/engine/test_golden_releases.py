"""Golden files: the release bytes, the public metadata and the guarantee sentence of every
method under a pinned seed, through the command line (issue 22: "behaviour unchanged").

A restructuring must leave every figure here identical.  A change that alters a release on
purpose (a new calibration, a new default) regenerates the file and says so in its commit::

    DPSTUDIO_UPDATE_GOLDEN=1 python3 -m pytest tests/engine/test_golden_releases.py

Every registered method is covered by a generic case built from its spec (so a new method is
caught until its golden entry is written) and the commonest methods also by a case on the
bundled real data.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.engine.registry import METHOD_MODULES, module_specs
from dpstudio.engine.roles import Role
from tests.conftest import shared_path

GOLDEN = Path(__file__).parent / "golden" / "releases.json"
UPDATE = os.environ.get("DPSTUDIO_UPDATE_GOLDEN") == "1"
SEED = "0x5eed5eed5eed5eed5eed5eed5eed5eed"
#: metadata fields that legitimately change between versions
VOLATILE = ("software_version",)

SPECS = [s for name in METHOD_MODULES for s in module_specs(importlib.import_module(name))]
#: one column per role (the contract test's names)
COLUMN_OF = {Role.K_QUASI: "kq_age", Role.EPS_QUASI: "eq_income", Role.CONFIDENTIAL: "conf_wage"}
DOMAIN_OF = {"kq_age": "0:120", "eq_income": "0:1000", "conf_wage": "0:500"}


def _synthetic(path: Path) -> None:
    rng = np.random.default_rng(20261127)
    n = 80
    pd.DataFrame(
        {
            "kq_age": rng.integers(18, 90, n),
            "eq_income": rng.integers(0, 1000, n),
            "conf_wage": rng.integers(0, 500, n),
            "region": rng.integers(0, 4, n),
        }
    ).to_csv(path, index=False)


def _generic_args(spec) -> list[str]:
    args = ["--method", spec.id]
    for role in spec.protects:
        col = COLUMN_OF.get(role)
        if col is None:
            continue
        args += [
            "--role",
            f"{col}={role.value}",
            "--type",
            f"{col}=integer",
            "--domain",
            f"{col}={DOMAIN_OF[col]}",
        ]
    if spec.uses_k:
        args += ["--k", str(max(3, spec.min_k))]
    if spec.uses_epsilon:
        args += ["--epsilon", "1"]
    return args


CENSUS_EPS = [
    "--role",
    "FICA=eps-quasi",
    "--role",
    "FEDTAX=eps-quasi",
    "--domain",
    "FICA=0:12000",
    "--domain",
    "FEDTAX=0:32000",
]
ADULT_H = shared_path("adult", "hierarchies")

#: name -> (input, argv after "protect IN OUT")
REAL_CASES = {
    "census-mdav": (
        "census",
        [
            "--method",
            "mdav",
            "--k",
            "5",
            "--role",
            "FICA=k-quasi",
            "--role",
            "FEDTAX=k-quasi",
            "--role",
            "INTVAL=k-quasi",
        ],
    ),
    "census-laplace": (
        "census",
        ["--method", "laplace", "--epsilon", "1", "--type", "FICA=integer", *CENSUS_EPS],
    ),
    "census-ir-dp": ("census", ["--method", "ir-dp", "--k", "10", "--epsilon", "1", *CENSUS_EPS]),
    "census-ir-dp-tables": (
        "census",
        ["--method", "ir-dp", "--k", "10", "--epsilon", "1", "--layout", "separate-tables", *CENSUS_EPS],
    ),
    "census-insensitive-dp": (
        "census",
        ["--method", "insensitive-dp", "--k", "20", "--epsilon", "1", *CENSUS_EPS],
    ),
    "census-ir-swap-input-order": (
        "census",
        ["--method", "ir-swap", "--k", "5", "--order", "input", "--role", "FICA=confidential"],
    ),
    "free1-local-suppression": (
        "free1",
        [
            "--method",
            "local-suppression",
            "--k",
            "3",
            *[
                a
                for c in ("SEX", "AGE", "MARSTAT", "KINDPERS")
                for a in ("--role", f"{c}=k-quasi", "--type", f"{c}=categorical")
            ],
        ],
    ),
    "adult-k-eps": (
        "adult",
        [
            "--method",
            "k-eps",
            "--k",
            "5",
            "--epsilon",
            "1",
            "--role",
            "sex=k-quasi",
            "--role",
            "race=k-quasi",
            "--role",
            "marital-status=k-quasi",
            "--role",
            "age=eps-quasi",
            "--domain",
            "age=0:120",
            "--type",
            "age=integer",
            "--hierarchy",
            f"sex={ADULT_H / 'adult_hierarchy_sex.csv'}",
            "--hierarchy",
            f"race={ADULT_H / 'adult_hierarchy_race.csv'}",
            "--hierarchy",
            f"marital-status={ADULT_H / 'adult_hierarchy_marital-status.csv'}",
            "--suppression",
            "0.05",
        ],
    ),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("golden-in")
    syn = d / "synthetic.csv"
    _synthetic(syn)
    adult = d / "adult.csv"
    pd.read_csv(shared_path("adult", "adult.csv"), sep=";", nrows=3000, dtype=str).to_csv(
        adult, sep=";", index=False
    )
    return {
        "synthetic": syn,
        "census": shared_path("census.csv"),
        "free1": shared_path("free1", "free1.csv"),
        "adult": adult,
    }


def _run(inp: Path, out_dir: Path, argv: list[str]) -> dict:
    out = out_dir / "out.csv"
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        rc = cli.main(
            ["protect", str(inp), str(out), "--seed", SEED, "--no-measures", "--no-audit-trail", *argv]
        )
    assert rc == 0, buf_err.getvalue()
    meta = json.loads((out_dir / "out.metadata.json").read_text(encoding="utf-8"))
    for k in VOLATILE:
        meta.pop(k, None)
    files = {}
    for p in sorted(out_dir.iterdir()):
        if p.name != "out.metadata.json":
            files[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {"files": files, "metadata": meta}


def _cases():
    for spec in SPECS:
        yield pytest.param(f"generic-{spec.id}", "synthetic", _generic_args(spec), id=f"generic-{spec.id}")
    for name, (inp, argv) in REAL_CASES.items():
        yield pytest.param(name, inp, argv, id=name)


def _load() -> dict:
    if GOLDEN.exists():
        return json.loads(GOLDEN.read_text(encoding="utf-8"))
    return {}


_UPDATED: dict = {}


@pytest.mark.parametrize("name,inp,argv", list(_cases()))
def test_release_matches_golden(name, inp, argv, inputs, tmp_path):
    got = _run(inputs[inp], tmp_path, argv)
    if UPDATE:
        golden = {**_load(), **_UPDATED}
        golden[name] = got
        _UPDATED[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(
            json.dumps(golden, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return
    golden = _load()
    assert name in golden, (
        f"no golden entry for {name}: a new method or case; write it with "
        "DPSTUDIO_UPDATE_GOLDEN=1 (see the module docstring)"
    )
    want = golden[name]
    assert got["metadata"].get("guarantee") == want["metadata"].get("guarantee")
    assert got["metadata"] == want["metadata"]
    assert got["files"] == want["files"]


def test_golden_file_has_no_stale_entries():
    names = {p.values[0] for p in _cases()}
    stale = set(_load()) - names
    assert not stale, f"golden entries without a case (remove them): {sorted(stale)}"
