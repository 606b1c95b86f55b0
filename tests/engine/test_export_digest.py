"""Issue 15, item 3: the release's digest in the metadata is the SHA-256 of the bytes written
(each staged file is hashed once; the table is not serialised a second time), and
``dpstudio verify`` checks it."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from dpstudio import cli, engine
from dpstudio.engine import export, types


def _result():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x": rng.uniform(0, 100, 40).round(2), "c": [f"{i:04d}" for i in range(40)]})
    return engine.protect(df, "laplace", {"x": "eps-quasi"}, domains={"x": (0, 100)}, epsilon=1.0, seed=5)


def test_metadata_digest_is_of_the_written_bytes(tmp_path, monkeypatch):
    res = _result()

    def no_reserialising(_df):
        raise AssertionError("the export serialised the table a second time")

    monkeypatch.setattr(types, "frame_sha256", no_reserialising)
    paths = export.export_release(res, tmp_path / "out.csv")
    meta = json.loads((tmp_path / "out.metadata.json").read_text(encoding="utf-8"))
    digest = hashlib.sha256((tmp_path / "out.csv").read_bytes()).hexdigest()
    assert meta["output_sha256"] == digest == meta["files"]["output"]["sha256"]
    assert paths["data"].endswith("out.csv")
    assert cli.main(["verify", str(tmp_path / "out.csv")]) == 0
    (tmp_path / "out.csv").write_bytes((tmp_path / "out.csv").read_bytes() + b"1,0001\n")
    assert cli.main(["verify", str(tmp_path / "out.csv")]) == 1


def test_public_metadata_alone_still_has_a_digest():
    res = _result()
    assert len(res.public_metadata()["output_sha256"]) == 64


def test_another_release_sharing_the_stem_keeps_its_metadata(tmp_path):
    """x.parquet and x.csv share x.metadata.json: writing the second must not leave the first
    described by the second's guarantee and digest. Replacing the same release is fine."""
    import pytest

    from dpstudio.engine.errors import ParameterError

    res = _result()
    export.export_release(res, tmp_path / "x.parquet")
    before = (tmp_path / "x.metadata.json").read_bytes()
    with pytest.raises(ParameterError, match=r"x\.metadata\.json describes the release x\.parquet"):
        export.export_release(res, tmp_path / "x.csv")
    assert (tmp_path / "x.metadata.json").read_bytes() == before
    assert not (tmp_path / "x.csv").exists()
    export.export_release(res, tmp_path / "x.parquet")  # the same release again: replaced
    (tmp_path / "x.parquet").unlink()
    export.export_release(res, tmp_path / "x.csv")  # the other release is gone: no conflict
    meta = json.loads((tmp_path / "x.metadata.json").read_text(encoding="utf-8"))
    assert meta["files"]["output"]["name"] == "x.csv"
