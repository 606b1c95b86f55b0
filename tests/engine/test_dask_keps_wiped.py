"""Issue 24 §1 on Dask: a k-quasi that OLA generalises to the top of its hierarchy ('*' in
every released record) gets the same private ``k-quasi-wiped`` notice with ``--engine dask``
(and the app's Dask option) as in memory; it was missing on the frequency-set path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
import dask  # noqa: E402

from dpstudio import engine  # noqa: E402
from dpstudio.engine.backends import dask_backend as DB  # noqa: E402
from dpstudio.engine.hierarchies.hierarchy import Hierarchy  # noqa: E402

ROLES = {"a": "k-quasi", "b": "k-quasi"}


def _data(tmp_path, n=240):
    """'a' unique in every record (only '*' makes it 5-anonymous); 'b' four groups of 60."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "a": rng.permutation(n) + 1000,
            "b": np.repeat(["x", "y", "z", "w"], n // 4),
            "v": rng.normal(size=n).round(3),
        }
    )
    hs = {}
    for c in ("a", "b"):
        leaves = sorted({str(v) for v in df[c]})
        path = tmp_path / f"h_{c}.csv"
        Hierarchy.from_rows([[v, "*"] for v in leaves], name=c).write_arx(path)
        hs[c] = str(path)
    return df, hs


def _wiped(warnings) -> list[str]:
    return [str(w) for w in warnings if getattr(w, "code", None) == "k-quasi-wiped"]


@pytest.mark.parametrize("nparts", [1, 3])
def test_both_engines_say_the_k_quasi_was_wiped(tmp_path, nparts):
    df, hs = _data(tmp_path)
    mem = engine.protect(df, "k-eps", ROLES, hierarchies=hs, seed=2, k=5, suppression=0.05)
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(
            dd.from_pandas(df, npartitions=nparts),
            "k-eps",
            ROLES,
            seed=2,
            hierarchies=hs,
            k=5,
            suppression=0.05,
        )
        got = rel.compute()
    assert rel.info["chosen_levels"] == mem.info["chosen_levels"] == {"a": 1, "b": 0}
    assert (got["a"].astype(str) == "*").all() and (mem.data["a"].astype(str) == "*").all()
    want = _wiped(mem.warnings)
    assert len(want) == 1 and "'a'" in want[0] and "'b'" not in want[0]
    assert _wiped(rel.warnings) == want  # the same notice, word for word
    # private: never among the public warnings (metadata)
    assert not _wiped(rel.public_warnings) and not _wiped(mem.public_warnings)


def test_suppressed_records_are_a_coded_notice_on_both_engines(tmp_path):
    df, hs = _data(tmp_path)
    df.loc[:2, "b"] = "v"  # three records no generalisation of a and b keeps: suppressed
    hs["b"] = str(tmp_path / "h_b2.csv")
    Hierarchy.from_rows([[v, "*"] for v in "vwxyz"], name="b").write_arx(hs["b"])
    mem = engine.protect(df, "k-eps", ROLES, hierarchies=hs, seed=2, k=5, suppression=0.05)
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(dd.from_pandas(df, npartitions=2), "k-eps", ROLES, seed=2, hierarchies=hs, k=5)

    def sup(ws):
        return [str(w) for w in ws if getattr(w, "code", None) == "records-suppressed"]

    assert sup(rel.warnings) == sup(mem.warnings) and len(sup(mem.warnings)) == 1


def test_no_notice_when_nothing_is_wiped(tmp_path):
    df, hs = _data(tmp_path)
    df["a"] = np.repeat([1, 2], len(df) // 2)  # now 'a' can be kept
    hs["a"] = str(tmp_path / "h_a2.csv")
    Hierarchy.from_rows([["1", "*"], ["2", "*"]], name="a").write_arx(hs["a"])
    with dask.config.set(scheduler="synchronous"):
        rel = DB.protect_dask(dd.from_pandas(df, npartitions=2), "k-eps", ROLES, seed=2, hierarchies=hs, k=5)
    mem = engine.protect(df, "k-eps", ROLES, hierarchies=hs, seed=2, k=5)
    assert rel.info["chosen_levels"] == mem.info["chosen_levels"] == {"a": 0, "b": 0}
    assert _wiped(rel.warnings) == _wiped(mem.warnings) == []


def test_cli_engine_dask_prints_the_private_note(tmp_path, capsys):
    from dpstudio.cli import main

    df, hs = _data(tmp_path)
    src = tmp_path / "in.csv"
    df.to_csv(src, index=False)
    args = ["protect", str(src), str(tmp_path / "out"), "--method", "k-eps", "--k", "5", "--seed", "3"]
    args += ["--role", "a=k-quasi", "--role", "b=k-quasi", "--hierarchy", f"a={hs['a']}"]
    args += ["--hierarchy", f"b={hs['b']}", "--engine", "dask", "--workers", "1"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "private note [k-quasi-wiped]" in err and "'a' generalised to the top" in err
    meta = (tmp_path / "out" / "metadata.json").read_text()
    assert "generalised to the top" not in meta  # a private fact: never in the public metadata
