"""Three cosmetic defects left open by issue 11: the k-eps sweep legend, the idle "0 %" progress
box, the OS error text when exporting into a missing folder."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from dpstudio.app.state import AppState


# ------------------------------------------------------------------ 1. k-eps sweep legend
def _legend(panel) -> list[str]:
    return [label.text for _sample, label in panel.legend.items]


def _keps_points():
    """What the engine gives for a k-eps sweep on Adult (shape of the real values): the
    noise-free baseline has SSE exactly 0 (no noise on the ε-quasi-identifiers, the only
    attributes SSE is measured on) and the same re-identifications as the noisy cells."""
    from dpstudio.engine.sweeps import SweepPoint

    rows = []
    for k, reid in ((2, 61.0), (5, 55.0), (10, 46.0)):
        rows.append((k, None, {"sse_normalized": (0.0, 0.0), "sse_raw": (0.0, 0.0), "rl": (0.24, 0.0)}, reid))
        for e in (0.1, 1.0, 10.0):
            sse = 5.7 / e
            rows.append(
                (k, e, {"sse_normalized": (sse, 0.1), "sse_raw": (1e5 * sse, 1.0), "rl": (0.004, 0.0)}, reid)
            )
    pts = []
    for i, (k, e, vals, reid) in enumerate(rows):
        vals = {**vals, "expected_reidentifications": (reid, 0.0)}
        pts.append(SweepPoint(k, e, 1 if e is None else 2, vals, i, len(rows), 0.1))
    return pts


def _n(item) -> int:
    """Points of a curve or scatter (pyqtgraph keeps ``None`` for no data)."""
    return 0 if item.xData is None else len(item.xData)


def _draw_all(panel, qtbot) -> None:
    """Flush the redraw and make every plot compute its bounds (where pyqtgraph warned)."""
    panel.n_plotted()
    panel.resize(1100, 700)
    panel.show()
    qtbot.waitExposed(panel)
    for plot in (panel.sse_plot, panel.rl_plot, panel.plane):
        plot.getPlotItem().vb.childrenBounds()
        plot.getPlotItem().vb.updateAutoRange()
    qtbot.wait(50)


def test_keps_legend_lists_only_series_drawn_on_the_plane_and_no_all_nan_warning(qtbot):
    from dpstudio.app.widgets.explore_panel import ExplorePanel

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.begin([0.1, 1.0, 10.0], True, baselines=True, method="k-eps")
    assert _legend(panel) == []  # nothing drawn yet: nothing listed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        panel.add_points(_keps_points())
        panel.finish()
        _draw_all(panel, qtbot)
    assert not [w for w in caught if "All-NaN" in str(w.message)], [str(w.message) for w in caught]
    assert _legend(panel) == ["ε = 0.1", "ε = 1", "ε = 10"]
    for e in (0.1, 1.0, 10.0):  # every listed series has its three points on the plane
        assert _n(panel.series[e].plane) == 3
    base = panel.series[None]
    assert _n(base.plane) == 0 and _n(base.sse) == 0  # SSE 0: not on a log axis
    assert list(base.rl.yData) == [61.0, 55.0, 46.0]  # the baseline's risk is still drawn
    # the status says why the baseline is not on the plane
    assert "no noise: SSE = 0, off the log axes" in panel.status.text()


def test_legend_keeps_the_baseline_when_it_has_a_loss(qtbot):
    """MDAV's noise-free baseline has SSE > 0: it stays on the plane and in the legend, first."""
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.engine.sweeps import SweepPoint

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.begin([1.0], True, baselines=True, method="mdav")
    pts = []
    for k in (2, 5, 10):
        for e in (None, 1.0):
            v = 0.01 * k * (1 if e is None else 5)
            pts.append(
                SweepPoint(k, e, 1, {"sse_normalized": (v, 0.0), "rl": (40.0 / k, 0.0)}, len(pts), 6, 0.1)
            )
    panel.add_points(pts[:1])  # only the ε = 1 series has no point yet
    panel.n_plotted()
    assert _legend(panel) == ["no noise"]
    panel.add_points(pts[1:])
    panel.finish()
    panel.n_plotted()
    assert _legend(panel) == ["no noise", "ε = 1"]
    assert "SSE = 0" not in panel.status.text()
    panel.clear()
    assert _legend(panel) == []


def test_keps_sweep_from_the_engine_on_adult(qtbot):
    """The real cause, from the engine: k-eps' baseline cells exist and are measured, with SSE 0."""
    from dpstudio import engine
    from dpstudio.app.resources import adult_sample_path
    from dpstudio.app.sweep_view import sweep_view
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy

    df = pd.read_csv(adult_sample_path(), sep=";").head(3000)
    roles = {"sex": "k-quasi", "race": "k-quasi", "marital-status": "k-quasi", "age": "eps-quasi"}
    hdir = adult_sample_path().parent / "hierarchies"
    hs = {c: Hierarchy.read_arx(str(hdir / f"adult_hierarchy_{c}.csv")) for c in roles}
    pts = list(
        engine.sweep(
            df,
            "k-eps",
            roles,
            None,
            measures=sweep_view("k-eps").measures,
            ks=[2, 5],
            epsilons=[1.0],
            repeats=1,
            seed=3,
            hierarchies=hs,
            types={"age": "integer"},  # no domain: the output grid comes from the declared type
        )
    )
    base = [p for p in pts if p.epsilon is None]
    assert len(base) == 2 and all(p.values["sse_normalized"][0] == 0.0 for p in base)
    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.begin([1.0], True, baselines=True, method="k-eps")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        panel.add_points(pts)
        panel.finish()
        _draw_all(panel, qtbot)
    assert not [w for w in caught if "All-NaN" in str(w.message)]
    assert _legend(panel) == ["ε = 1"]
    assert np.isfinite(panel.series[1.0].plane.xData).all()


# ------------------------------------------------------------------ 2. no idle "0 %" box
def test_progress_bar_only_while_a_task_runs_and_nothing_moves(qtbot, window):
    import threading

    win = window
    win.resize(1200, 800)
    win.show()
    qtbot.waitExposed(win)
    qtbot.wait(200)  # the status bar's size grip is laid out after the first show
    bar, cancel, label = win.progress, win.cancel_btn, win.task_label
    assert not bar.isVisible()  # idle: no "0 %" box
    assert cancel.isVisible() and not cancel.isEnabled()  # Cancel stays, disabled
    idle_label, idle_cancel = label.geometry(), cancel.geometry()

    release = threading.Event()

    def work(progress, check_cancel):
        progress(0.4)
        while not release.wait(0.02):
            check_cancel()

    runner = win.controller.run_runner
    runner.start(work)
    try:
        qtbot.waitUntil(lambda: bar.isVisible() and bar.value() == 400, timeout=10000)
        assert cancel.isEnabled()
        assert label.geometry() == idle_label and cancel.geometry() == idle_cancel  # no layout jump
    finally:
        release.set()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=10000)
    assert not bar.isVisible() and bar.value() == 0
    assert cancel.isVisible() and not cancel.isEnabled()
    assert label.geometry() == idle_label and cancel.geometry() == idle_cancel


# ------------------------------------------------------------------ 3. export into a missing folder
def _protected(qtbot, win, tmp_path):
    src = tmp_path / "people.csv"
    pd.DataFrame({"x": np.arange(40, dtype=float), "y": np.arange(40, dtype=float) % 7}).to_csv(
        src, index=False
    )
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        win.controller.open_file(str(src), confirm=False)
    win.state.set_roles({"x": "k-quasi", "y": "k-quasi"})
    win.method_panel.select_method("mdav")
    with qtbot.waitSignal(win.controller.sig_protected, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    assert win.state.result is not None


def _friendly(msg: str, folder) -> bool:
    return (
        msg == f"The folder {folder} does not exist. Choose an existing folder or create it first."
        and "Errno" not in msg
    )


def test_export_into_a_missing_folder_names_the_folder_and_what_to_do(qtbot, window, tmp_path):
    win = window
    _protected(qtbot, win, tmp_path)
    folder = tmp_path / "no" / "such"
    win.errors.clear()
    assert not win.controller.export(str(folder / "out.csv"), fmt="csv")
    assert [m for m, _ in win.errors] and _friendly(win.errors[-1][0], folder)
    assert win.errors[-1][1] == ""  # no traceback under "details"
    assert str(folder) in win.task_label.text()
    assert not folder.exists() and not folder.parent.exists()  # never created silently
    # a file where the folder should be
    (tmp_path / "afile").write_text("x")
    assert not win.controller.export(str(tmp_path / "afile" / "out.csv"), fmt="csv")
    assert win.errors[-1][0] == f"{tmp_path / 'afile'} is a file, not a folder. Choose an existing folder."


def test_folder_removed_while_exporting_gives_the_same_message(qtbot, window, tmp_path, monkeypatch):
    """The check before the task can be overtaken (folder removed, drive unplugged): the
    engine's OS error inside the task becomes the same one-line message, no traceback."""
    import shutil

    from dpstudio.app import controller as ctl_mod

    win = window
    _protected(qtbot, win, tmp_path)
    folder = tmp_path / "releases"
    folder.mkdir()
    real = ctl_mod.io_adapter.export_release

    def vanish_then_export(*a, **kw):
        shutil.rmtree(folder)
        return real(*a, **kw)

    monkeypatch.setattr(ctl_mod.io_adapter, "export_release", vanish_then_export)
    win.errors.clear()
    assert win.controller.export(str(folder / "out.csv"), fmt="csv")
    qtbot.waitUntil(lambda: bool(win.errors), timeout=30000)
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    msg, details = win.errors[-1]
    assert _friendly(msg, folder), msg
    assert details == ""
    assert not folder.exists()


def test_export_dialog_says_the_same_for_a_missing_folder(qtbot, tmp_path):
    from PySide6.QtWidgets import QDialogButtonBox

    from dpstudio import engine
    from dpstudio.app.widgets.export_dialog import ExportDialog

    df = pd.DataFrame({"x": np.arange(12, dtype=float)})
    res = engine.protect(df, "mdav", {"x": "k-quasi"}, k=3, seed=1)
    dlg = ExportDialog(res, str(tmp_path / "in.csv"), export_folder=str(tmp_path))
    qtbot.addWidget(dlg)
    save = dlg.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert save.isEnabled()
    folder = tmp_path / "missing"
    dlg.path.setText(str(folder / "out.csv"))
    assert _friendly(dlg.banner.label.text(), folder)
    assert not save.isEnabled()
    (tmp_path / "afile").write_text("x")
    dlg.path.setText(str(tmp_path / "afile" / "out.csv"))
    assert "is a file, not a folder" in dlg.banner.label.text() and not save.isEnabled()
    dlg.path.setText(str(tmp_path / "out.csv"))
    assert save.isEnabled()


def test_candidate_releases_are_listed_only_once_drawn_and_survive_a_new_sweep(qtbot, window, tmp_path):
    """The history panel's candidates share the plane: their legend entry was listed empty
    before any run, and dropped at the next sweep even with candidates drawn."""
    win = window
    ep = win.explore_panel
    qtbot.waitUntil(lambda: "candidate releases" not in _legend(ep), timeout=5000)  # nothing drawn
    _protected(qtbot, win, tmp_path)
    qtbot.waitUntil(lambda: _n(win.history_panel.points) > 0, timeout=10000)
    assert _legend(ep) == ["candidate releases"]
    ep.begin([1.0], True, baselines=True, method="mdav")
    assert _legend(ep) == ["candidate releases"]
    ep.add_points(_keps_points()[:2])  # k = 2: the baseline (SSE 0) and ε = 0.1
    ep.n_plotted()
    assert _legend(ep) == ["candidate releases"]  # ε = 0.1 is not a series of this sweep
    ep.begin([0.1], True, baselines=True, method="mdav")
    ep.add_points(_keps_points()[:2])
    ep.n_plotted()
    assert _legend(ep) == ["ε = 0.1", "candidate releases"]
