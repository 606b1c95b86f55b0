"""The vectorised typing of long CSV columns (``io.convert._convert_large``, issue 12's whole-process
time) gives exactly what the per-value path (``io.convert._convert_column``) gives: the same values,
dtypes, missing values and the same texts kept aside to be written back as read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstudio.engine.io import convert as dconv

N = dconv._SMALL + 500  # long enough for the vectorised path

# value generators: each draws one text (nasty forms included)
FORMS = {
    "int": lambda r: str(int(r.integers(-500, 500))),
    "posint": lambda r: str(int(r.integers(1, 99))),
    "plus": lambda r: "+" + str(int(r.integers(0, 9))),
    "minus0": lambda r: "-0",
    "zero": lambda r: "0",
    "lead0": lambda r: f"{int(r.integers(0, 999)):05d}",
    "lead0dec": lambda r: f"0.{int(r.integers(0, 99))}",
    "year": lambda r: str(int(r.integers(1990, 2030))),
    "float": lambda r: repr(float(np.round(r.normal(50, 10), 2))),
    "float150": lambda r: "1.50",
    "sci": lambda r: "1e3",
    "inf": lambda r: "inf",
    "bigint": lambda r: "99999999999999999999",
    "int64max": lambda r: "9223372036854775807",
    "spaced": lambda r: f" {int(r.integers(0, 9))} ",
    "nbsp": lambda r: f"\xa0{int(r.integers(0, 9))}",
    "newline": lambda r: f"{int(r.integers(0, 9))}\n",
    "na": lambda r: str(r.choice(["", "NA", "null", "NaN", "N/A"])),
    "empty": lambda r: "",
    "bool": lambda r: str(r.choice(["TRUE", "FALSE", "true", "False"])),
    "text": lambda r: str(r.choice(["Male", "Female", "Married-civ-spouse", "<=50K"])),
    "unicode_digit": lambda r: "\u0663",
    "comma": lambda r: f"{int(r.integers(0, 99))},{int(r.integers(0, 9))}",
    "group": lambda r: f"{int(r.integers(1, 9))}.{int(r.integers(100, 999))}",
    "dot": lambda r: ".",
}

COLUMNS = [  # (main form, rare forms mixed in at a low rate)
    ("int", []),
    ("int", ["na"]),
    ("int", ["plus"]),
    ("int", ["minus0"]),
    ("int", ["zero"]),
    ("posint", ["lead0"]),
    ("int", ["lead0dec"]),
    ("year", []),
    ("float", []),
    ("float", ["na"]),
    ("float", ["float150"]),
    ("float", ["sci", "inf"]),
    ("int", ["bigint"]),
    ("int", ["int64max"]),
    ("int", ["spaced"]),
    ("int", ["nbsp"]),
    ("int", ["newline"]),
    ("int", ["unicode_digit"]),
    ("na", []),
    ("empty", []),
    ("bool", []),
    ("bool", ["na"]),
    ("bool", ["text"]),
    ("text", []),
    ("text", ["na"]),
    ("text", ["int"]),
    ("int", ["text"]),
    ("comma", []),
    ("comma", ["na", "group"]),
    ("group", []),
    ("int", ["dot"]),
]


def _frame(seed: int, late: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cols = {}
    for j, (main, rare) in enumerate(COLUMNS):
        vals = [FORMS[main](rng) for _ in range(N)]
        for f in rare:
            # a rare form somewhere (late: only after the first 200 values, where the prefilters
            # and the boolean test look first)
            for i in rng.choice(
                np.arange(300 if late else 0, N), size=int(rng.integers(1, 6)), replace=False
            ):
                vals[int(i)] = FORMS[f](rng)
        cols[f"c{j}"] = vals
    raw = pd.DataFrame(cols)
    return raw.astype(str)  # the reader's dtype (dtype=str): pyarrow-backed strings in pandas 3


def _reference(raw: pd.DataFrame, dec: str, explicit: bool):
    """The per-value path on every column (what _convert did for all columns before)."""
    cols, keep = {}, {}
    arr = raw.to_numpy(dtype=object, na_value="")
    for j, c in enumerate(raw.columns):
        r = arr[:, j].copy()
        vals, k = dconv._convert_column(r, dec, explicit)
        cols[str(c)] = vals
        if k:
            keep[str(c)] = r
    return pd.DataFrame(cols, index=pd.RangeIndex(len(raw)), copy=False), keep


@pytest.mark.parametrize("dec,explicit", [(".", False), (".", True), (",", False), (",", True)])
@pytest.mark.parametrize("seed,late", [(0, False), (1, True), (2, False)])
def test_vectorised_typing_equals_the_per_value_path(dec, explicit, seed, late):
    raw = _frame(seed, late)
    got, got_keep = dconv._convert(raw, dec, explicit)
    ref, ref_keep = _reference(raw, dec, explicit)
    pd.testing.assert_frame_equal(got, ref, check_dtype=True, check_exact=True)
    assert list(got.dtypes) == list(ref.dtypes)
    assert sorted(got_keep) == sorted(ref_keep)
    for c in ref_keep:
        assert got_keep[c].tolist() == ref_keep[c].tolist(), c
    # both paths agree on a wide variety of outcomes (the test is not vacuous)
    kinds = {str(t) for t in ref.dtypes}
    assert {"int64", "float64"} <= kinds and len(ref_keep) >= 5


def test_the_fast_path_is_taken_for_plain_columns(monkeypatch):
    """Integers, floats and texts are typed without the per-value path."""
    raw = pd.DataFrame(
        {
            "i": [str(i % 90) for i in range(N)],
            "f": [f"{i / 7:.3f}" for i in range(N)],
            "t": ["Male" if i % 3 else "NA" for i in range(N)],
        }
    ).astype(str)

    def boom(*a, **k):
        raise AssertionError("per-value path used")

    monkeypatch.setattr(dconv, "_convert_column", boom)
    df, keep = dconv._convert(raw, ".")
    assert df["i"].dtype == np.int64 and df["f"].dtype == np.float64
    assert df["t"].isna().sum() == N // 3 + 1 and set(keep) == {"f", "t"}
