"""Issue 11 "done means": a file the project has never seen, used as a new user would (the
app's real open path, roles, a sweep, Protect, Export), then the exported files checked:
untouched columns byte-identical to the input, nothing computed from the original in the
public files, private files owner-only.  Also: the measures' plain readings are not cut.
"""

import csv
import json
import os
import stat

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QRect, Qt  # noqa: E402
from PySide6.QtGui import QFontMetrics  # noqa: E402

from tests.app._household_setup import set_household_keps  # noqa: E402

N = 3000
COMMENTS = ["à l'école", "Zürich — Ångström", "niño", "", "café crème", "0012 Straße"]
LABELS = {
    "region": {11: "Nord", 12: "Île-de-Sud", 21: "Österreich-Ost", 22: "Kraków", 31: "Açores"},
    "sex": {1: "männlich", 2: "weiblich"},
}


def _household(seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hh = np.repeat(np.arange(1, N // 3 + 1), 3)[:N]
    return pd.DataFrame(
        {
            "hh_id": [f"{h:06d}" for h in hh],  # leading zeros: must survive as text
            "region": rng.choice([11, 12, 21, 22, 31], N, p=[0.3, 0.25, 0.2, 0.15, 0.1]).astype(float),
            "sex": rng.choice([1.0, 2.0], N),
            "age": rng.integers(16, 96, N).astype(float),
            "income": np.round(rng.lognormal(10, 0.8, N), 2),  # skewed
            "weight": np.round(rng.uniform(50, 400, N), 3),
            "comment": rng.choice(COMMENTS, N),
        }
    )


def _idle(qtbot, win, timeout=60000):
    from dpstudio.app import turns

    qtbot.waitUntil(lambda: not win.controller.busy, timeout=timeout)
    for r in win.controller.runners:
        assert r.wait(10)
    qtbot.waitUntil(lambda: not turns.pending(), timeout=timeout)  # the views' later turns
    qtbot.wait(20)


def _use_as_new_user(qtbot, win, path, out):
    """Open through the window's own path, give roles, sweep, protect, export."""
    win.controller.confirm_csv = lambda p, info: {k: info.get(k) for k in ("sep", "encoding", "decimal")}
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        assert win.open_data(str(path))
    st = win.state
    assert len(st.df) == N and st.df["hh_id"].iloc[0] == "000001"  # text, zeros kept
    set_household_keps(win, check_applicable=True)
    ep = win.explore_panel
    ep.ks.setText("2, 5")
    ep.eps.setText("1")
    ep.repeats.setValue(1)
    assert win.controller.run_sweep()
    _idle(qtbot, win)
    assert ep.n_plotted() > 0 and "done" in ep.status.text()
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    _idle(qtbot, win)
    res = st.result
    assert res is not None and "hh_id" not in res.data.columns
    with qtbot.waitSignal(win.controller.sig_exported, timeout=60000) as sig:
        assert win.controller.export(str(out), release_note=True, assessment=True, audit=True)
    _idle(qtbot, win)
    assert not win.errors, win.errors
    return res, st.df, sig.args[0]


def _check_public_private(paths, df, res):
    from dpstudio.engine.export import is_public_kind

    originals = [
        str(N),  # records in the input (the release has fewer: OLA suppression)
        f"{df['income'].mean():.2f}",
    ]
    for kind, p in paths.items():
        mode = stat.S_IMODE(os.stat(p).st_mode)
        if is_public_kind(kind):
            if kind in ("metadata", "release_note"):
                text = open(p, encoding="utf-8").read()
                for s in originals:
                    assert s not in text, (kind, s)
                assert "Pile-up" not in text and "suppressed by the generalisation" not in text
        else:
            assert mode == 0o600, (kind, oct(mode))
    meta = json.loads(open(paths["metadata"], encoding="utf-8").read())
    assert meta["records_released"] == len(res.data) < N
    assert meta["warnings"] == []
    assert "input" not in meta and "records_in_input" not in meta
    assert "weight" in meta["guarantee"] and "comment" in meta["guarantee"]  # named as not covered


def test_new_csv_file_untouched_columns_are_byte_identical(qtbot, window, tmp_path):
    src = tmp_path / "household.csv"
    _household().to_csv(src, index=False, encoding="utf-8")
    (tmp_path / "out").mkdir()
    res, df, paths = _use_as_new_user(qtbot, window, src, tmp_path / "out" / "hh_release.csv")
    _check_public_private(paths, df, res)
    rows_in = list(csv.reader(open(src, encoding="utf-8", newline="")))
    rows_out = list(csv.reader(open(paths["data"], encoding="utf-8", newline="")))
    hin, hout = rows_in[0], rows_out[0]
    assert hout == [c for c in hin if c != "hh_id"]
    assert len(rows_out) - 1 == len(res.data)
    rm = np.asarray(res.row_map)
    for col in ("weight", "comment", "region", "sex"):  # not changed by this release
        i, j = hin.index(col), hout.index(col)
        got = [r[j] for r in rows_out[1:]]
        want = [rows_in[1 + int(rm[r])][i] for r in range(len(got))]
        assert got == want, col  # the very characters of the input (accents, "0012 …")
    assert any("Ångström" in r[hout.index("comment")] for r in rows_out[1:])


def test_new_sav_file_keeps_labels_and_untouched_values(qtbot, window, tmp_path):
    pyreadstat = pytest.importorskip("pyreadstat")
    src = tmp_path / "household.sav"
    df0 = _household()
    pyreadstat.write_sav(
        df0,
        str(src),
        variable_value_labels=LABELS,
        column_labels={"income": "Net yearly income (€)", "comment": "Interviewer's note"},
    )
    (tmp_path / "out").mkdir()
    res, df, paths = _use_as_new_user(qtbot, window, src, tmp_path / "out" / "hh_release.sav")
    assert paths["data"].endswith(".sav")  # the input's format by default
    _check_public_private(paths, df, res)
    out, meta = pyreadstat.read_sav(paths["data"])
    assert meta.variable_value_labels["region"][22.0] == "Kraków"
    assert meta.column_names_to_labels["income"] == "Net yearly income (€)"
    rm = np.asarray(res.row_map)
    for col in ("weight", "comment", "region", "sex"):
        want = df0[col].to_numpy()[rm]
        got = out[col].to_numpy()
        if col == "comment":
            assert list(got) == list(want)
        else:
            np.testing.assert_array_equal(got, want)


def test_measure_readings_are_not_cut(qtbot, window):
    """The "Reading" column wraps its text and its rows are tall enough (it showed
    "error larger than the …" in a narrow column).
    """
    win = window
    win.resize(1400, 900)
    win.show()
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    win.state.set_roles({c: "eps-quasi" for c in cols} | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    win.method_panel.select_method("ir-dp")
    win.method_panel.set_values({"k": 10, "epsilon": 1.0})
    with qtbot.waitSignal(win.controller.sig_protected, timeout=30000):
        assert win.controller.run_protect()
    _idle(qtbot, win)
    win.tabs.setCurrentWidget(win.results_panel)
    qtbot.wait(100)
    t = win.results_panel.measures
    assert t.columnCount() == 3
    fm = QFontMetrics(t.font())
    width = t.columnWidth(2)
    assert width >= 150  # room for a reading, not a sliver
    seen = 0
    for i in range(t.rowCount()):
        it = t.item(i, 2)
        if it is None or not it.text():
            continue
        seen += 1
        need = fm.boundingRect(QRect(0, 0, width - 8, 10_000), int(Qt.TextFlag.TextWordWrap), it.text())
        assert need.height() <= t.rowHeight(i), (it.text(), need.height(), t.rowHeight(i))
        assert need.width() <= width
    assert seen >= 2
