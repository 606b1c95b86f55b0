"""Issue 24 §1 with the app's Dask option (sample mode: the whole file protected on Dask): a
k-quasi wiped to '*' is said in the Results as a private note, as the in-memory run says it."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

from tests.engine.test_dask_keps_wiped import ROLES, _data  # noqa: E402


def test_app_dask_release_carries_the_wiped_note(tmp_path):
    from dpstudio import engine
    from dpstudio.app import large_file as LF

    df, hs = _data(tmp_path)
    src = tmp_path / "in.parquet"
    df.to_parquet(src, index=False)
    out = LF.protect_whole_file(
        str(src),
        str(tmp_path / "rel"),
        "k-eps",
        ROLES,
        {},
        seed=4,
        hierarchies=hs,
        params={"k": 5},
        processes=False,
    )
    mem = engine.protect(df, "k-eps", ROLES, hierarchies=hs, seed=4, k=5)
    want = [str(w) for w in mem.warnings if getattr(w, "code", None) == "k-quasi-wiped"]
    assert want and [w for w in out["private_notes"] if w in want] == want
    assert not [w for w in out["public_warnings"] if "generalised to the top" in w]
    text = LF.release_text(out)
    assert "Private note (keep internal)" in text and "generalised to the top" in text
