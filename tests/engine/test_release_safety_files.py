"""Issue 8 §2, §4, §6: what is written next to a release must not undo its protection.

Public files (release, metadata, release note) carry nothing computed from the original data;
private files (audit trail, assessment) are owner-only 0600; public files get the umask's
normal permissions, also when they replace an existing file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstudio import cli, engine
from dpstudio.engine import io as dio
from dpstudio.engine.export import export_release, is_public_kind
from dpstudio.engine.report import INTERNAL_MARK, render_assessment, render_release_note

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")

DOMAIN = (0.0, 100.0)


def mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


class umask:
    def __init__(self, m: int) -> None:
        self.m = m

    def __enter__(self):
        self.old = os.umask(self.m)

    def __exit__(self, *exc):
        os.umask(self.old)


def _input_frame(n: int = 137, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(5, 95, n), 6) + 0.000123  # distinctive digits
    df = pd.DataFrame(
        {
            "pid": [f"P{i:04d}" for i in range(n)],
            "x": x,
            "c": np.full(n, 7.0),  # constant: a fact about the data
            "y": rng.integers(0, 5, n),
        }
    )
    df.loc[11, "x"] = np.nan  # one record dropped for a missing value
    return df


def _public_texts(written: dict[str, str]) -> dict[str, str]:
    return {
        k: Path(p).read_text(encoding="utf-8", errors="ignore")
        for k, p in written.items()
        if is_public_kind(k)
    }


def _json_values(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _json_values(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _json_values(v)
    else:
        yield obj


# ------------------------------------------------------------------ permissions (§6)


@posix_only
@pytest.mark.parametrize("mask,public_mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_atomic_write_public_respects_umask_private_is_0600(tmp_path, mask, public_mode):
    pub, priv = tmp_path / "pub.txt", tmp_path / "priv.txt"
    with umask(mask):
        dio.atomic_write(pub, lambda t: Path(t).write_text("a"))
        dio.atomic_write(priv, lambda t: Path(t).write_text("a"), private=True)
        assert mode(pub) == public_mode
        assert mode(priv) == 0o600
        # replacing files with other permissions: the new kind decides
        os.chmod(pub, 0o600)
        os.chmod(priv, 0o644)
        dio.atomic_write(pub, lambda t: Path(t).write_text("b"))
        dio.atomic_write(priv, lambda t: Path(t).write_text("b"), private=True)
        assert mode(pub) == public_mode and pub.read_text() == "b"
        assert mode(priv) == 0o600 and priv.read_text() == "b"


@posix_only
def test_writer_that_recreates_the_temp_file_still_gets_the_right_mode(tmp_path):
    def recreate(t):
        os.unlink(t)
        fd = os.open(t, os.O_WRONLY | os.O_CREAT, 0o666)
        os.write(fd, b"x")
        os.close(fd)

    with umask(0o022):
        dio.atomic_write(tmp_path / "p.txt", recreate, private=True)
    assert mode(tmp_path / "p.txt") == 0o600


def _laplace(df, **kw):
    return engine.protect(
        df,
        "laplace",
        roles={"pid": "identifier", "x": "eps-quasi", "c": "eps-quasi"},
        domains={"x": DOMAIN, "c": DOMAIN},
        epsilon=kw.pop("epsilon", 1.0),
        drop_missing=True,
        seed=kw.pop("seed", 5),
        **kw,
    )


@posix_only
@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_export_modes_public_and_private_also_when_replacing(tmp_path, ext):
    df = _input_frame()
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    res = _laplace(df)
    html = render_assessment(res, {"rl": 1.0})
    with umask(0o022):
        for attempt in range(2):
            w = export_release(
                res, tmp_path / f"rel.{ext}", input_path=src, release_note=True, assessment_html=html
            )
            assert set(w) == {"data", "metadata", "release_note", "private", "assessment"}
            for kind, p in w.items():
                assert mode(p) == (0o644 if is_public_kind(kind) else 0o600), (attempt, kind)
                # next round replaces files whose permissions are the wrong way round
                os.chmod(p, 0o600 if is_public_kind(kind) else 0o644)


# ------------------------------------------------------------------ warnings split (§2)


def test_warnings_split_public_parameter_only_private_data_dependent():
    df = _input_frame()
    res = _laplace(df, epsilon=50.0)
    pub = [str(w) for w in res.public_warnings]
    assert any("very large" in w for w in pub)  # a function of ε only
    assert not any("constant" in w or "dropped" in w for w in pub)
    notes = res.private_notes
    assert any("constant" in w for w in notes) and any("dropped" in w for w in notes)
    md = res.public_metadata()
    text = json.dumps(md, default=str)
    assert "constant" not in text and "dropped" not in text
    assert md["warnings"] == pub and md["records_released"] == len(res.data) == 136


# ------------------------------------------------------------------ CLI: every public file (§2, §4)


def test_cli_public_files_carry_nothing_of_the_original(tmp_path, capsys):
    df = _input_frame()
    src = tmp_path / "secret_input_census.csv"
    df.to_csv(src, index=False)
    in_sha = hashlib.sha256(src.read_bytes()).hexdigest()
    in_size = src.stat().st_size
    out = tmp_path / "rel.csv"
    argv = [
        "protect",
        str(src),
        str(out),
        "--method",
        "laplace",
        "--epsilon",
        "1",
        "--role",
        "pid=identifier",
        "--role",
        "x=eps-quasi",
        "--role",
        "c=eps-quasi",
        "--domain",
        "x=0:100",
        "--domain",
        "c=0:100",
        "--drop-missing",
        "--seed",
        "918273645",
        "--report",
        str(tmp_path / "rel.note.html"),
        "--assessment",
        str(tmp_path / "rel.assessment.private.html"),
    ]
    with umask(0o022):
        code = cli.main(argv)
    stdout, err = capsys.readouterr()
    assert code == 0, err
    written = {
        "data": out,
        "metadata": tmp_path / "rel.metadata.json",
        "release_note": tmp_path / "rel.note.html",
        "private": tmp_path / "rel.private.json",
        "assessment": tmp_path / "rel.assessment.private.html",
    }
    assert all(p.exists() for p in written.values())
    assert "private, keep internal" in stdout

    # what an intruder must not find in the public files
    kept = df.drop(index=11).reset_index(drop=True)
    res = _laplace(df)
    ev = engine.evaluate(res.aligned_original(), res.data, ["x"], measures=("delta",))
    from dpstudio.engine.report import _fmt

    dm = _fmt(ev["delta_mean"]["x"])
    orig_mean = _fmt(float(kept["x"].mean()))
    changed = [repr(float(v)) for v in kept["x"]] + [f"{v:.6f}" for v in kept["x"]]

    pub = {k: Path(p).read_text(encoding="utf-8") for k, p in written.items() if is_public_kind(k)}
    md = json.loads(pub["metadata"])
    values = [str(v) for v in _json_values(md)]
    for key, text in pub.items():
        assert in_sha not in text, key
        assert src.name not in text and "secret_input" not in text, key
        assert not any(c in text for c in changed), key  # no original value the method changed
        assert "918273645" not in text and '"seed"' not in text and "<th>seed<" not in text, key
    assert "input" not in md["files"] and "records_dropped_for_missing_values" not in md
    assert str(len(df)) not in values and str(in_size) not in values  # input row count, size
    assert "constant" not in pub["metadata"] and "dropped" not in pub["metadata"]
    note = pub["release_note"]
    assert f">{len(df)}<" not in note and f">{in_size}<" not in note
    assert "Δ mean" not in note and "delta_mean" not in note.lower() and f">{dm}<" not in note
    assert f">{orig_mean}<" not in note
    assert "constant" not in note and "dropped" not in note and "suppressed" not in note
    assert INTERNAL_MARK not in note

    # the private side holds the audit trail, owner-only
    for k in ("private", "assessment"):
        assert mode(written[k]) == 0o600, k
    for k in ("data", "metadata", "release_note"):
        assert mode(written[k]) == 0o644, k
    trail = json.loads(written["private"].read_text(encoding="utf-8"))
    assert trail["input"]["sha256"] == in_sha and trail["input"]["name"] == src.name
    assert trail["records_in_input"] == len(df) and trail["records_dropped_for_missing_values"] == 1
    assert trail["records_released"] == len(df) - 1
    assert any("constant" in w for w in trail["private_notes"])
    assert any("dropped" in w for w in trail["private_notes"])
    assert trail["software_version"] and trail["written_at"]
    assert "seed" not in json.dumps(trail).lower() and "918273645" not in json.dumps(trail)
    assess = written["assessment"].read_text(encoding="utf-8")
    assert f"<title>{INTERNAL_MARK}" in assess and "Δ mean" in assess
    assert assess.count(INTERNAL_MARK) >= 4  # title, heading, banner, print header + footer
    assert (
        "position: fixed" in assess and "internal-fixed top" in assess and "internal-fixed bottom" in assess
    )


def test_cli_assessment_name_must_say_private(tmp_path, capsys):
    df = _input_frame(40)
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    argv = [
        "protect",
        str(src),
        str(tmp_path / "o.csv"),
        "--method",
        "laplace",
        "--role",
        "x=eps-quasi",
        "--domain",
        "x=0:100",
        "--drop-missing",
        "--assessment",
        str(tmp_path / "report.html"),
    ]
    code = cli.main(argv)
    _, err = capsys.readouterr()
    assert code == 2 and "private" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


# ------------------------------------------------------------------ public files are functions of the release


def _strip_time(text: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?( UTC|\+00:00)?", "<time>", text)


def test_public_files_depend_on_release_and_parameters_only(tmp_path):
    """Same release and parameters, different original data (a neighbour: one record changed,
    other records dropped, other notes): the public side files are identical; the private ones
    are not.  So nothing in them is a function of the original beyond the release itself."""
    df = _input_frame()
    res = _laplace(df)
    nb = res.original.copy()
    nb.loc[0, "x"] = 99.5  # the neighbour differs in one record
    res2 = dataclasses.replace(
        res, original=nb, dropped_rows=[3, 4, 5], warnings=list(res.warnings) + ["Column 'q' is constant."]
    )
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "in.csv").write_text("x\n1\n2\n")
    (b / "in.csv").write_text("x\n3\n4\n")
    wa = export_release(res, a / "rel.csv", input_path=a / "in.csv", release_note=True)
    wb = export_release(res2, b / "rel.csv", input_path=b / "in.csv", release_note=True)
    for kind in ("data", "metadata", "release_note"):
        ta = _strip_time(Path(wa[kind]).read_text(encoding="utf-8"))
        tb = _strip_time(Path(wb[kind]).read_text(encoding="utf-8"))
        assert ta == tb, kind
    assert Path(wa["private"]).read_text() != Path(wb["private"]).read_text()


# ------------------------------------------------------------------ the audit's attack (§4)


def _candidates_from_delta_mean(
    delta_rel: float, released_mean: float, n: int, known_sum: float
) -> list[float]:
    """|mean' − mean| / |mean| = Δ  ⇒  mean = mean' / (1 ± Δ); the missing record is
    n·mean − Σ(known records)."""
    out = []
    for s in (1.0, -1.0):
        if 1 + s * delta_rel != 0:
            out.append(n * released_mean / (1 + s * delta_rel) - known_sum)
    return out


def _delta_mean_from_html(html: str, attr: str) -> float | None:
    i = html.find("Relative change of the mean")
    if i < 0:
        return None
    m = re.search(rf"<tr><td>{re.escape(attr)}</td><td class='num'>([^<]+)</td>", html[i:])
    return float(m.group(1).replace(",", "")) if m else None


def test_audit_attack_recovers_the_record_from_the_assessment_not_from_public_files(tmp_path):
    """The audit: the intruder knows every record but one.  With Δ mean (as the old public
    report had it) and the released mean, the missing value comes back (86).  The public files
    written now carry no Δ mean: the attack has nothing to work with, and the released mean
    alone is far off."""
    rng = np.random.default_rng(21)
    n, target = 100, 86.0
    x = np.concatenate([[target], rng.integers(0, 101, n - 1).astype(float)])
    df = pd.DataFrame({"x": x})
    known_sum = float(x[1:].sum())
    res = engine.protect(
        df, "laplace", roles={"x": "eps-quasi"}, domains={"x": DOMAIN}, epsilon=1.0, seed=123
    )
    measures = engine.evaluate(res.aligned_original(), res.data, ["x"], measures=("delta",))
    w = export_release(
        res, tmp_path / "rel.csv", release_note=True, assessment_html=render_assessment(res, measures)
    )
    released_mean = float(pd.read_csv(w["data"])["x"].mean())

    # the old attack still works on the PRIVATE assessment (which is why it is private)
    d = _delta_mean_from_html(Path(w["assessment"]).read_text(encoding="utf-8"), "x")
    assert d is not None
    cands = [
        c
        for c in _candidates_from_delta_mean(d, released_mean, n, known_sum)
        if DOMAIN[0] - 1 <= c <= DOMAIN[1] + 1
    ]
    assert cands and min(abs(c - target) for c in cands) < 0.5

    # ... and finds nothing in the public files
    for kind, text in _public_texts(w).items():
        assert _delta_mean_from_html(text, "x") is None, kind
        assert "Δ mean" not in text and "delta_mean" not in text.lower(), kind
    note = Path(w["release_note"]).read_text(encoding="utf-8")
    assert "Relative change" not in note
    # the released mean alone (which is public, and DP) does not pin the record down
    naive = n * released_mean - known_sum
    assert abs(naive - target) > 1.0


def test_release_note_is_built_from_the_release_only():
    df = _input_frame()
    res = _laplace(df)
    note = render_release_note(res, now="T")
    gone = dataclasses.replace(res, original=None, dropped_rows=[], warnings=[])
    assert render_release_note(gone, now="T") == note
    # it states method, guarantee, parameters, what is not covered, schema, release statistics
    for part in (
        "Release note",
        res.guarantee.split(".")[0],
        "Parameters",
        "What the guarantee does not cover",
        "Schema of the release",
        "Statistics of the release",
        "y",
    ):
        assert part in note, part
    assert "pid" in note and "removed" in note  # identifier dropped, named as a parameter
    rel_mean = _fmt_release_mean(res)
    assert rel_mean in note


def _fmt_release_mean(res) -> str:
    from dpstudio.engine.report import _fmt

    return _fmt(float(res.data["x"].mean()))
