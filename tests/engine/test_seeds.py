"""Issue 8 §1: seeds are secrets.  Fresh 128-bit OS entropy unless pinned; pinned seeds of any
width (decimal or 0x-hex); seeds below 2^64 warned about; the seed never reaches a file the
CLI writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.random import (
    STRONG_SEED,
    as_rng,
    format_seed,
    fresh_seed,
    parse_seed,
    point_rng,
    seed_warning,
)

CENSUS = Path(__file__).resolve().parents[2] / "resources" / "census.csv"
BIG = 0x8F1D_2C3B_4A59_6877_0123_4567_89AB_CDEF  # a pinned 128-bit seed


def _needles(seed: int) -> list[str]:
    """How a seed could appear in a file: decimal, hex (with and without 0x, any case)."""
    return [str(seed), format(seed, "x"), format(seed, "X")]


def _files_holding(root: Path, seed: int) -> list[Path]:
    hits = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if any(n.encode() in data for n in _needles(seed)):
                hits.append(p)
    return hits


# ------------------------------------------------------------------ rng primitives


def test_fresh_seeds_are_wide_and_distinct():
    seeds = {fresh_seed() for _ in range(200)}
    assert len(seeds) == 200
    assert all(STRONG_SEED <= s < 2**128 for s in seeds)
    # at least one of them uses the top bits (all 200 below 2^120 has probability 2^-1600)
    assert max(s.bit_length() for s in seeds) > 120


@pytest.mark.parametrize(
    "text, value",
    [
        ("0x1f", 31),
        ("0X1F", 31),
        ("  42 ", 42),
        ("1_000", 1000),
        (hex(BIG), BIG),
        (str(BIG), BIG),
        (str(2**300 + 7), 2**300 + 7),
        (BIG, BIG),
        (np.uint64(2**63), 2**63),
    ],
)
def test_parse_seed_accepts_decimal_and_hex_of_any_width(text, value):
    assert parse_seed(text) == value
    assert parse_seed(format_seed(value)) == value  # hex round trip, no precision lost


@pytest.mark.parametrize("text", ["", "0x", "-5", "1.5", "1e9", "abc", "0b101", "0xzz", "+3", True, -1])
def test_parse_seed_refuses_anything_else_with_a_message(text):
    with pytest.raises(ParameterError, match="seed"):
        parse_seed(text)


def test_weak_seed_warning():
    assert seed_warning(None) == "" and seed_warning(BIG) == "" and seed_warning(2**64) == ""
    for s in (0, 1, 2**31 - 1, 918273645, 2**64 - 1):
        w = seed_warning(s)
        assert "2^64" in w
        if s > 1000:
            assert str(s) not in w and format(s, "x") not in w  # never echoes the seed


def test_point_rng_uses_every_bit_of_a_wide_seed():
    """SeedSequence takes big integers: two seeds that differ only above bit 64 (or above
    bit 128) give different streams; the same seed and key give the same stream."""
    for lo in (12345, BIG):
        a = point_rng(lo, 1, 2).random(4)
        assert np.array_equal(a, point_rng(lo, 1, 2).random(4))
        for high in (2**64, 2**128, 2**200):
            assert not np.array_equal(a, point_rng(lo + high, 1, 2).random(4))
    assert not np.array_equal(point_rng(BIG, 1, 2).random(4), point_rng(BIG, 2, 1).random(4))
    assert not np.array_equal(point_rng(None, 1).random(4), point_rng(None, 1).random(4))
    assert np.array_equal(as_rng(BIG).random(3), as_rng(BIG).random(3))
    assert not np.array_equal(as_rng(BIG).random(3), as_rng(BIG + 2**100).random(3))
    with pytest.raises(ValueError):
        as_rng(-1)


# ------------------------------------------------------------------ engine: no fixed default


def _census():
    return pd.read_csv(CENSUS)


def test_protect_and_sweep_without_seed_are_fresh_each_time():
    df = _census()
    roles, doms = {"FICA": "eps-quasi"}, {"FICA": (0.0, 12000.0)}
    a = engine.protect(df, "ir-dp", roles, doms, k=10, epsilon=1.0).data["FICA"]
    b = engine.protect(df, "ir-dp", roles, doms, k=10, epsilon=1.0).data["FICA"]
    assert not a.equals(b)
    c = engine.protect(df, "ir-dp", roles, doms, k=10, epsilon=1.0, seed=BIG).data["FICA"]
    d = engine.protect(df, "ir-dp", roles, doms, k=10, epsilon=1.0, seed=BIG).data["FICA"]
    assert c.equals(d)

    def sweep(seed):
        return [
            pt.values["sse_raw"][0]
            for pt in engine.sweep(
                df, "ir-dp", roles, doms, ks=(5,), epsilons=(1.0,), repeats=1, seed=seed, baselines=False
            )
        ]

    assert sweep(None) != sweep(None)
    assert sweep(BIG) == sweep(BIG)


# ------------------------------------------------------------------ CLI


def _run(capsys, args):
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


PROTECT = [
    "--method",
    "ir-dp",
    "--k",
    "10",
    "--epsilon",
    "1",
    "--role",
    "FICA=eps-quasi",
    "--role",
    "FEDTAX=eps-quasi",
    "--domain",
    "FICA=0:12000",
    "--domain",
    "FEDTAX=0:200000",
]


def test_cli_seed_never_reaches_a_file(tmp_path, capsys):
    """protect (release, metadata, report) and sweep with a pinned 128-bit seed: no file the
    CLI writes holds it, in decimal or hex; nor does the console output."""
    src = tmp_path / "census.csv"
    src.write_bytes(CENSUS.read_bytes())
    for form in (hex(BIG), str(BIG)):
        out = tmp_path / f"rel_{form[:2]}.csv"
        code, stdout, err = _run(
            capsys,
            ["protect", src, out, *PROTECT, "--seed", form, "--report", tmp_path / f"rel_{form[:2]}.html"],
        )
        assert code == 0, err
        assert not any(n in stdout + err for n in _needles(BIG))
        assert "warning" not in err.lower() or "seed" not in err.lower()  # 128 bits: no warning
    code, stdout, err = _run(
        capsys,
        [
            "sweep",
            src,
            *PROTECT[:2],
            "--role",
            "FICA=eps-quasi",
            "--domain",
            "FICA=0:12000",
            "--k",
            "5,10",
            "--epsilon",
            "1",
            "--repeats",
            "1",
            "--seed",
            hex(BIG),
            "--out",
            tmp_path / "sweep.csv",
        ],
    )
    assert code == 0, err
    assert not any(n in stdout + err for n in _needles(BIG))
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != src]
    assert len(written) >= 5  # 2 releases + 2 metadata + 2 reports + sweep
    assert _files_holding(tmp_path, BIG) == []
    # the same pinned seed, hex or decimal, reproduces the release
    assert (tmp_path / "rel_0x.csv").read_bytes() == (tmp_path / f"rel_{str(BIG)[:2]}.csv").read_bytes()


def test_cli_without_seed_is_fresh_and_weak_seed_is_warned(tmp_path, capsys):
    src = tmp_path / "census.csv"
    src.write_bytes(CENSUS.read_bytes())
    for name in ("a.csv", "b.csv"):
        code, _, err = _run(capsys, ["protect", src, tmp_path / name, *PROTECT, "--no-measures"])
        assert code == 0, err
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "b.csv").read_bytes()
    weak = 918273645
    code, stdout, err = _run(
        capsys, ["protect", src, tmp_path / "w.csv", *PROTECT, "--no-measures", "--seed", str(weak)]
    )
    assert code == 0, err
    warn = [ln for ln in err.splitlines() if "--seed" in ln]
    assert len(warn) == 1 and warn[0].startswith("dpstudio: warning: ") and "2^64" in warn[0]
    assert str(weak) not in stdout + err and format(weak, "x") not in stdout + err
    assert _files_holding(tmp_path, weak) == []


@pytest.mark.parametrize("bad", ["-3", "1.5", "abc", "0x"])
def test_cli_bad_seed_is_one_line(tmp_path, capsys, bad):
    src = tmp_path / "census.csv"
    src.write_bytes(CENSUS.read_bytes())
    code, _, err = _run(capsys, ["protect", src, tmp_path / "o.csv", *PROTECT, f"--seed={bad}"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("dpstudio: error: ")
    assert "--seed" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()


def test_cli_demo_draws_a_fresh_seed(capsys, monkeypatch):
    """'dpstudio demo' used seed 0 by default: now None (fresh entropy) unless --seed."""
    seen = []
    real = engine.protect

    def spy(*a, **kw):
        seen.append(kw.get("seed"))
        return real(*a, **kw)

    monkeypatch.setattr(engine, "protect", spy)
    assert _run(capsys, ["demo"])[0] == 0
    assert _run(capsys, ["demo", "--seed", hex(BIG)])[0] == 0
    assert seen == [None, BIG]
    out1 = _run(capsys, ["demo"])[1]
    out2 = _run(capsys, ["demo"])[1]
    assert out1 != out2  # SSE/RL differ: different noise each run
