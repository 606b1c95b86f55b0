"""Issue 11's app defects 4, 5, 7, 8 (and issue 10's categorical sweep plot), each driven as a user
would; the no-display check of ``dpstudio`` (app/main.py)."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt

from dpstudio.app.state import AppState


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "income": rng.lognormal(10, 1, n).round(2),
            "age": rng.integers(18, 90, n),
            "region": rng.choice(["north", "south", "east", "west"], n),
            "weight": rng.uniform(1, 5, n).round(3),
        }
    )


# ------------------------------------------------------------------ defect 4
def _bottom_ticks(plot):
    return plot.getAxis("bottom")._tickLevels


def test_numeric_histogram_drops_the_category_tick_labels_of_a_text_column(qtbot):
    from dpstudio.app.widgets.roles_panel import RolesPanel

    st = AppState()
    panel = RolesPanel(st)
    qtbot.addWidget(panel)
    st.set_data(_frame(), "a.csv")
    panel.select_column("region")
    assert _bottom_ticks(panel.hist) is not None  # the categories are the ticks
    panel.select_column("income")
    assert _bottom_ticks(panel.hist) is None  # numeric: the axis's own numbers again
    panel.select_column("region")
    st.set_data(_frame(seed=1).drop(columns="region"), "b.csv")  # the next file
    panel.select_column("age")
    assert _bottom_ticks(panel.hist) is None


# ------------------------------------------------------------------ defect 5
def test_optional_parameters_can_be_emptied_and_empty_means_not_given(qtbot):
    from dpstudio.app.widgets.method_panel import MethodPanel

    st = AppState()
    mp = MethodPanel(st)
    qtbot.addWidget(mp)
    mp.select_method("k-eps")
    f = mp.fields["confidence"]
    assert f.value() is None  # the default: not given, as on the command line
    f.set_value(0.99)
    assert f.value() == pytest.approx(0.99)
    sb = f.editor
    sb.lineEdit().selectAll()
    qtbot.keyClick(sb.lineEdit(), Qt.Key.Key_Delete)  # the user empties the field
    sb.interpretText()
    sb.editingFinished.emit()
    assert f.value() is None
    assert mp.values().get("confidence") is None


def test_every_method_form_defaults_are_the_cli_defaults(qtbot):
    """A parameter the user does not touch in the form is what the CLI uses when it is not
    given: the registry's default (k and ε are typed in both front ends)."""
    from dpstudio import engine
    from dpstudio.app.widgets.method_panel import MethodPanel

    st = AppState()
    mp = MethodPanel(st)
    qtbot.addWidget(mp)
    for m in engine.methods():
        assert mp.select_method(m["id"])
        form = mp.values()
        for p in m["params"]:
            assert form.get(p["name"]) == p["default"], (m["id"], p["name"])


def test_k_eps_gui_defaults_and_cli_defaults_give_the_same_release_and_sentence(qtbot, window, tmp_path):
    import json

    from dpstudio import cli

    df = _frame(400)
    src = tmp_path / "people.csv"
    df.to_csv(src, index=False)
    seed = 0x5EED5EED5EED5EED
    win = window
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_file(str(src), confirm=False)
    win.state.set_roles({"age": "k-quasi", "income": "eps-quasi", "region": "other", "weight": "other"})
    win.state.set_domain("income", (0.0, 2_000_000.0))
    win.state.set_precision("income", 0.01)
    win.method_panel.select_method("k-eps")
    win.method_panel.set_values({"k": 5, "epsilon": 1.0})
    win.state.set_seed(seed, pinned=True)
    with qtbot.waitSignal(win.controller.sig_protected, timeout=30000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not any(r.busy for r in win.controller.runners), timeout=30000)
    gui = win.state.result

    out = tmp_path / "cli.csv"
    rc = cli.main(
        [
            "protect",
            str(src),
            str(out),
            "--method",
            "k-eps",
            "--k",
            "5",
            "--epsilon",
            "1",
            "--role",
            "age=k-quasi",
            "--role",
            "income=eps-quasi",
            "--domain",
            "income=0:2000000",
            "--precision",
            "income=0.01",
            "--seed",
            str(seed),
            "--no-measures",
        ]
    )
    assert rc == 0
    meta = json.loads(out.with_suffix(".metadata.json").read_text())
    assert gui.guarantee == meta["guarantee"]
    assert "confiden" not in gui.guarantee
    released = pd.read_csv(out)
    assert list(released.columns) == list(gui.data.columns)
    assert len(released) == len(gui.data)
    for c in released.columns:
        a, b = released[c], gui.data[c]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            assert np.allclose(a.to_numpy(float), b.to_numpy(float), equal_nan=True), c
        else:
            assert (a.astype(str).to_numpy() == b.astype(str).to_numpy()).all(), c


# ------------------------------------------------------------------ defect 8
def test_loading_another_file_clears_the_sweep_status_and_the_stale_note(qtbot):
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.engine.sweeps import SweepPoint

    st = AppState()
    st.set_data(_frame(), "a.csv")
    panel = ExplorePanel(st)
    qtbot.addWidget(panel)
    panel.begin([], False, method="mdav")
    pts = [
        SweepPoint(k, None, 1, {"sse_normalized": (0.1 * k, 0.0), "rl": (50.0 / k, 0.0)}, i, 3, 0.1)
        for i, k in enumerate((2, 5, 10))
    ]
    panel.add_points(pts)
    panel.finish()
    assert panel.status.text().startswith("Sweep done")
    panel.set_stale(True)
    assert panel.status.text().startswith("⚠")
    st.set_data(_frame(seed=2), "b.csv")
    text = panel.status.text()
    assert "Sweep done" not in text and "⚠" not in text and "changed" not in text
    assert panel.n_plotted() == 0
    panel.set_stale(True)  # nothing plotted: nothing to call stale
    assert "⚠" not in panel.status.text()


# ------------------------------------------------------------------ no display
def test_without_a_display_the_app_exits_2_with_a_plain_message(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(root)
    env["DPSTUDIO_CONFIG_DIR"] = str(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "dpstudio"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert p.returncode == 2, (p.returncode, p.stderr[-500:])
    assert "no display" in p.stderr
    assert "dpstudio demo" in p.stderr and "QT_QPA_PLATFORM=offscreen" in p.stderr
    assert "xcb" not in p.stderr and "Traceback" not in p.stderr


def test_display_check_rules():
    from dpstudio.app.main import display_problem

    assert display_problem({}, "linux")
    assert display_problem({"DISPLAY": ":0"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({}, "win32") is None and display_problem({}, "darwin") is None


# ------------------------------------------------------------------ query panel placeholder
def test_query_filter_placeholder_uses_the_loaded_columns(qtbot):
    from dpstudio.app.widgets.query_panel import QueryPanel
    from dpstudio.engine.query import evaluate_filter, parse_filter

    st = AppState()
    panel = QueryPanel(st)
    qtbot.addWidget(panel)
    df = _frame().rename(columns={"age": "age group"})
    st.set_data(df, "people.csv")
    # hidden: not in the turn that installs the table (issue 24 §5), but in a turn of its own
    from dpstudio.app import turns

    assert turns.pending(panel, "placeholder")
    qtbot.waitUntil(lambda: not turns.pending(panel, "placeholder"), timeout=5000)
    text = panel.filter_edit.placeholderText()
    assert "FEDTAX" not in text and "STATETAX" not in text
    assert "income" in text
    example = text.removeprefix("e.g. ").removesuffix(" (optional)")
    mask = evaluate_filter(df, parse_filter(example))  # the example is one the engine reads
    assert 0 < mask.sum() < len(df)


# ------------------------------------------------------------------ defect 7: log axes
@pytest.mark.parametrize(
    "lo,hi,size",
    [
        (0.0015, 0.06, 400),
        (0.002, 0.0095, 450),
        (30.0, 95.0, 420),
        (1e-5, 1e3, 300),
        (0.5, 2.0, 200),
        (0.0061, 0.0069, 400),
    ],
)
def test_log_axis_labels_do_not_overlap_and_are_never_missing(lo, hi, size):
    import math

    from dpstudio.app.widgets.plot_axes import fmt_number, log_ticks

    a, b = math.log10(lo), math.log10(hi)
    labelled, minor = log_ticks(a, b, size, 52.0)
    assert len(labelled) >= 2  # never an axis without numbers
    px = np.diff(labelled) * size / (b - a)
    widths = [7 * len(fmt_number(10**t)) for t in labelled]
    # neighbouring labels (centred on their tick) do not touch
    assert all(px[i] >= (widths[i] + widths[i + 1]) / 2 for i in range(len(px))), (labelled, px)
    assert not set(np.round(labelled, 9)) & set(np.round(minor, 9))


def test_trade_off_plot_axes_are_readable_log_axes(qtbot):
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.app.widgets.plot_axes import LogAxis

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    for plot in (panel.sse_plot, panel.rl_plot, panel.plane):
        assert isinstance(plot.getAxis("bottom"), LogAxis) and isinstance(plot.getAxis("left"), LogAxis)


# ------------------------------------------------------------------ issue 10 / defect 7: what is plotted
def _points(rows):
    from dpstudio.engine.sweeps import SweepPoint

    return [SweepPoint(k, e, 2, vals, i, len(rows), 0.1) for i, (k, e, vals) in enumerate(rows)]


def test_categorical_sweep_plots_suppressed_values_and_reidentifications_against_k(qtbot):
    from dpstudio.app.widgets.explore_panel import ExplorePanel

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.begin([], False, baselines=True, method="local-suppression")
    rows = [
        (k, None, {"suppressed_share": (0.002 * k, 0.0), "expected_reidentifications": (9.0 / k, 0.0)})
        for k in (2, 3, 5, 10)
    ]
    panel.add_points(_points(rows))
    panel.finish()
    assert panel.n_plotted() == 4
    (s,) = panel.series.values()
    assert list(s.sse.xData) == [2, 3, 5, 10]
    assert np.allclose(s.sse.yData, [0.4, 0.6, 1.0, 2.0])  # suppressed key values in %
    assert np.allclose(s.rl.yData, [4.5, 3.0, 1.8, 0.9])  # expected re-identifications
    assert "re-identifications" in panel.rl_plot.getAxis("left").labelText
    assert "suppressed" in panel.sse_plot.getAxis("left").labelText
    assert "suppressed" in panel.plane.getAxis("bottom").labelText
    assert panel._sse_key is None  # the candidates' SSE/RL are not drawn on this plane
    best = panel.find_target("rl", 2.0)  # at most 2 re-identifications, least suppression
    assert best.k == 5


def test_method_without_k_is_plotted_against_epsilon_with_short_error_caps(qtbot):
    from dpstudio.app.widgets.explore_panel import ExplorePanel

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.begin([0.1, 1.0, 10.0], True, baselines=False, method="laplace")
    rows = [
        (None, e, {"sse_normalized": (5.0 / e, 0.5), "sse_raw": (50.0 / e, 5.0), "rl": (e, 0.2)})
        for e in (0.1, 1.0, 10.0)
    ]
    panel.add_points(_points(rows))
    panel.finish()
    assert panel.n_plotted() == 3
    (s,) = panel.series.values()
    assert list(s.sse.xData) == [0.1, 1.0, 10.0]  # against ε, not k = 1
    assert panel.sse_plot.getAxis("bottom").labelText == "ε"
    assert panel.sse_plot.getAxis("bottom")._tickLevels is None  # no k ticks on an ε axis
    beam = s.sse_err.opts["beam"]
    assert 0 < beam <= 0.1 * 2  # a short cap, a share of the two decades drawn
    # one ε only: no caps rather than full-width lines
    panel.begin([1.0], True, baselines=False, method="laplace")
    panel.add_points(_points([(None, 1.0, {"sse_normalized": (5.0, 0.5), "rl": (1.0, 0.2)})]))
    panel.finish()
    (s,) = panel.series.values()
    assert s.sse_err.opts["beam"] == 0


# ------------------------------------------------------------------ results tab with a long guarantee
def test_a_long_guarantee_scrolls_and_leaves_room_for_the_measures(qtbot):
    from dpstudio.app.widgets.results_panel import ResultsPanel

    panel = ResultsPanel(AppState())
    qtbot.addWidget(panel)
    panel.resize(1200, 800)
    panel.show()
    qtbot.waitExposed(panel)
    cols = ", ".join(f"OTHER_COLUMN_{i:02d}" for i in range(30))
    long = "<b>Guarantee:</b><br>" + ("1-differential privacy on the ε-quasi-identifiers. " * 6 + "<br>") * 4
    panel.header.setText(long + f"Not covered: the 30 column(s) released unchanged ({cols}).<br>" * 4)
    panel.warn.show_message("⚠ a warning line", "warning")
    qtbot.wait(50)
    panel.fit_header()
    qtbot.wait(50)
    assert panel.splitter.height() >= 0.5 * panel.height()  # measures and plots keep their room
    assert panel.export_btn.isVisible()
    area = panel.header_area
    assert area.verticalScrollBar().maximum() > 0  # the guarantee scrolls instead

    panel.header.setText("<b>Guarantee:</b> a short one.")  # short: no empty band above the measures
    panel.warn.hide()
    panel.fit_header()
    qtbot.wait(50)
    assert panel.header_area.height() < 0.2 * panel.height()


def test_app_sweeps_compute_the_cli_sweep_measures_for_every_method():
    from dpstudio import engine
    from dpstudio.app.sweep_view import sweep_view
    from dpstudio.engine.measures import default_measures

    for m in engine.methods():
        v = sweep_view(m["id"])
        assert v.measures == tuple(default_measures(m["id"])), m["id"]
        assert v.x == ("k" if "k" in [p["name"] for p in m["params"]] else "epsilon"), m["id"]


def test_keps_sweep_plots_expected_reidentifications_against_k():
    """Issue 10 "App": a categorical k-anonymous method's sweep plots the expected
    re-identifications on its (generalised) keys, computed by the engine's default measures."""
    from dpstudio.app.sweep_view import sweep_view
    from dpstudio.engine.measures import default_measures

    assert "reid" in default_measures("k-eps")
    v = sweep_view("k-eps")
    assert v.x == "k"
    assert v.risk == "expected_reidentifications"
    assert sweep_view("mdav").risk == "rl"


def test_export_is_not_proposed_next_to_the_input(qtbot, tmp_path):
    """Issue 11 #10: the release is proposed in the last export folder (else home), never by
    default in the input's folder, where unprotected microdata usually sits."""
    from pathlib import Path

    import pandas as pd

    from dpstudio import engine
    from dpstudio.app.widgets.export_dialog import ExportDialog

    src = tmp_path / "confidential" / "survey.csv"
    src.parent.mkdir()
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    df.to_csv(src, index=False)
    res = engine.protect(df, "mdav", {"x": "k-quasi"}, k=2, seed=1)
    dlg = ExportDialog(res, str(src))
    qtbot.addWidget(dlg)
    assert Path(dlg.path.text()).parent == Path.home()
    out = tmp_path / "releases"
    out.mkdir()
    dlg2 = ExportDialog(res, str(src), export_folder=str(out))
    qtbot.addWidget(dlg2)
    assert Path(dlg2.path.text()) == out / "survey_protected.csv"


def test_method_names_wrap_instead_of_scrolling_sideways(qtbot, window):
    """Issue 11 #10: long method names (with "(not applicable)") were cut and needed a
    horizontal scroll bar; they wrap now."""
    win = window
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    win.resize(1200, 800)
    win.show()
    win.tabs.setCurrentIndex(2)
    qtbot.wait(200)
    lst = win.method_panel.list
    texts = [lst.item(i).text() for i in range(lst.count())]
    assert any("not applicable" in t for t in texts)  # the long labels are there
    assert lst.horizontalScrollBar().maximum() == 0


def test_sweep_grid_fields_follow_the_methods_parameters(qtbot, window):
    """A method without ε (local-suppression) ignores the ε grid, one without k (laplace) the k
    grid: the fields are disabled instead of looking as if they were swept."""
    win = window
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    ex = win.explore_panel
    win.method_panel.select_method("local-suppression")
    assert ex.ks.isEnabled() and not ex.eps.isEnabled()
    win.method_panel.select_method("laplace")
    assert not ex.ks.isEnabled() and ex.eps.isEnabled()
    win.method_panel.select_method("ir-dp")
    assert ex.ks.isEnabled() and ex.eps.isEnabled()
