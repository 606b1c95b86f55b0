"""Query desk 2 in the panel (issue 26): choose the mechanism, see the accuracy of every
mechanism before answering, the interval with the answer, the history per requester and the
researcher's public answer file."""

import json

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")


def _census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()


def _count(p, requester, eps="0.2"):
    p.agg_combo.setCurrentText("count")
    p.filter_edit.setText("FICA > 3000")
    p.lo_edit.setText("0")
    p.hi_edit.setText("1080")
    p.step_edit.setText("1")
    p.prior_combo.setCurrentText("uniform")
    p.eps_edit.setText(eps)
    p.requester_edit.setText(requester)
    if not p.budget_edit.isReadOnly():
        p.budget_edit.setText("2")


def _answer(qtbot, p):
    assert p.answer(), p.error_label.text()
    qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)


def test_auto_answers_a_count_with_noise_and_prints_the_interval(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    _count(p, "Dr. A")
    assert p.mechanism_combo.currentText() == "auto"
    assert p.preview()  # accuracy before spending: nothing drawn, nothing spent
    qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)
    acc = p.accuracy_label.text()
    assert "laplace" in acc and "refinement" in acc and "auto: laplace" in acc
    assert p.ledger() is None
    _answer(qtbot, p)
    ans = p.last_answer
    assert ans.mechanism == "laplace" and ans.interval[0] <= ans.response <= ans.interval[1]
    text = p.answer_text.toPlainText()
    assert "Mechanism: laplace" in text and "Interval 95 %" in text
    assert p.ledger().entries[-1]["mechanism"] == "laplace"


def test_history_per_requester_and_the_answer_file(qtbot, window, tmp_path):
    _census(qtbot, window)
    p = window.query_panel
    _count(p, "Dr. A")
    _answer(qtbot, p)
    _count(p, "Dr. B", eps="0.3")
    _answer(qtbot, p)
    assert "Dr. A: 0.2" in p.requester_summary.text() and "Dr. B: 0.3" in p.requester_summary.text()
    p.requester_filter.setCurrentText("Dr. B")
    assert p.ledger_table.rowCount() == 1 and p.answers_btn.isEnabled()
    out = p.export_answers(str(tmp_path / "b.json"), "Dr. B")
    doc = json.loads(open(out, encoding="utf-8").read())
    assert doc["requester"] == "Dr. B" and len(doc["answers"]) == 1
    assert "Dr. A" not in json.dumps(doc)
    # a bad target is refused in one line, nothing written
    assert p.export_answers(str(tmp_path), "Dr. B") is None and "Answer file" in p.error_label.text()


def test_a_mechanism_that_does_not_answer_the_aggregate_is_refused(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    _count(p, "")
    p.mechanism_combo.setCurrentText("exponential")
    assert "Mechanism" in p.error_label.text() and not p.answer_btn.isEnabled()
    p.mechanism_combo.setCurrentText("gaussian")
    assert "δ" in p.error_label.text()
    p.gdelta_edit.setText("1e-6")
    assert p.answer_btn.isEnabled(), p.error_label.text()


def test_the_office_sets_requester_budgets_in_the_panel(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    assert not p.set_requester_budget("no equals sign") and "NAME=EPSILON" in p.error_label.text()
    assert p.set_requester_budget("Dr. A=0.3")
    led = p.ledger()
    assert led is not None and float(led.requesters["Dr. A"]) == 0.3
    _count(p, "Dr. A", eps="0.4")  # beyond Dr. A's budget: refused, nothing spent
    assert not p.answer() or (qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000) or True)
    assert len(p.ledger().entries) == 0 and "requester 'Dr. A' has only 0.3" in p.error_label.text()
    _count(p, "Dr. Z")  # no budget in a ledger with requester budgets: refused
    assert not p.answer() and "has none" in p.error_label.text()


def test_accuracy_and_interval_are_shown_before_answering_off_the_ui_thread(qtbot, window, monkeypatch):
    """Issue 26.6: editing the form recomputes every mechanism's expected error and the width of
    the 95 % interval its answer will print, in a worker thread; nothing is drawn or spent."""
    import threading

    from dpstudio.app.widgets import query_panel as qp

    threads = []
    real = qp.qd.assess

    def spy(*a, **k):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*a, **k)

    monkeypatch.setattr(qp.qd, "assess", spy)
    _census(qtbot, window)
    p = window.query_panel
    _count(p, "Dr. A", eps="0.5")
    qtbot.waitUntil(lambda: "95 % interval width" in p.accuracy_label.text(), timeout=30000)
    txt = p.accuracy_label.text()
    assert "laplace: expected error" in txt and "refinement: expected error" in txt
    assert "<b>laplace: expected error" in txt and "auto: laplace" in txt  # the choice is marked
    assert threads and not any(threads)  # never on the UI thread
    assert p.ledger() is None and p.last_answer is None  # nothing spent, nothing drawn
    p.mechanism_combo.setCurrentText("refinement")
    qtbot.waitUntil(lambda: "refinement: chosen by the office" in p.accuracy_label.text(), timeout=30000)
    assert "laplace" not in p.accuracy_label.text()
    p.mechanism_combo.setCurrentText("auto")
    p.agg_combo.setCurrentText("median")  # a quantile: the exponential mechanism has no value interval
    p.col_combo.setCurrentText("FICA")
    p.filter_edit.setText("")
    p.lo_edit.setText("0")
    p.hi_edit.setText("8000")
    p.step_edit.setText("10")
    qtbot.waitUntil(lambda: "exponential: expected error" in p.accuracy_label.text(), timeout=30000)
    assert "no value interval" in p.accuracy_label.text()
    p.eps_edit.setText("not a number")  # an invalid form clears the figures
    assert p.accuracy_label.text() == ""


def test_the_interval_printed_has_the_width_stated_before(qtbot, window):
    _census(qtbot, window)
    p = window.query_panel
    _count(p, "Dr. A", eps="0.5")
    qtbot.waitUntil(lambda: "95 % interval width" in p.accuracy_label.text(), timeout=30000)
    import re

    stated = float(re.search(r"laplace: expected error [\d.]+; 95 % interval width ([\d.]+)",
                             p.accuracy_label.text()).group(1))  # fmt: skip
    _answer(qtbot, p)
    lo, hi = p.last_answer.interval
    assert hi - lo == pytest.approx(stated, rel=1e-3)
    assert p.ledger().entries[-1]["interval_95"] == [lo, hi]  # on file the moment it was drawn
