"""The command line of the survey toolbox (issue 23 §1, §3): ``--recode``, ``--merge``,
``--merge-file``, ``--top``, ``--bottom``, ``--pd``, ``--alpha``, ``--strata``,
``--variables``, ``--pram-matrix``, ``--household-vars``, ``--order households``: the same
release as the engine for the same settings, the PRAM matrix as a public file of the release,
recipes, and hostile input (one line naming the option or column, exit code 2, nothing
written, no input altered).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.cli._options import PER_COLUMN_OPTIONS
from dpstudio.engine.registry import all_methods

FREE1 = Path(__file__).resolve().parents[2] / "resources" / "free1" / "free1.csv"
SEED = "123456789012345678901234567890"


@pytest.fixture(scope="module")
def free1():
    return pd.read_csv(FREE1)


def _run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return code, out, err


def test_every_per_column_parameter_has_its_option():
    """The options are declared statically (no registry import for --help): every per-column
    Param's ``option`` must be one of them, mapped to that Param."""
    seen = {}
    for spec in all_methods():
        for p in spec.params:
            if p.kind == "per-column" and p.option:
                seen[p.option] = p.name
    assert seen and seen == PER_COLUMN_OPTIONS
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            cli.main(["protect", "--help"])
        except SystemExit:
            pass
    for opt in [*PER_COLUMN_OPTIONS, "pd", "alpha", "strata", "variables", "household-vars", "merge-file"]:
        assert f"--{opt}" in buf.getvalue(), opt


def test_recode_merge_same_release_as_the_engine(tmp_path, capsys, free1):
    out = tmp_path / "r.csv"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            out,
            "--method",
            "recode",
            "--recode",
            "AGE=0,20,40,60,120",
            "--merge",
            "MARSTAT=1+2:12",
            "--merge",
            "MARSTAT=3+4:34",
            "--seed",
            SEED,
            "--no-measures",
        ],
        capsys,
    )
    assert code == 0, err
    res = engine.protect(
        free1,
        "recode",
        {},
        breaks={"AGE": "0,20,40,60,120"},
        merge={"MARSTAT": "1+2:12,3+4:34"},
        seed=int(SEED),
    )
    rel = pd.read_csv(out)
    assert rel["AGE"].astype(str).tolist() == res.data["AGE"].astype(str).tolist()
    assert rel["MARSTAT"].astype(str).tolist() == res.data["MARSTAT"].astype(str).tolist()
    assert set(rel["MARSTAT"].astype(str)) == {"12", "34"}
    meta = json.loads((tmp_path / "r.metadata.json").read_text())
    assert "0,20,40,60,120" in json.dumps(meta)  # the user's breaks are public params


def test_top_bottom_and_the_data_dependent_threshold_stays_private(tmp_path, capsys, free1):
    out = tmp_path / "t.csv"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            out,
            "--method",
            "top-bottom-coding",
            "--top",
            "INCOME=p95",
            "--bottom",
            "INCOME=1000:500",
            "--seed",
            SEED,
            "--no-measures",
        ],
        capsys,
    )
    assert code == 0, err
    rel = pd.read_csv(out)
    q = float(np.quantile(free1["INCOME"].dropna(), 0.95))  # numpy's default is R's type 7
    assert rel["INCOME"].max() == pytest.approx(q)
    assert rel["INCOME"].min() >= 500 and not ((rel["INCOME"] > 500) & (rel["INCOME"] < 1000)).any()
    assert (rel["INCOME"] == 500).sum() == (free1["INCOME"] < 1000).sum()
    public = (tmp_path / "t.metadata.json").read_text()
    shown = f"{q:.0f}"
    assert shown not in public and "p95" in public
    assert shown in (tmp_path / "t.private.json").read_text()


def test_pram_options_and_the_public_matrix_file(tmp_path, capsys, free1):
    out = tmp_path / "p.csv"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            out,
            "--method",
            "pram",
            "--variables",
            "MARSTAT,EDUC1",
            "--pd",
            "0.7",
            "--alpha",
            "0.6",
            "--strata",
            "SEX",
            "--seed",
            SEED,
            "--no-measures",
        ],
        capsys,
    )
    assert code == 0, err
    res = engine.protect(
        free1, "pram", {}, variables="MARSTAT,EDUC1", pd=0.7, alpha=0.6, strata="SEX", seed=int(SEED)
    )
    rel = pd.read_csv(out)
    assert rel["MARSTAT"].tolist() == res.data["MARSTAT"].tolist()
    matrix = tmp_path / "p.transition_matrix.csv"
    assert matrix.exists()
    assert stat.S_IMODE(os.stat(matrix).st_mode) & 0o044  # public, not owner-only
    t = pd.read_csv(matrix)
    assert np.allclose(t["probability"], res.tables["transition_matrix"]["probability"])
    assert set(t["stratum"]) == {"SEX=1", "SEX=2"}
    meta = json.loads((tmp_path / "p.metadata.json").read_text())
    assert "transition_matrix" in json.dumps(meta["files"])
    assert "Not k-anonymity and not differential privacy" in meta["guarantee"]


def _matrix_file(path: Path, M) -> Path:
    path.write_text(
        "from,1,2,3,4\n" + "\n".join(f"{i + 1}," + ",".join(map(str, r)) for i, r in enumerate(M))
    )
    return path


def test_pram_matrix_file_and_recipe_round_trip(tmp_path, capsys):
    M = np.full((4, 4), 0.1) + np.eye(4) * 0.6
    m = _matrix_file(tmp_path / "m.csv", M)
    before = m.read_bytes()
    out, rec = tmp_path / "a.csv", tmp_path / "rec.json"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            out,
            "--method",
            "pram",
            "--pram-matrix",
            f"MARSTAT={m}",
            "--seed",
            SEED,
            "--no-measures",
            "--save-recipe",
            rec,
            "--report",
            tmp_path / "a.html",
        ],
        capsys,
    )
    assert (
        str(tmp_path) not in (tmp_path / "a.html").read_text()
        and "m.csv" in (tmp_path / "a.html").read_text()
    )
    assert code == 0, err
    assert json.loads(rec.read_text())["params"]["matrix"] == {"MARSTAT": str(m)}  # private: the path
    meta = json.loads((tmp_path / "a.metadata.json").read_text())
    assert meta["parameters"]["matrix"] == {"MARSTAT": "m.csv"}  # public: the name
    assert str(tmp_path) not in (tmp_path / "a.metadata.json").read_text()
    out2 = tmp_path / "b.csv"
    code, _, err = _run(["protect", FREE1, out2, "--recipe", rec, "--no-measures"], capsys)
    assert code == 0, err
    assert out.read_bytes() == out2.read_bytes()
    t = pd.read_csv(tmp_path / "a.transition_matrix.csv")
    assert np.allclose(t["probability"].to_numpy().reshape(4, 4), M)
    assert m.read_bytes() == before


def test_recipe_per_column_merge_command_line_wins_per_column(tmp_path, capsys):
    rec = tmp_path / "rec.json"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            tmp_path / "a.csv",
            "--method",
            "recode",
            "--recode",
            "AGE=0,50,120",
            "--recode",
            "INCOME=quantile:4",
            "--seed",
            SEED,
            "--no-measures",
            "--save-recipe",
            rec,
        ],
        capsys,
    )
    assert code == 0, err
    rec2 = tmp_path / "rec2.json"
    code, _, err = _run(
        [
            "protect",
            FREE1,
            tmp_path / "b.csv",
            "--recipe",
            rec,
            "--recode",
            "AGE=0,30,120",
            "--no-measures",
            "--save-recipe",
            rec2,
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(rec2.read_text())["params"]["breaks"] == {"AGE": "0,30,120", "INCOME": "quantile:4"}


def test_household_options(tmp_path, capsys):
    hh = pd.DataFrame(
        {
            "hid": np.repeat(np.arange(200), 3),
            "size": np.repeat(np.arange(200) % 5 + 1, 3),
            "inc": np.repeat(np.arange(200) * 100.0, 3),
            "sex": np.tile([1, 2, 1], 200),
        }
    )
    f = tmp_path / "hh.csv"
    hh.to_csv(f, index=False)
    out = tmp_path / "o.csv"
    code, _, err = _run(
        [
            "protect",
            f,
            out,
            "--method",
            "top-bottom-coding",
            "--role",
            "hid=household",
            "--top",
            "inc=p90",
            "--household-vars",
            "inc",
            "--keep-household",
            "--seed",
            SEED,
            "--no-measures",
        ],
        capsys,
    )
    assert code == 0, err
    rel = pd.read_csv(out)
    # each household together (shuffled as a unit: the default with a released household id),
    # one value of inc
    runs = (rel["hid"] != rel["hid"].shift()).sum()
    assert runs == 200 and rel.groupby("hid")["inc"].nunique().max() == 1
    assert rel["hid"].drop_duplicates().tolist() != sorted(rel["hid"].unique())
    # the threshold is the 90th percentile over HOUSEHOLDS (one value each), not over records
    assert rel["inc"].max() == pytest.approx(np.quantile(np.arange(200) * 100.0, 0.9))


D = "{d}"
O = "{o}"
BASE = ["protect", f"{D}/d.csv", f"{O}/out.csv", "--no-measures", "--seed", SEED]
REC = BASE + ["--method", "recode"]
TBC = BASE + ["--method", "top-bottom-coding"]
PRAM = BASE + ["--method", "pram", "--variables", "c"]

HOSTILE = [
    (REC + ["--recode", "x"], "--recode"),  # no '='
    (REC + ["--recode", "=0,10"], "--recode"),  # no column
    (REC + ["--recode", "x=10,0"], "'x'"),  # not increasing
    (REC + ["--recode", "x=a,b"], "'x'"),
    (REC + ["--recode", "x=0,nan,10"], "'x'"),
    (REC + ["--recode", "x=quantile:0"], "'x'"),
    (REC + ["--recode", "x=quantile:1e300"], "'x'"),
    (REC + ["--recode", "x=" + ",".join(map(str, range(60_000)))], "'x'"),  # huge text
    (REC + ["--recode", "nope=0,10"], "nope"),  # unknown column
    (REC + ["--recode", "c=0,10"], "'c'"),  # text column into intervals
    (REC + ["--merge", "c=a+b"], "'c'"),  # no target
    (REC + ["--merge", "c=:x"], "'c'"),
    (REC + ["--merge-file", "{o}/none.csv"], "none.csv"),  # missing file
    (REC + ["--merge-file", "/dev/zero"], "/dev/zero"),  # device
    (REC + ["--merge-file", "{d}/fifo"], "fifo"),  # FIFO: never blocks
    (REC + ["--top", "x=5"], "top"),  # an option of another method
    (TBC + ["--top", "x=abc"], "'x'"),
    (TBC + ["--top", "x=p101"], "'x'"),
    (TBC + ["--top", "x=1e400"], "'x'"),
    (TBC + ["--top", "x=5:inf"], "'x'"),
    (TBC + ["--bottom", "c=5"], "'c'"),  # text column
    (TBC + ["--top", "x=\x00"], "'x'"),
    (PRAM + ["--pd", "0"], "pd"),
    (PRAM + ["--pd", "1.5"], "pd"),
    (PRAM + ["--pd", "nan"], "pd"),
    (PRAM + ["--pd", "high"], "pd"),
    (PRAM + ["--alpha", "-1"], "alpha"),
    (PRAM + ["--alpha", "1e308"], "alpha"),
    (PRAM + ["--strata", "nope"], "nope"),
    (BASE + ["--method", "pram", "--variables", "nope"], "nope"),
    (PRAM + ["--pram-matrix", "c=/dev/null"], "/dev/null"),
    (PRAM + ["--pram-matrix", "c={d}/fifo"], "fifo"),
    (PRAM + ["--pram-matrix", "c={o}/missing.csv"], "missing.csv"),
    (PRAM + ["--pram-matrix", "c={d}/badsum.csv"], "badsum.csv"),
    (PRAM + ["--pram-matrix", "c={d}/text.csv"], "text.csv"),
    (PRAM + ["--pram-matrix", "c"], "--pram-matrix"),
    (TBC + ["--top", "x=5", "--order", "households"], "household"),  # no household column
    (TBC + ["--top", "x=5", "--household-vars", "x"], "household"),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("survey_cli")
    rng = np.random.default_rng(0)
    pd.DataFrame(
        {"x": rng.uniform(0, 100, 60).round(2), "c": rng.choice(list("abc"), 60), "y": rng.integers(0, 9, 60)}
    ).to_csv(d / "d.csv", index=False)
    os.mkfifo(d / "fifo")
    (d / "badsum.csv").write_text("from,a,b,c\na,0.5,0.5,0.5\nb,0,1,0\nc,0,0,1\n")
    (d / "text.csv").write_text("from,a,b,c\na,x,y,z\nb,0,1,0\nc,0,0,1\n")
    return d


@pytest.mark.parametrize("argv, needle", HOSTILE)
def test_hostile_one_line_exit_2_nothing_written(data_dir, tmp_path, capsys, argv, needle):
    before = {p.name: p.read_bytes() for p in data_dir.iterdir() if p.is_file()}
    args = [a.replace("{d}", str(data_dir)).replace("{o}", str(tmp_path)) for a in argv]
    box: dict = {}
    th = threading.Thread(target=lambda: box.setdefault("code", cli.main(args)), daemon=True)
    th.start()
    th.join(60)
    assert not th.is_alive(), "hangs"  # a FIFO never blocks
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert box["code"] == 2, (box, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert len(lines) == 1 and lines[0].startswith("dpstudio: error: "), err
    assert needle in lines[0], err
    assert list(tmp_path.iterdir()) == []  # no release, no partial file
    assert before == {p.name: p.read_bytes() for p in data_dir.iterdir() if p.is_file()}


def test_output_over_the_matrix_file_is_refused(tmp_path, capsys):
    m = _matrix_file(tmp_path / "m.csv", np.full((4, 4), 0.25))
    before = m.read_bytes()
    code, _, err = _run(
        [
            "protect",
            FREE1,
            m,
            "--method",
            "pram",
            "--pram-matrix",
            f"MARSTAT={m}",
            "--seed",
            SEED,
            "--no-measures",
        ],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert m.read_bytes() == before
    code, _, err = _run(
        [
            "protect",
            FREE1,
            tmp_path / "o.csv",
            "--method",
            "pram",
            "--pram-matrix",
            f"MARSTAT={m}",
            "--seed",
            SEED,
            "--no-measures",
            "--format",
            "csv",
            "--save-recipe",
            m,
        ],
        capsys,
    )
    assert code == 2 and m.read_bytes() == before, err


def test_concurrent_runs_to_one_output(tmp_path):
    """Two protects writing the same release at once: both end, the release is one of them
    complete (atomic writes), never a mixture."""
    out = tmp_path / "o.csv"
    argv = [
        sys.executable,
        "-m",
        "dpstudio",
        "protect",
        str(FREE1),
        str(out),
        "--method",
        "pram",
        "--variables",
        "MARSTAT",
        "--no-measures",
        "--no-audit-trail",
    ]
    procs = [
        subprocess.Popen(argv + ["--seed", s], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for s in (SEED, SEED + "1")
    ]
    for p in procs:
        p.communicate(timeout=300)
    singles = []
    for s in (SEED, SEED + "1"):
        o = tmp_path / f"single{len(singles)}.csv"
        subprocess.run(argv[:5] + [str(o)] + argv[6:] + ["--seed", s], check=True, capture_output=True)
        singles.append(o.read_bytes())
    assert out.read_bytes() in singles
    t = pd.read_csv(tmp_path / "o.transition_matrix.csv")
    assert len(t) == 16


def test_protect_prints_household_risk_before_and_after(tmp_path, capsys):
    from dpstudio.engine.measures.survey_risk import release_with_household_ids

    td_path = Path(__file__).resolve().parents[2] / "resources" / "testdata" / "testdata.csv"
    keys = ["urbrur", "roof", "sex", "age"]
    roles = ["--role", "ori_hid=household", "--role", "sampling_weight=weight"]
    roles += [a for k in keys for a in ("--role", f"{k}=k-quasi")]
    code, out, err = _run(
        [
            "protect",
            td_path,
            tmp_path / "o.csv",
            "--method",
            "recode",
            "--recode",
            "age=0,15,30,45,60,120",
            "--seed",
            SEED,
            *roles,
        ],
        capsys,
    )
    assert code == 0, err
    td = pd.read_csv(td_path)
    res = engine.protect(
        td,
        "recode",
        {"ori_hid": "household", "sampling_weight": "weight", **{k: "k-quasi" for k in keys}},
        breaks={"age": "0,15,30,45,60,120"},
        seed=int(SEED),
    )
    b = engine.assess_risk(td, keys, household="ori_hid", weight="sampling_weight")
    a = engine.assess_risk(
        release_with_household_ids(res, "ori_hid"), keys, household="ori_hid", weight="sampling_weight"
    )
    line = next(x for x in out.splitlines() if "household risk" in x)
    assert f"original {b.household_expected_reidentifications:g}" in line
    assert f"release {a.household_expected_reidentifications:g}" in line
    assert a.household_expected_reidentifications < b.household_expected_reidentifications
    public = (tmp_path / "o.metadata.json").read_text()
    assert f"{b.household_expected_reidentifications:g}" not in public
