"""Query desk panel (issue 14): answer on the Census sample, the ledger spends, over-budget is
refused with the remaining budget named, the ledger file is written at each answer (closing
without saving loses nothing) and shared with the command line under the same lock, the
filter is validated by the engine's parser, the range is never filled from the data."""

import json
import math
import os
import stat
from pathlib import Path

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


def _new_window(qtbot):
    from dpstudio.app.main_window import MainWindow

    win = MainWindow(offer_recovery=False)
    qtbot.addWidget(win)
    return win


def _close(win):
    win.shutdown()
    win.state.mark_dirty(False)
    win.state.project_path = None


def test_the_ledger_file_is_written_at_once_and_closing_without_saving_loses_nothing(qtbot, window):
    """Issue 21: the ledger used to live in the unsaved project: closing without saving erased
    the spending and the same budget could be spent again."""
    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.25", budget="1")
    _answer(qtbot, p)
    assert window.state.project_path is None and window.state.dirty  # never saved
    _close(window)

    win2 = _new_window(qtbot)
    try:
        _census(qtbot, win2)
        p2 = win2.query_panel
        qtbot.waitUntil(lambda: p2.ledger_table.rowCount() == 1, timeout=10000)
        assert p2.ledger() is not None and p2.ledger().remaining == pytest.approx(0.75)
        assert p2.budget_edit.isReadOnly() and p2.budget_edit.text() == "1"
        _fill(p2, eps="0.8")
        assert not p2.answer() and "only 0.75" in p2.error_label.text()
        path = p2.ledger_path()
        assert path == p.ledger_path() and path in p2.ledger_path_label.text()
        assert os.path.isfile(path) and stat.S_IMODE(os.stat(path).st_mode) == 0o600
        on_file = qd.load_ledger(path)
        assert [e["epsilon"] for e in on_file.entries] == [0.25] and on_file.total == 1
        _fill(p2, eps="0.75")
        _answer(qtbot, p2)
        assert qd.load_ledger(path).remaining == 0
    finally:
        _close(win2)


def test_the_app_and_the_command_line_share_the_ledger_file(qtbot, window, capsys):
    from dpstudio import cli

    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.25", budget="1")
    _answer(qtbot, p)
    path = p.ledger_path()
    rc = cli.main(["query", window.state.path, "count where FICA > 0", "--range", "count=0:2000",
                   "--epsilon", "0.5", "--ledger", path])  # fmt: skip
    assert rc == 0 and "remaining budget: 0.25 of 1" in capsys.readouterr().out
    p.refresh_ledger()
    assert p.ledger_table.rowCount() == 2 and "remaining 0.25" in p.budget_label.text()
    _fill(p, eps="0.3")
    assert not p.answer() and "only 0.25" in p.error_label.text()
    assert cli.main(["query", window.state.path, "count", "--range", "count=0:2000", "--epsilon", "0.5",
                     "--ledger", path, "--budget", "3"]) == 2  # fmt: skip
    assert "differs from the total budget 1" in capsys.readouterr().err


def test_the_app_answers_under_the_ledger_lock(qtbot, window):
    """The panel waits for a ledger held by another query (the CLI's lock), and a cancel while
    waiting spends nothing."""
    import threading

    _census(qtbot, window)
    p = window.query_panel
    _fill(p, eps="0.25", budget="1")
    _answer(qtbot, p)
    path = p.ledger_path()
    held, release = threading.Event(), threading.Event()

    def hold():
        with qd.locked_ledger(path):
            held.set()
            release.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(30)
        _fill(p, eps="0.25")
        assert p.answer()
        qtbot.wait(600)
        assert p.runner.busy and len(qd.load_ledger(path).entries) == 1  # waiting, nothing drawn
        p.runner.cancel()
        qtbot.waitUntil(lambda: "nothing was spent" in p.error_label.text(), timeout=10000)
        assert p.answer()
        qtbot.wait(300)
        release.set()
        qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)
    finally:
        release.set()
        t.join(30)
    assert [e["epsilon"] for e in qd.load_ledger(path).entries] == [0.25, 0.25]
    assert p.ledger_table.rowCount() == 2


def test_another_ledger_file_is_remembered_and_saved_with_the_project(qtbot, window, tmp_path):
    _census(qtbot, window)
    p = window.query_panel
    shared = tmp_path / "shared" / "census-ledger.json"
    shared.parent.mkdir()
    assert p.choose_ledger(str(shared))
    _fill(p, eps="0.5", budget="2")
    _answer(qtbot, p)
    assert p.ledger_path() == str(shared) and len(qd.load_ledger(shared).entries) == 1
    proj = tmp_path / "census.dpsproj"
    assert window.controller.save_project_to(str(proj))
    data = json.loads(proj.read_text())
    assert data["query_ledger_file"] == str(shared) and "query_ledger" not in data  # no spending inside
    assert qd.load_ledger(proj).remaining == 1.5  # the CLI's --ledger PROJECT finds it
    _close(window)
    win2 = _new_window(qtbot)  # the choice is remembered for the data set, project or not
    try:
        _census(qtbot, win2)
        qtbot.waitUntil(lambda: win2.query_panel.ledger_table.rowCount() == 1, timeout=10000)
        assert win2.query_panel.ledger_path() == str(shared)
    finally:
        _close(win2)
    # a file that is not this data set's ledger is refused when chosen
    other = tmp_path / "other.json"
    qd.save_ledger(other, qd.BudgetLedger(1, dataset="other.csv", digest="ab" * 32))
    win3 = _new_window(qtbot)
    try:
        _census(qtbot, win3)
        p3 = win3.query_panel
        assert not p3.choose_ledger(str(other)) and "another data set" in p3.error_label.text()
        assert not p3.choose_ledger(str(tmp_path)) and "folder" in p3.error_label.text()
        assert p3.ledger_path() == str(shared)
    finally:
        _close(win3)


def test_an_older_project_ledger_is_moved_to_its_file(qtbot, window, tmp_path, capsys):
    from dpstudio.engine.io import file_sha256

    _census(qtbot, window)
    sample = window.state.path
    led = qd.BudgetLedger(2, dataset="census.csv", digest=file_sha256(sample))
    led.spend(0.5, query="count")
    proj = tmp_path / "old.dpsproj"
    assert window.controller.save_project_to(str(proj))
    data = json.loads(proj.read_text())
    data["query_ledger"] = led.to_dict()  # how dpstudio ≤ 0.x kept it
    proj.write_text(json.dumps(data))
    _close(window)
    win2 = _new_window(qtbot)
    try:
        with qtbot.waitSignal(win2.sig_loaded, timeout=20000):
            assert win2.controller.open_project(str(proj))
        p2 = win2.query_panel
        qtbot.waitUntil(lambda: p2.ledger_table.rowCount() == 1, timeout=10000)
        path = p2.ledger_path()
        assert qd.load_ledger(path).to_dict()["entries"] == led.to_dict()["entries"]
        assert win2.state.legacy_query_ledger() is None and win2.state.dirty
        assert win2.controller.save_project_to(str(proj))
        assert "query_ledger" not in json.loads(proj.read_text())  # the spending lives in its file
    finally:
        _close(win2)


def test_a_damaged_or_foreign_ledger_file_refuses_queries(qtbot, window, tmp_path):
    _census(qtbot, window)
    p = window.query_panel
    p.refresh_ledger()
    path = p.ledger_path()
    Path(path).write_text(json.dumps({**qd.BudgetLedger(1).to_dict(), "total": -5}))
    p.refresh_ledger()
    assert p.banner.isVisibleTo(p) and "total budget" in p.banner.text()
    _fill(p)
    assert not p.answer() and "-5" in p.error_label.text()
    qd.save_ledger(tmp_path / "x.json", qd.BudgetLedger(1, dataset="other.csv", digest="ab" * 32))
    os.replace(tmp_path / "x.json", path)
    p.refresh_ledger()
    assert not p.answer() and "other.csv" in p.error_label.text()
    assert p.choose_ledger(str(tmp_path / "census-new.json"))  # a new file: a new budget
    _answer(qtbot, p)
    assert p.ledger().dataset == "census.csv" and len(p.ledger().entries) == 1


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
    p.mechanism_combo.setCurrentText("refinement")  # issue 26: auto picks the exponential mechanism
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
