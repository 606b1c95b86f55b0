"""End-to-end through the GUI (offscreen): open → classify → sweep → cancel → run → export →
project save/reload; bad CSV; missing values; a method that is not applicable."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from dpstudio import engine  # noqa: F401
from dpstudio.app.widgets.method_panel import list_methods

QUASI = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
SEED = 0xC0FFEE_5EED_0123_4567_89AB_CDEF_F00D_BA5E  # full width; must never appear in a release


def _method():
    ids = [m["id"] for m in list_methods()]
    if "ir-dp" not in ids:
        pytest.skip("ir-dp not registered")
    return "ir-dp"


def _open_sample(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    assert win.state.df is not None and len(win.state.df) == 1080


def _classify(win):
    win.state.set_roles({c: "eps-quasi" for c in QUASI} | {"AFNLWGT": "identifier"})
    done = win.roles_panel.suggest_domains()
    assert sorted(done) == sorted(QUASI)
    assert "leak" in win.roles_panel.banner.text()  # bounds from data leak: warned
    win.method_panel.select_method(_method())
    win.method_panel.set_values({"k": 5, "epsilon": 1.0})
    win.method_panel.seed.setValue(SEED)
    assert win.state.recipe.seed == SEED


def _wait_idle(qtbot, win, timeout=30000):
    qtbot.waitUntil(lambda: not any(r.busy for r in win.controller.runners), timeout=timeout)
    for r in win.controller.runners:
        assert r.wait(10)
    qtbot.wait(20)


def test_full_workflow(qtbot, window, tmp_path):
    win = window
    _open_sample(qtbot, win)
    _classify(win)
    assert win.method_panel.applicability_error() == ""
    assert win.roles_panel.row_check("FICA") == "OK"
    assert win.roles_panel.row_check("AFNLWGT") == "removed from the release"

    # --- sweep: points arrive in the plot while it runs
    ep = win.explore_panel
    ep.ks.setText("2, 5, 10")
    ep.eps.setText("1")
    ep.repeats.setValue(1)
    assert win.controller.run_sweep()
    qtbot.waitUntil(lambda: ep.n_plotted() > 0, timeout=20000)
    _wait_idle(qtbot, win)
    assert ep.n_plotted() == 6  # 3 k × (baseline + ε = 1)
    assert "done" in ep.status.text()
    pt = ep.find_target("rl", 100.0)
    assert pt is not None and pt.epsilon == 1.0

    # hovering finds the point under the cursor (within a few pixels)
    target = next(p for p in ep.points if p.k == 5 and p.epsilon == 1.0)
    for plot in (ep.sse_plot, ep.rl_plot, ep.plane):
        x, y, _p = next(c for c in ep._point_coords(plot) if c[2] is target)
        import pyqtgraph as pg

        scene_pos = plot.getPlotItem().vb.mapViewToScene(pg.Point(x, y))
        assert ep._nearest(plot, scene_pos) is target
    assert "k = 5" in ep.describe(target) and "RL" in ep.describe(target)
    # clicking a point sets k and ε in the form
    ep.choose(next(p for p in ep.points if p.k == 10 and p.epsilon == 1.0))
    assert win.method_panel.values()["k"] == 10
    win.method_panel.set_values({"k": 5})

    # --- cancel: a long sweep stops, no further points, nothing half-done
    ep.ks.setText("2-100")
    ep.eps.setText("0.1, 1, 10")
    ep.repeats.setValue(3)
    assert win.controller.run_sweep()
    qtbot.waitUntil(lambda: ep.n_plotted() > 0, timeout=20000)
    win.controller.cancel_all()
    _wait_idle(qtbot, win)
    n = ep.n_plotted()
    qtbot.wait(200)
    assert ep.n_plotted() == n < 99 * 4
    assert "cancelled" in ep.status.text()
    assert win.state.result is None

    # --- run
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    _wait_idle(qtbot, win)
    res = win.state.result
    assert res is not None and "AFNLWGT" not in res.data.columns
    assert win.results_panel.measures.rowCount() > 0
    assert win.results_panel.corr.rowCount() == len(QUASI)

    # --- export (CSV) with metadata, release note and (private) assessment
    out = tmp_path / "release.csv"
    assert win.controller.export(str(out), fmt="csv", assessment=True)
    _wait_idle(qtbot, win)
    assert out.exists()
    released = pd.read_csv(out)
    assert "AFNLWGT" not in released.columns
    assert len(released) == 1080
    assert list(released.columns) == [c for c in win.state.df.columns if c != "AFNLWGT"]
    # unprotected columns are unchanged, protected ones within their domains
    # (clustered DP methods may release the records in random order: row_map gives, for each
    # released row, the input row it came from)
    agi = win.state.df["AGI"].to_numpy()
    if res.row_map is not None:
        agi = agi[np.asarray(res.row_map)]
    assert (released["AGI"].to_numpy() == agi).all()
    for c in QUASI:
        lo, hi = win.state.domains[c]
        assert released[c].between(lo, hi).all()
    written = list(tmp_path.glob("release*"))
    assert any(p.name.endswith(".metadata.json") for p in written)
    meta = json.loads(next(p for p in written if p.name.endswith(".metadata.json")).read_text())
    assert meta["method"] == "ir-dp"
    report = next(p for p in written if p.name.endswith(".assessment.private.html"))
    assert "data:image/png;base64," in report.read_text(encoding="utf-8")  # the curves
    # public vs private artefacts (issue 8): the private ones are owner-only
    note = next(p for p in written if p.name.endswith(".release-note.html"))
    assert "Δ mean" not in note.read_text(encoding="utf-8")
    trail = json.loads(next(p for p in written if p.name.endswith(".private.json")).read_text())
    assert trail["input"]["sha256"] and "input" not in meta["files"]
    if os.name == "posix":
        import stat

        from dpstudio.engine.io import file_mode

        for p in written:
            private = ".private." in p.name
            assert stat.S_IMODE(p.stat().st_mode) == file_mode(private), p.name
    for p in written:
        text = p.read_text(encoding="utf-8", errors="ignore")
        assert str(SEED) not in text and f"{SEED:x}" not in text.lower(), p.name
        assert '"seed"' not in text, p.name
    # never over the input
    assert not win.controller.export(win.state.path)
    assert any("overwrite" in m for m, _ in win.errors)

    # --- save the project, reload it in a new window: same output under the same seed
    proj = tmp_path / "study.dpsproj"
    assert win.controller.save_project_to(str(proj))
    assert int(json.loads(proj.read_text())["seed"], 16) == SEED
    from dpstudio.app.main_window import MainWindow

    win2 = MainWindow(offer_recovery=False)
    qtbot.addWidget(win2)
    try:
        with qtbot.waitSignal(win2.sig_loaded, timeout=20000):
            assert win2.controller.open_project(str(proj))
        qtbot.wait(20)
        assert win2.state.roles["FICA"] == "eps-quasi"
        assert win2.state.recipe.seed == SEED
        assert win2.method_panel.current_method() == "ir-dp"
        with qtbot.waitSignal(win2.state.sig_result_changed, timeout=30000):
            assert win2.controller.run_protect()
        _wait_idle(qtbot, win2)
        pd.testing.assert_frame_equal(win2.state.result.data, res.data)
    finally:
        win2.shutdown()
        win2.state.mark_dirty(False)
        win2.state.project_path = None


def test_autosave_recovery_file(qtbot, window, _config_dir):
    win = window
    _open_sample(qtbot, win)
    _classify(win)
    win.controller.autosave()
    rec = _config_dir / "recovery.dpsproj"
    assert rec.exists()
    data = json.loads(rec.read_text())
    assert data["roles"]["FICA"] == "eps-quasi" and int(data["seed"], 16) == SEED


def test_bad_csv(qtbot, window, tmp_path):
    win = window
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b'a,b\n1,2\n"unterminated,3\n4,5,6,7\n\x00\xff\xfe')
    win.controller.open_file(str(bad), confirm=False)
    _wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: bool(win.errors), timeout=5000)
    assert win.state.df is None  # nothing half-loaded
    msg, _details = win.errors[0]
    assert "bad.csv" in msg and "Traceback" not in msg
    # the app stays usable
    _open_sample(qtbot, win)
    missing = tmp_path / "nope.csv"
    assert not win.controller.open_file(str(missing), confirm=False)


def test_missing_values(qtbot, window, tmp_path, monkeypatch):
    import dpstudio.app.controller as mw

    # treat this file as big: read and protect in child processes (the path for big data)
    monkeypatch.setattr(mw, "BIG_FILE_BYTES", 0)
    monkeypatch.setattr(mw, "BIG_TABLE_CELLS", 0)
    win = window
    df = pd.read_csv(Path(__file__).resolve().parents[2] / "resources" / "census.csv")
    df = df.astype({"FICA": float})
    df.loc[[3, 7], "FICA"] = np.nan
    path = tmp_path / "holes.csv"
    df.to_csv(path, index=False)
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_file(str(path), confirm=False)
    assert "2 missing" in win.data_panel.info.text().replace(",", "")
    _classify(win)
    assert "missing" in win.roles_panel.row_check("FICA")
    win.errors.clear()
    win.controller.run_protect()
    _wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: bool(win.errors), timeout=5000)
    assert "missing" in win.errors[0][0]
    assert win.state.result is None
    # with drop_missing the run succeeds and says so
    win.method_panel.set_values({"drop_missing": True})
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        win.controller.run_protect()
    _wait_idle(qtbot, win)
    assert len(win.state.result.data) == len(df) - 2
    assert any("dropped" in w for w in win.state.result.warnings)


def test_method_not_applicable(qtbot, window):
    win = window
    _open_sample(qtbot, win)
    _classify(win)
    if "mdav" not in [m["id"] for m in list_methods()]:
        pytest.skip("mdav not registered")
    win.method_panel.select_method("mdav")
    reason = win.method_panel.applicability_error()
    assert "k-quasi" in reason
    assert not win.method_panel.protect_btn.isEnabled()
    assert not win.controller.run_protect()
    assert any("k-quasi" in m for m, _ in win.errors)
    # fixing the roles makes it applicable
    win.state.set_roles({c: "k-quasi" for c in QUASI})
    assert win.method_panel.applicability_error() == ""
    assert win.method_panel.protect_btn.isEnabled()
    # a sweep of a method without ε: one curve over k, no baseline
    win.explore_panel.ks.setText("2, 5")
    assert win.controller.run_sweep()
    _wait_idle(qtbot, win)
    qtbot.waitUntil(lambda: "done" in win.explore_panel.status.text(), timeout=20000)
    assert [p.epsilon for p in win.explore_panel.points] == [None, None]
    assert win.explore_panel.n_plotted() == 2
    # MDAV claims k-anonymity: the results panel shows the engine's class check
    win.method_panel.set_values({"k": 5})
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    _wait_idle(qtbot, win)
    assert "smallest class" in win.results_panel.kanon.text()
    assert "0.00 %" in win.results_panel.kanon.text()


def test_large_table_model_is_lazy(qtbot):
    from dpstudio.app.models import DataFrameModel

    df = pd.DataFrame({"a": np.arange(1_000_000), "b": np.linspace(0, 1, 1_000_000)})
    m = DataFrameModel(df)
    assert m.rowCount() == 1_000_000 and m.columnCount() == 2
    assert m.data(m.index(999_999, 0)) == "999999"
    assert m.data(m.index(500_000, 1)) == f"{df.b[500_000]:.6g}"


def test_generated_hierarchy_covers_the_column(qtbot):
    from dpstudio.app.widgets.roles_panel import generate_hierarchy

    s = pd.Series([3, 1, 2, 2, 10, 7])
    h = generate_hierarchy(s, "x")  # the engine's intervals (doubling width) up to *
    h.check_values(s, "x")  # every value is a leaf
    assert h.height >= 3 and sorted(h.leaves, key=int) == ["1", "2", "3", "7", "10"]
    t = pd.Series(["b", "a", None, "b"])
    ht = generate_hierarchy(t, "t")  # missing values are no leaves
    ht.check_values(t.dropna(), "t")
    assert ht.height == 2 and sorted(ht.leaves) == ["a", "b"]


def test_ui_state_remembered(qtbot, _config_dir):
    from dpstudio.app.main_window import MainWindow

    w1 = MainWindow(offer_recovery=False)
    qtbot.addWidget(w1)
    w1.resize(1366, 740)
    w1.method_splitter.setSizes([500, 866])
    w1.save_ui()
    sizes = w1.method_splitter.sizes()
    w2 = MainWindow(offer_recovery=False)
    qtbot.addWidget(w2)
    assert w2.method_splitter.sizes() == sizes
    assert (_config_dir / "ui.ini").exists()


def test_recovery_offered_after_a_crash(qtbot, window, _config_dir, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from dpstudio.app.main_window import MainWindow

    win = window
    _open_sample(qtbot, win)
    _classify(win)
    win.controller.autosave()  # what the debounced timer does; then the app "crashes" (no closeEvent)
    assert (_config_dir / "recovery.dpsproj").exists()
    asked = []
    monkeypatch.setattr(
        QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or QMessageBox.StandardButton.Yes
    )
    win2 = MainWindow(offer_recovery=True)
    qtbot.addWidget(win2)
    try:
        with qtbot.waitSignal(win2.sig_loaded, timeout=20000):
            pass  # the offer runs from the event loop
        qtbot.waitUntil(lambda: win2.state.recipe.seed == SEED, timeout=5000)
        assert asked and "Recover" in asked[0]
        assert win2.state.roles["FICA"] == "eps-quasi"
        assert win2.state.dirty  # recovered work is unsaved work
    finally:
        win2.shutdown()
        win2.state.mark_dirty(False)


def test_adult_sample_opens_with_its_hierarchies(qtbot, window):
    """File › Open sample (Adult): the semicolon/CRLF ARX extract is sniffed and loaded, and
    every bundled ARX hierarchy covers its column."""
    from dpstudio.app.resources import adult_sample_path
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy

    with qtbot.waitSignal(window.sig_loaded, timeout=30000):
        window.controller.open_adult_sample()
    df = window.state.df
    assert df.shape == (30162, 9)
    assert list(df.columns)[:3] == ["sex", "age", "race"]
    hdir = adult_sample_path().parent / "hierarchies"
    for col in df.columns:
        h = Hierarchy.read_arx(hdir / f"adult_hierarchy_{col}.csv")
        h.check_values(df[col], col)  # raises if a value is missing from the hierarchy
    # ... and they are attached on opening (roles untouched)
    assert set(window.state.hierarchies) == set(df.columns)
    assert not window.state.active_roles()
