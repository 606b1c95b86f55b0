"""Query desk panel (issue 14): answer on the Census sample, the ledger spends, over-budget is
refused with the remaining budget named, the ledger survives a project round trip, the
filter is validated by the engine's parser, the range is never filled from the data."""

import json
import math
import os
import stat

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio.app.widgets.query_panel import laplace_density, laplace_in_range
from dpstudio.engine import query as qd


def _census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()


def _fill(p, *, eps="0.3", budget="1", filt="STATETAX > 1000"):
    p.agg_combo.setCurrentText("mean")
    p.col_combo.setCurrentText("FEDTAX")
    p.filter_edit.setText(filt)
    p.lo_edit.setText("0")
    p.hi_edit.setText("20000")
    p.step_edit.setText("10")
    p.prior_combo.setCurrentText("normal")
    p.prior_edit.setText("6000:4000")
    p.eps_edit.setText(eps)
    if not p.budget_edit.isReadOnly():
        p.budget_edit.setText(budget)


def _answer(qtbot, p):
    assert p.answer(), p.error_label.text()
    qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)


def test_range_is_never_filled_from_the_data(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    for agg in ("mean", "sum", "median", "count", "value"):
        p.agg_combo.setCurrentText(agg)
        assert p.lo_edit.text() == "" and p.hi_edit.text() == ""
        assert "Range" in p.error_label.text()
        assert not p.answer_btn.isEnabled()
    assert "never filled from the data" in p.findChild(type(p.query_text), "range_note").text()


def test_answer_on_census_spends_the_ledger(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    window.tabs.setCurrentIndex(window.tab_query)
    _fill(p, eps="0.3")
    assert p.answer_btn.isEnabled(), p.error_label.text()
    _answer(qtbot, p)
    led = p.ledger()
    assert led is not None and len(led.entries) == 1
    assert led.spent == pytest.approx(0.3) and led.remaining == pytest.approx(0.7)
    assert led.digest and led.dataset == "census.csv"
    assert p.ledger_table.rowCount() == 1
    assert p.ledger_table.item(0, 3).text() == "mean(FEDTAX) where STATETAX > 1000"
    ans = p.last_answer
    # the response is a point of the declared grid and the public text carries it, not the truth
    assert 0 <= ans.response <= 20000 and ans.response % 10 == 0
    text = p.answer_text.toPlainText()
    assert f"Answer: {ans.response}" in text and "ε-differential privacy" in text
    df = window.state.df
    truth = df.loc[df.STATETAX > 1000, "FEDTAX"].mean()
    assert ans.true_value == pytest.approx(truth)
    assert "remaining budget of this data set: 0.7" in text
    # the office-only plot: prior, refined and Laplace curves, and the warning
    assert p.office_label.isVisibleTo(p) and "never send" in p.office_label.text()
    assert len(p.plot.getPlotItem().listDataItems()) == 3
    assert "Laplace" in p.stats_label.text()
    # a second answer spends again (sequential composition)
    _fill(p, eps="0.2")
    _answer(qtbot, p)
    assert [e["epsilon"] for e in p.ledger().entries] == [0.3, 0.2]
    assert p.ledger().remaining == pytest.approx(0.5)
    assert "remaining 0.5" in p.budget_label.text()


def test_over_budget_is_refused_with_the_remaining_budget(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.6", budget="1")
    _answer(qtbot, p)
    before = p.answer_text.toPlainText()
    _fill(p, eps="0.6")
    assert not p.answer()
    msg = p.error_label.text()
    assert "refused" in msg and "only 0.4" in msg
    assert len(p.ledger().entries) == 1 and p.ledger().remaining == pytest.approx(0.4)
    assert p.answer_text.toPlainText() == before
    # exactly the rest is allowed (exact decimal sums)
    _fill(p, eps="0.4")
    _answer(qtbot, p)
    assert p.ledger().remaining == 0


def test_ledger_survives_project_round_trip(qtbot, window, tmp_path, no_dialogs):
    from dpstudio.app.main_window import MainWindow

    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.25", budget="2")
    _answer(qtbot, p)
    proj = tmp_path / "census.dpsproj"
    assert window.controller.save_project_to(str(proj))
    assert stat.S_IMODE(os.stat(proj).st_mode) == 0o600
    # a saved project: the next answer is written into the project file at once
    _fill(p, eps="0.5")
    _answer(qtbot, p)
    data = json.loads(proj.read_text())
    assert [e["epsilon"] for e in data["query_ledger"]["entries"]] == [0.25, 0.5]
    assert data["query_ledger"]["total"] == 2
    assert qd.load_ledger(proj).remaining == pytest.approx(1.25)  # the CLI reads it too

    win2 = MainWindow(offer_recovery=False)
    qtbot.addWidget(win2)
    try:
        assert win2.query_panel.ledger() is None
        with qtbot.waitSignal(win2.sig_loaded, timeout=20000):
            assert win2.controller.open_project(str(proj))
        qtbot.waitUntil(lambda: win2.query_panel.ledger_table.rowCount() == 2, timeout=5000)
        p2 = win2.query_panel
        assert p2.ledger().remaining == pytest.approx(1.25)
        assert p2.budget_edit.isReadOnly() and p2.budget_edit.text() == "2"
        _fill(p2, eps="1.5")
        assert not p2.answer() and "only 1.25" in p2.error_label.text()
        # saving the project again keeps the ledger
        assert win2.controller.save_project_to(str(proj))
        assert len(json.loads(proj.read_text())["query_ledger"]["entries"]) == 2
    finally:
        win2.shutdown()
        win2.state.mark_dirty(False)
        win2.state.project_path = None
        window.state.project_path = None  # no "save?" question when qtbot closes it


def test_filter_validated_by_the_engine_parser(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    _fill(p, filt="STATETAX >")
    assert "expected" in p.filter_error.text() and p.filter_error.isVisibleTo(p)
    assert not p.answer_btn.isEnabled()
    p.filter_edit.setText("NOSUCH == 3")
    assert "NOSUCH" in p.filter_error.text() and not p.answer_btn.isEnabled()
    p.filter_edit.setText("STATETAX > 1000 and not FICA in (1, 2)")
    assert p.filter_error.text() == "" and p.answer_btn.isEnabled()


def test_ledger_of_other_data_is_not_used(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    window.state.set_query_ledger(qd.BudgetLedger(1, dataset="other.csv", digest="ab" * 32)
                                  .to_dict())
    _fill(p)
    assert not p.answer()
    assert "other.csv" in p.error_label.text()
    assert p.new_ledger_btn.isVisibleTo(p)
    p.new_ledger()
    assert window.state.query_ledger() is None
    _answer(qtbot, p)
    assert p.ledger().dataset == "census.csv"
    p.new_ledger()  # the loaded data's own ledger is never reset
    assert len(p.ledger().entries) == 1


def test_export_audit_trail_is_owner_only(qtbot, window, tmp_path):
    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.1")
    p.requester_edit.setText("Dr. R")
    _answer(qtbot, p)
    out = p.export_ledger(str(tmp_path / "audit.csv"))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    text = open(out).read()
    assert "Dr. R" in text and "mean(FEDTAX) where STATETAX > 1000" in text
    assert str(p.last_answer.true_value) not in text


def test_categorical_mode_query(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    p.agg_combo.setCurrentText("mode")
    p.col_combo.setCurrentText("FICA")
    p.cats_edit.setText("0,1,2")
    p.eps_edit.setText("0.1")
    assert p.answer_btn.isEnabled(), p.error_label.text()
    _answer(qtbot, p)
    assert p.last_answer.response in (0, 1, 2)
    assert "categorical" in p.stats_label.text()


def test_laplace_curve_is_analytic_table_5_5():
    # thesis §5.5.2: uniform on [0, 1], f(D) = 0.5, Laplace b = 1/ε: P(in [0,1]) = 1 − e^(−ε/2)
    for eps in (0.1, math.log(2), 1.0, 2.0):
        assert laplace_in_range(0.5, 1 / eps, 0, 1) == pytest.approx(1 - math.exp(-eps / 2))
    x = [-1.0, 0.0, 2.0]
    d = laplace_density(x, 0.0, 2.0)
    assert d[1] == pytest.approx(0.25) and d[0] == pytest.approx(0.25 * math.exp(-0.5))
