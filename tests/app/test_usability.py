"""Fixes found by walking through the app as a new user: drag and drop, the concrete
guarantee sentence, categorical results, generalised numeric attributes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QDialog


def _drop(win, path) -> bool:
    """Drag ``path`` over the window and drop it, as the window system would."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    enter = QDragEnterEvent(
        QPoint(50, 50),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(win, enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(
        QPointF(50, 50),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(win, drop)
    return True


def test_drop_csv_file_opens_it(qtbot, window, tmp_path, monkeypatch):
    from dpstudio.app.widgets.csv_dialog import CsvPreviewDialog

    shown = []
    monkeypatch.setattr(
        CsvPreviewDialog, "exec", lambda self: shown.append(self) or QDialog.DialogCode.Accepted
    )
    p = tmp_path / "dropped.csv"
    p.write_text("a;b\n1,5;2\n3,25;4\n5;6\n", encoding="utf-8")
    with qtbot.waitSignal(window.sig_loaded, timeout=10000):
        assert _drop(window, p)
    assert shown, "a dropped CSV goes through the preview dialog"
    df = window.state.df
    assert list(df.columns) == ["a", "b"]
    assert df["a"].tolist() == [1.5, 3.25, 5.0]  # ';' and decimal ',' detected
    assert window.state.path == str(p)


def test_drop_project_file_opens_project(qtbot, window, tmp_path):
    from dpstudio.app import project
    from dpstudio.app.resources import sample_path

    with qtbot.waitSignal(window.sig_loaded, timeout=20000):
        window.controller.open_sample()
    window.state.set_roles({"FICA": "eps-quasi"})
    window.state.set_seed(1234)
    pp = tmp_path / ("p" + project.SUFFIX)
    assert window.controller.save_project_to(str(pp))
    window.state.set_seed(1)
    with qtbot.waitSignal(window.sig_loaded, timeout=20000):
        assert _drop(window, pp)
    qtbot.waitUntil(lambda: window.state.recipe.seed == 1234, timeout=5000)
    assert window.state.roles["FICA"] == "eps-quasi"
    assert window.state.path == str(sample_path())


def test_drag_without_files_is_refused(qtbot, window):
    mime = QMimeData()
    mime.setText("not a file")
    ev = QDragEnterEvent(
        QPoint(5, 5),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    ev.ignore()
    QApplication.sendEvent(window, ev)
    assert not ev.isAccepted()


def test_method_panel_guarantee_names_the_protected_columns(qtbot, window):
    with qtbot.waitSignal(window.sig_loaded, timeout=20000):
        window.controller.open_sample()
    mp = window.method_panel
    cols = ["FICA", "FEDTAX", "INTVAL"]
    window.state.set_roles({c: "eps-quasi" for c in cols})
    mp.select_method("ir-dp")
    mp.set_values({"epsilon": 2.0, "budget": "per-attribute"})
    g = mp.guarantee_text
    assert "(3·2 = 6)-differential privacy" in g, g
    assert all(c in g for c in cols), g
    assert " m protected" not in g  # the generic sentence is gone
    # a role change updates the sentence at once
    window.state.set_role("INTVAL", "other")
    assert "(2·2 = 4)" in mp.guarantee_text, mp.guarantee_text
    assert mp.protected_columns() == ["FICA", "FEDTAX"] or set(mp.protected_columns()) == {"FICA", "FEDTAX"}


def test_results_warning_has_no_html_entities(qtbot, window):
    """A single warning with a quote used to appear as '&#x27;' (plain-text banner)."""
    from types import SimpleNamespace

    from dpstudio.app.widgets.results_panel import ResultsPanel

    panel = ResultsPanel(window.state)
    qtbot.addWidget(panel)
    res = SimpleNamespace(
        params={"k": 3},
        method="ir-dp",
        method_name="M",
        guarantee="g",
        data=pd.DataFrame({"x": [1.0, 2.0]}),
        protected_attributes=["x"],
        warnings=["each attribute's ε"],
        roles={"x": "eps-quasi"},
        original=None,
    )
    window.state.set_result(res, {"sse_raw": float("nan")}, {})
    assert "&#x27;" not in panel.warn.label.text()
    assert panel.warn.label.textFormat() != Qt.TextFormat.PlainText
    assert panel.measures.item(0, 1).text() == "n/a"


@settings(max_examples=15, deadline=None)
@given(hs.lists(hs.integers(18, 90), min_size=4, max_size=40), hs.integers(2, 20))
def test_generalised_numeric_attribute_is_measured_not_fatal(ages, width):
    """k-eps/OLA turns a numeric k-quasi (age) into interval text: Protect must still report
    its measures (as categories), never fail on the evaluation."""
    from types import SimpleNamespace

    from dpstudio.app import compute

    orig = pd.DataFrame({"age": ages})
    lo = (np.asarray(ages) // width) * width
    gen = pd.DataFrame({"age": [f"{a}-{a + width - 1}" for a in lo]})
    res = SimpleNamespace(
        data=gen,
        protected_attributes=["age"],
        roles={"age": "k-quasi"},
        params={"k": 2},
        aligned_original=lambda: orig,
        method="k-eps",
    )
    import dpstudio.app.compute as c

    orig_protect = c.engine.protect
    try:
        c.engine.protect = lambda *a, **k: res
        r, ev = compute.protect_and_evaluate(orig, "k-eps", {"age": "k-quasi"}, {}, {}, 0, {})
    finally:
        c.engine.protect = orig_protect
    assert r is res
    assert 0.0 <= ev["sse_raw"] <= len(ages)
    assert any("measured as categories" in w for w in ev["warnings"])


def test_keps_sweep_with_numeric_k_quasi_runs_through():
    """k-eps generalises a numeric k-quasi (age) to intervals at larger k; the sweep used to
    stop there ('must be numeric'). Every point now arrives, SSE grows from 0."""
    from dpstudio.app import compute

    rng = np.random.default_rng(7)
    n = 300
    df = pd.DataFrame(
        {"age": rng.integers(17, 90, n), "sex": rng.choice(["F", "M"], n), "y": rng.normal(size=n)}
    )
    roles = {"age": "k-quasi", "y": "confidential"}
    pts = list(
        compute.sweep_points(
            df,
            "k-eps",
            roles,
            {"age": (0, 150)},
            ks=[2, 10, 40],
            epsilons=[1.0],
            repeats=1,
            seed=3,
            hierarchies=None,
            params={},
            check_cancel=lambda: None,
            progress=lambda f: None,
        )
    )
    assert len(pts) == 6
    assert all("sse_raw" in p.values and "rl" in p.values for p in pts)
    big = [p for p in pts if p.k == 40]
    assert big[0].values["sse_raw"][0] > 0
    res, ev = compute.protect_and_evaluate(
        df, "k-eps", roles, {"age": (0, 150)}, {}, 3, {"k": 40, "epsilon": 1.0}
    )
    assert ev["sse_raw"] == pytest.approx(big[-1].values["sse_raw"][0])
    assert ev["k_min_class_size"] >= 40


def _open_census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()


def test_tclose_defaults_run_and_sweep_skips_infeasible_cells(qtbot, window):
    """t-close-dp: k defaults to 'auto' (was 1 < b: Protect failed); a sweep over a grid with
    infeasible (k, ε) cells completes, lists them, and plots the rest."""
    win = window
    _open_census(qtbot, win)
    win.state.set_roles(
        {"FICA": "k-quasi", "FEDTAX": "k-quasi", "INTVAL": "confidential", "AFNLWGT": "identifier"}
    )
    mp = win.method_panel
    assert mp.select_method("t-close-dp")
    assert mp.values()["k"] is None
    assert mp.fields["k"].editor.text() == "auto"
    with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
        assert win.controller.run_protect()
    assert win.state.result is not None and not win.errors
    ep = win.explore_panel
    ep.ks.setText("2, 10")
    ep.eps.setText("1, 10")
    ep.repeats.setValue(1)
    ep.hover_label.setText("Chosen: k = 75 from an older sweep")
    assert win.controller.run_sweep()
    assert "older sweep" not in ep.hover_label.text()  # stale choice cleared
    qtbot.waitUntil(lambda: not win.controller.sweep_runner.busy, timeout=60000)
    qtbot.wait(50)
    assert "failed" not in ep.status.text(), ep.status.text()
    assert {(p.k, p.epsilon) for p in ep.points} >= {(2, None), (10, None), (10, 1.0)}
    assert all(p.values for p in ep.points)
    skipped = {(p.k, p.epsilon) for p in ep.skipped}
    assert {(2, 1.0), (2, 10.0), (10, 10.0)} <= skipped
    assert ep.banner.isVisible() or not ep.isVisible()
    assert "left out" in ep.banner.text()
    # a project keeps 'auto'
    mp.set_values({"k": None})
    assert mp.values()["k"] is None


@settings(max_examples=20, deadline=None)
@given(hs.lists(hs.one_of(hs.integers(-1000, 1000), hs.none()), min_size=1, max_size=30))
def test_set_type_round_trips_without_losing_values(vals):
    """Typing a column categorical leaves its values as read; a text column typed numeric and
    back gives exactly the text read (no value, no spelling lost); missing stay missing.
    """
    from dpstudio.app.state import AppState

    st = AppState()
    df = pd.DataFrame({"code": pd.array(vals, dtype="Float64").astype(float), "y": 1.0})
    txt = pd.Series([None if v is None else f"{v:03d}" for v in vals], dtype=object)
    df["t"] = txt
    st.set_data(df, None)
    st.set_type("code", "categorical")
    assert st.df["code"] is df["code"] or st.df["code"].equals(df["code"])  # codes stay codes
    st.set_type("t", "numeric")
    assert pd.api.types.is_numeric_dtype(st.df["t"])
    assert st.df["t"].isna().tolist() == txt.isna().tolist()
    np.testing.assert_array_equal(
        st.df["t"].to_numpy(dtype=float, na_value=np.nan), df["code"].to_numpy(dtype=float)
    )
    st.set_type("t", "categorical")
    assert st.df["t"].tolist() == txt.tolist()  # '007' again, not '7'
    assert st.types == {"code": "categorical", "t": "categorical"}
    st.set_type("t", "text")  # older projects said "text"
    assert st.types["t"] == "categorical"


def test_type_cell_refuses_text_that_is_not_numbers(qtbot, window):
    from dpstudio.app.models.roles_model import C_TYPE

    win = window
    win.state.set_data(pd.DataFrame({"a": ["1", "2", "x"], "b": ["3", "4", "5"]}), None)
    rp = win.roles_panel
    m = rp.model
    assert m.data(m.index(0, C_TYPE)).startswith("categorical (suggested)")
    assert rp.edit_cell("b", C_TYPE, "numeric")
    assert pd.api.types.is_numeric_dtype(win.state.df["b"])
    assert win.state.df["b"].tolist() == [3, 4, 5]
    assert win.data_panel.model.rowCount() == 3
    assert not rp.edit_cell("a", C_TYPE, "numeric")
    assert win.errors and "row(s) 3" in win.errors[-1][0]
    assert m.data(m.index(0, C_TYPE), Qt.ItemDataRole.EditRole) == "categorical"  # shown back as it is
    assert win.state.df["a"].tolist() == ["1", "2", "x"]  # nothing lost
    assert "a" not in win.state.types


def test_project_keeps_types(qtbot, window, tmp_path):
    win = window
    _open_census(qtbot, win)
    win.state.set_type("AGI", "categorical")
    win.state.set_roles({"AGI": "eps-quasi"})
    pp = tmp_path / "t.dpsproj"
    assert win.controller.save_project_to(str(pp))
    from dpstudio.app.main_window import MainWindow

    win2 = MainWindow(offer_recovery=False)
    qtbot.addWidget(win2)
    try:
        with qtbot.waitSignal(win2.sig_loaded, timeout=20000):
            assert win2.controller.open_project(str(pp))
        qtbot.waitUntil(lambda: win2.state.types.get("AGI") == "categorical", timeout=5000)
        assert pd.api.types.is_numeric_dtype(win2.state.df["AGI"])  # the values as read
    finally:
        win2.shutdown()
        win2.state.mark_dirty(False)
        win2.state.project_path = None


@settings(max_examples=50, deadline=None)
@given(
    hs.lists(
        hs.tuples(
            hs.sampled_from(["age", "sex", "race", None]),
            hs.sampled_from([" is not numeric: SSE counts 1.", ": 2 missing.", "x warning"]),
        ),
        max_size=12,
    )
)
def test_compact_warnings_keeps_every_message(items):
    from dpstudio.app.widgets.results_panel import compact_warnings

    warns = [(f"Attribute '{a}'{t}" if a else t) for a, t in items]
    out = compact_warnings(warns)
    assert len(out) <= len(set(warns))
    for a, t in items:  # every attribute and every text is still said
        assert any(t in o and (a is None or f"'{a}'" in o) for o in out), (a, t, out)


@settings(max_examples=30, deadline=None)
@given(
    hs.lists(hs.sampled_from(["a1", "a2", "b1", "b2", "A", "B", "*", "zz", "39"]), min_size=1, max_size=20),
    hs.lists(hs.sampled_from(["a1", "a2", "b1", "b2", "A", "B", "*", "zz", "39"]), min_size=1, max_size=20),
)
def test_hierarchy_distance_is_a_safe_semantic_distance(xs, ys):
    """Measures use the loaded hierarchy's δ (docs/measures.md); unknown labels never raise."""
    from dpstudio.app.compute import HierarchyDistance
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy

    h = Hierarchy.from_rows([["a1", "A", "*"], ["a2", "A", "*"], ["b1", "B", "*"], ["b2", "B", "*"]])
    d = HierarchyDistance(h, "c")
    n = min(len(xs), len(ys))
    a, b = np.array(xs[:n], dtype=object), np.array(ys[:n], dtype=object)
    out = d(a, b)
    assert out.shape == (n,)
    np.testing.assert_allclose(out, d(b, a))
    assert np.all(out[a == b] == 0)
    assert np.all((out >= 0) & (out <= d.top))
    unknown = np.array([x not in ("a1", "a2", "b1", "b2", "A", "B", "*") for x in a[:n]])
    assert np.all(out[unknown & (a != b)] == d.top)
    same_group = np.array([x[0] == y[0] and len(x) == 2 and len(y) == 2 and x != y for x, y in zip(a, b)])
    diff_group = np.array(
        [x[0] != y[0] and len(x) == 2 and len(y) == 2 and x[0] in "ab" and y[0] in "ab" for x, y in zip(a, b)]
    )
    if same_group.any() and diff_group.any():
        assert out[same_group].max() < out[diff_group].min()


def test_hierarchy_dialog_starts_at_the_adult_hierarchy(tmp_path):
    from dpstudio.app.resources import adult_sample_path
    from dpstudio.app.widgets.roles_panel import suggest_hierarchy_path

    p = suggest_hierarchy_path(str(adult_sample_path()), "occupation")
    assert p.endswith("adult_hierarchy_occupation.csv")
    # 'race' must not pick another column's file, e.g. one ending in 'salary-class'
    assert suggest_hierarchy_path(str(adult_sample_path()), "race").endswith("_race.csv")
    (tmp_path / "d.csv").write_text("a\n1\n")
    assert suggest_hierarchy_path(str(tmp_path / "d.csv"), "zz") == str(tmp_path)
    assert suggest_hierarchy_path(None, "a") == ""


@given(hs.text(min_size=0, max_size=40), hs.integers(1, 60))
def test_short_label_fits(v, n):
    from dpstudio.app.widgets.roles_panel import short_label

    t = short_label(v, n)
    assert len(t) <= max(3, 84 // n)
    assert t == v or t.endswith("…") and v.startswith(t[:-1])


def test_report_leaves_out_curves_of_other_settings(qtbot, window, tmp_path):
    """Curves swept under other roles or another method must not appear in the release's
    report (they would describe a different release)."""
    win = window
    _open_census(qtbot, win)
    win.state.set_roles({"FICA": "eps-quasi", "FEDTAX": "eps-quasi", "AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    win.method_panel.select_method("ir-dp")
    ep = win.explore_panel
    ep.ks.setText("2, 5")
    ep.eps.setText("1")
    ep.repeats.setValue(1)
    assert win.controller.run_sweep()
    qtbot.waitUntil(lambda: not win.controller.sweep_runner.busy, timeout=60000)

    def report(name):
        with qtbot.waitSignal(win.state.sig_result_changed, timeout=30000):
            assert win.controller.run_protect()
        qtbot.waitUntil(lambda: not win.controller.run_runner.busy, timeout=30000)
        out = tmp_path / f"{name}.csv"
        assert win.controller.export(str(out), fmt="csv", assessment=True)
        qtbot.waitUntil(lambda: not win.controller.export_runner.busy, timeout=30000)
        return (tmp_path / f"{name}.assessment.private.html").read_text(encoding="utf-8")

    assert "<img" in report("same")  # same settings: the curves are in
    # the explore panel says when its curves no longer match the settings
    win.state.set_role("FEDTAX", "other")
    assert ep.status.text().startswith("⚠")
    win.state.set_role("FEDTAX", "eps-quasi")
    assert not ep.status.text().startswith("⚠")
    win.method_panel.set_values({"budget": "per-attribute"})
    assert "<img" not in report("other_params")
    win.method_panel.set_values({"budget": "equal"})
    win.state.set_role("FEDTAX", "other")
    assert "<img" not in report("other_roles")


def test_empty_file_does_not_replace_the_data(qtbot, window, tmp_path):
    win = window
    _open_census(qtbot, win)
    win.state.set_roles({"FICA": "eps-quasi"})
    p = tmp_path / "empty.csv"
    p.write_text("hello\n", encoding="utf-8")
    assert win.controller.open_file(str(p), confirm=False)
    qtbot.waitUntil(lambda: not win.controller.load_runner.busy, timeout=10000)
    qtbot.waitUntil(lambda: bool(win.errors), timeout=5000)
    assert "no records" in win.errors[-1][0]
    assert len(win.state.df) == 1080 and win.state.roles["FICA"] == "eps-quasi"
