"""Query desk panel driven as a user (issue 14, thesis §5.3): a group-by query with declared
groups, a prior drawn with the mouse on the plot, a multicomponent answer, the ledger updated
and an over-budget answer refused."""

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QEvent, QPointF, Qt  # noqa: E402
from PySide6.QtGui import QMouseEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

GROUPS = "4207,2295,3825"  # FICA values (declared by the user, not offered from the data)


def _census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()
    win.resize(1400, 900)
    win.show()
    win.tabs.setCurrentIndex(win.tab_query)
    qtbot.waitExposed(win)


def _range(p, lo, hi, step):
    p.lo_edit.setText(lo)
    p.hi_edit.setText(hi)
    p.step_edit.setText(step)


def _answer(qtbot, p):
    assert p.answer(), p.error_label.text()
    qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)


def _drag(p, points):
    """Press at the first point and move through the others with the left button held: real
    mouse events on the plot's viewport, at the pixels of the given plot coordinates."""
    vb = p.plot.getPlotItem().vb
    vp = p.plot.viewport()
    for i, (x, y) in enumerate(points):
        pos = QPointF(p.plot.mapFromScene(vb.mapViewToScene(QPointF(x, y))))
        kind = QEvent.Type.MouseButtonPress if i == 0 else QEvent.Type.MouseMove
        ev = QMouseEvent(
            kind,
            pos,
            vp.mapToGlobal(pos),
            Qt.MouseButton.LeftButton if i == 0 else Qt.MouseButton.NoButton,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(vp, ev)


def test_group_by_query_in_the_panel(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    p.agg_combo.setCurrentText("mean")
    p.col_combo.setCurrentText("FEDTAX")
    _range(p, "0", "20000", "100")
    p.by_combo.setCurrentText("FICA")
    assert p.groups_edit.text() == ""  # the groups are never filled from the data
    assert "Groups" in p.error_label.text() and not p.answer_btn.isEnabled()
    p.groups_edit.setText(GROUPS)
    assert p.query_text.text() == "mean(FEDTAX) by FICA"
    assert p.answer_btn.isEnabled(), p.error_label.text()
    _answer(qtbot, p)
    ans = p.last_answer
    assert ans.groups == [4207, 2295, 3825] and len(ans.response) == 3
    df = window.state.df
    assert ans.true_value[1] == pytest.approx(df.loc[df.FICA == 2295, "FEDTAX"].mean())
    assert "Proposition 4" in ans.guarantee and "4207: " in p.answer_text.toPlainText()
    led = p.ledger()
    assert led.entries[-1]["query"] == "mean(FEDTAX) by FICA" and p.ledger_table.rowCount() == 1
    # one plot per group, chosen in the Plot box
    assert p.view_combo.count() == 3 and p.view_combo.isEnabled()
    p.view_combo.setCurrentIndex(2)
    assert "group 3825" in p.plot.getPlotItem().getAxis("bottom").labelText
    # proportion by groups is refused (not disjoint)
    p.agg_combo.setCurrentText("proportion")
    assert "not disjoint" in p.error_label.text() or not p.answer()


def test_draw_the_prior_with_the_mouse(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    p.agg_combo.setCurrentText("mean")
    p.col_combo.setCurrentText("FEDTAX")
    _range(p, "0", "20000", "100")
    p.draw_check.setChecked(True)
    assert p.drawn == [0.5] * 20 and p.prior_combo.currentText() == "histogram"
    # press in bin 0 high, drag along the bottom through bins 5..9, end high in bin 19
    _drag(p, [(500, 0.9)] + [(x, 0.05) for x in (5500, 6500, 7500, 8500, 9500)] + [(19500, 1.0)])
    d = p.drawn
    assert d[0] == pytest.approx(0.9, abs=0.03) and d[19] == pytest.approx(1.0, abs=0.03)
    assert all(v == pytest.approx(0.05, abs=0.03) for v in d[5:10])
    assert d[2] == 0.5  # untouched bins keep their height
    # the drawn bins are the histogram prior's parameters, normalised by the engine
    prior = p.build_request()["prior"]
    probs = prior.probabilities()
    assert probs.sum() == pytest.approx(1.0)
    assert probs[5] / probs[65] == pytest.approx(d[0] / d[6], rel=1e-6)  # 500 in bin 0, 6500 in bin 6
    # untick and answer: the drawn prior against the refined distribution and Laplace
    p.draw_check.setChecked(False)
    p.eps_edit.setText("0.4")
    _answer(qtbot, p)
    assert "histogram(20 bins)" in p.last_answer.prior
    assert len(p.plot.getPlotItem().listDataItems()) == 3 and "Laplace" in p.stats_label.text()
    # drawing needs a declared numeric range
    p.lo_edit.setText("")
    p.draw_check.setChecked(True)
    assert not p.draw_check.isChecked() and "range" in p.error_label.text().lower()


def test_multicomponent_answer_ledger_and_over_budget(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    p.budget_edit.setText("1")
    p.agg_combo.setCurrentText("mean")
    p.col_combo.setCurrentText("FEDTAX")
    p.filter_edit.setText("STATETAX > 1000")
    _range(p, "0", "20000", "200")
    p.prior_combo.setCurrentText("normal")
    p.prior_edit.setText("6000:4000")
    assert p.add_component()
    assert not p.mode_combo.isEnabled()  # one component is not a vector yet
    p.col_combo.setCurrentText("STATETAX")
    _range(p, "0", "10000", "100")
    p.prior_combo.setCurrentText("uniform")
    assert p.add_component() and not p.add_component()  # the same component twice is refused
    assert p.comp_list.count() == 2 and p.mode_combo.isEnabled()
    assert "2 components" in p.answer_btn.text()
    p.eps_edit.setText("0.6")
    p.distance_combo.setCurrentText("sum")
    _answer(qtbot, p)
    ans = p.last_answer
    assert ans.mode == "joint" and len(ans.response) == 2 and "jointly" in ans.guarantee
    assert p.ledger().remaining == pytest.approx(0.4) and p.ledger_table.rowCount() == 1
    assert p.ledger_table.item(0, 3).text() == (
        "mean(FEDTAX) where STATETAX > 1000; mean(STATETAX) where STATETAX > 1000"
    )
    assert p.view_combo.count() == 2
    # over the remaining budget: refused before anything runs, the remaining budget named
    p.mode_combo.setCurrentText("split")
    assert not p.answer() and "only 0.4" in p.error_label.text()
    assert len(p.ledger().entries) == 1
    p.eps_edit.setText("0.4")
    _answer(qtbot, p)
    assert p.last_answer.epsilons == [0.2, 0.2] and p.ledger().remaining == 0
    p.remove_component()
    assert p.comp_list.count() == 1 and "Answer — spend" in p.answer_btn.text()
