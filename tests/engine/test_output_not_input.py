"""One never-overwrite-the-input check (issue 9): ``engine.io.check_output_not_input``.

Every caller (CLI protect / sweep, CLI protect on Dask, the engine's export and table writer,
the Dask folder writer) refuses through it, with its one message naming both paths.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli
from dpstudio.engine import InputError
from dpstudio.engine import io as dio

#: The one format: names the output and the input, says what to do.
ONE_FORMAT = re.compile(
    r"^Refusing to write the .+ (over the input file|over the folder of the input file|inside the input folder) "
    r".+: choose (another output|an output outside it) .*\(dpstudio never overwrites the input\)\.$"
)


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def frame(n=30, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.uniform(0, 100, n).round(2), "y": rng.integers(0, 50, n)})


@pytest.fixture
def src(tmp_path) -> Path:
    p = tmp_path / "in.csv"
    frame().to_csv(p, index=False)
    return p


def refused(fn, *a, **kw) -> str:
    with pytest.raises(InputError) as ei:
        fn(*a, **kw)
    msg = str(ei.value)
    assert "\n" not in msg and ONE_FORMAT.match(msg), msg
    return msg


# ------------------------------------------------------------------ the function


def test_same_path_and_aliases_refused(src, tmp_path):
    for alias in (src, str(src), tmp_path / "." / "in.csv", tmp_path / "sub" / ".." / "in.csv"):
        msg = refused(dio.check_output_not_input, alias, [src])
        assert str(src) in msg and "in.csv" in msg


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links on this OS")
def test_symlink_refused(src, tmp_path):
    link = tmp_path / "link.csv"
    os.symlink(src, link)
    msg = refused(dio.check_output_not_input, link, src)
    assert str(link) in msg and str(src) in msg
    # and the other way round: the input given through a link, the output its target
    refused(dio.check_output_not_input, src, link)
    # a symlinked folder
    d = tmp_path / "alias_dir"
    os.symlink(tmp_path, d)
    refused(dio.check_output_not_input, d / "in.csv", src)


@pytest.mark.skipif(not hasattr(os, "link"), reason="no hard links on this OS")
def test_hardlink_refused(src, tmp_path):
    hard = tmp_path / "hard.csv"
    os.link(src, hard)  # another name, same inode: writing it would change the input
    assert os.path.realpath(hard) != os.path.realpath(src)
    msg = refused(dio.check_output_not_input, hard, [src])
    assert str(hard) in msg and str(src) in msg


def test_folder_release_containing_input_refused(src, tmp_path):
    msg = refused(dio.check_output_not_input, tmp_path, [src], what="release folder")
    assert "release folder" in msg and "folder of the input" in msg
    part_dir = tmp_path / "parts"
    part_dir.mkdir()
    msg = refused(dio.check_output_not_input, part_dir / "release", [part_dir])
    assert "inside the input folder" in msg


def test_case_insensitive_filesystem_when_detectable(src, tmp_path):
    upper = tmp_path / "IN.CSV"
    if upper.exists():  # a case-insensitive file system (macOS, Windows): samefile sees it
        refused(dio.check_output_not_input, upper, [src])
    else:  # case-sensitive: another file, allowed
        dio.check_output_not_input(upper, [src])


def test_other_outputs_pass(src, tmp_path):
    for ok in (tmp_path / "out.csv", tmp_path / "in.csv.bak", tmp_path / "sub" / "in.csv"):
        assert dio.check_output_not_input(ok, [src, None, ""]) is None
    assert dio.check_output_not_input(None, [src]) is None
    assert dio.check_output_not_input(tmp_path / "out.csv", None) is None


# ------------------------------------------------------------------ every caller uses it


@pytest.fixture
def spy(monkeypatch):
    """Count calls to the one function wherever a caller imports it from."""
    calls: list = []
    real = dio.check_output_not_input

    def wrapped(output, inputs=(), **kw):
        calls.append((str(output), inputs))
        return real(output, inputs, **kw)

    # every write goes through the one guarded writer (engine/safe_write.py), which calls it
    import dpstudio.engine.safe_write as sw

    monkeypatch.setattr(sw, "check_output_not_input", wrapped)
    return calls


PROTECT = [
    "--method",
    "laplace",
    "--epsilon",
    "1",
    "--role",
    "x=eps-quasi",
    "--domain",
    "x=0:100",
    "--seed",
    "0x9e3779b97f4a7c15f39cc0605cedc835",
]


def cli_refuses(capsys, spy, args, src):
    before = sha(src)
    code = cli.main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("dpstudio: error: "), err
    assert ONE_FORMAT.match(err[len("dpstudio: error: ") :]), err
    assert spy, "the CLI did not call check_output_not_input"
    assert sha(src) == before
    return err


def test_cli_protect_refuses(src, tmp_path, capsys, spy):
    err = cli_refuses(capsys, spy, ["protect", src, tmp_path / "." / "in.csv", *PROTECT], src)
    assert str(src) in err
    hard = tmp_path / "hard.csv"
    os.link(src, hard)
    spy.clear()
    cli_refuses(capsys, spy, ["protect", src, hard, *PROTECT], src)
    spy.clear()
    cli_refuses(capsys, spy, ["protect", src, tmp_path / "o.csv", *PROTECT, "--report", src], src)


def test_cli_sweep_refuses(src, tmp_path, capsys, spy):
    link = tmp_path / "link.csv"
    os.symlink(src, link)
    cli_refuses(
        capsys,
        spy,
        [
            "sweep",
            src,
            "--out",
            link,
            "--method",
            "laplace",
            "--epsilon",
            "1",
            "--role",
            "x=eps-quasi",
            "--domain",
            "x=0:100",
        ],
        src,
    )


def test_cli_protect_dask_refuses_before_any_work(src, tmp_path, capsys, spy, monkeypatch):
    pytest.importorskip("dask")
    from dpstudio.engine.backends import dask_backend as DB

    def no_work(*a, **kw):  # the check comes before the cluster and the computation
        raise AssertionError("protect_dask ran although the output is the input")

    monkeypatch.setattr(DB, "protect_dask", no_work)
    cli_refuses(capsys, spy, ["protect", src, tmp_path, *PROTECT, "--engine", "dask"], src)


def test_dask_write_release_refuses(src, tmp_path, spy):
    pytest.importorskip("dask")
    from dpstudio.engine.backends import dask_backend as DB

    refused(DB.write_release, None, tmp_path, input_path=str(src))
    assert spy


def test_engine_export_refuses(src, tmp_path, spy):
    from dpstudio.engine import protect
    from dpstudio.engine.export import export_release

    res = protect(frame(), "laplace", {"x": "eps-quasi"}, {"x": (0, 100)}, epsilon=1.0, seed=1)
    before = sha(src)
    msg = refused(export_release, res, tmp_path / "." / "in.csv", input_path=str(src))
    assert "the release " in msg and spy
    # a side file over the input (release note named like the input)
    refused(export_release, res, tmp_path / "out.csv", input_path=str(src), release_note=str(src))
    assert sha(src) == before
    assert sorted(os.listdir(tmp_path)) == ["in.csv"]  # nothing written


def test_write_table_refuses(src, tmp_path, spy):
    hard = tmp_path / "hard.csv"
    os.link(src, hard)
    refused(dio.write_table, frame().iloc[:3], hard, protect=(str(src),))
    assert spy
