"""Issue 21, part 4, in the app: a CSV number of more than 4,300 digits opens (it was a
traceback in the error box), a project file that is a FIFO or /dev/zero is refused in one
line (it hung the window), and the query desk's "Laplace, same ε" curve uses the statistic's
sensitivity (count Δ = 1, mean ≈ width / n) instead of the range width for every statistic,
which made knowledge refinement look 100× better than Laplace for counts and means.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio.app import project  # noqa: E402
from dpstudio.engine.errors import InputError  # noqa: E402


def _open(qtbot, win, path):
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        win.controller.open_file(str(path), confirm=False)


def test_huge_number_csv_opens_without_a_traceback(qtbot, window, tmp_path):
    p = tmp_path / "huge.csv"
    p.write_text("x,y\n1,2\n2," + "9" * 5000 + "\n3,4\n")
    _open(qtbot, window, p)
    df = window.state.df
    assert df is not None and len(df) == 3 and np.isposinf(df["y"].iloc[1])
    assert not [m for m, d in window.errors if "Traceback" in (d or "") or "Traceback" in m]
    assert not window.errors, window.errors


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_project_file_that_is_not_a_file_is_one_line(special, tmp_path):
    path = tmp_path / "p.dpsproj"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = special

    def on_alarm(signum, frame):
        raise AssertionError("project.load blocked")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 20)
    try:
        with pytest.raises(InputError) as e:
            project.load(path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert "\n" not in str(e.value) and "not a regular file" in str(e.value)


def _census(qtbot, win):
    with qtbot.waitSignal(win.sig_loaded, timeout=20000):
        win.controller.open_sample()


def _answer(qtbot, p):
    assert p.answer(), p.error_label.text()
    qtbot.waitUntil(lambda: not p.runner.busy, timeout=30000)


def _laplace_scale(p) -> float:
    text = p.stats_label.text()
    assert "Laplace (" in text, text
    return float(text.split("b = Δ/ε = ")[1].split(":")[0])


def test_laplace_comparison_uses_the_statistics_sensitivity(qtbot, window):
    """count: Δ = 1 (was the range width, 1,080 here: a Laplace curve 1,080× too wide);
    mean: Δ ≈ width / n of the matched records (was the width)."""
    _census(qtbot, window)
    p = window.query_panel
    window.tabs.setCurrentIndex(window.tab_query)
    p.agg_combo.setCurrentText("count")
    p.mechanism_combo.setCurrentText("refinement")  # issue 26: auto answers a count with noise
    p.filter_edit.setText("STATETAX > 1000")
    p.lo_edit.setText("0")
    p.hi_edit.setText("1080")
    p.step_edit.setText("1")
    p.prior_combo.setCurrentText("uniform")
    p.eps_edit.setText("0.5")
    if not p.budget_edit.isReadOnly():
        p.budget_edit.setText("10")
    _answer(qtbot, p)
    assert "count: Δ = 1" in p.stats_label.text()
    assert _laplace_scale(p) == pytest.approx(1 / 0.5)

    df = window.state.df
    n = int((df.STATETAX > 1000).sum())
    p.agg_combo.setCurrentText("mean")
    p.col_combo.setCurrentText("FEDTAX")
    p.lo_edit.setText("0")
    p.hi_edit.setText("20000")
    p.step_edit.setText("10")
    _answer(qtbot, p)
    assert f"/{n:,}" in p.stats_label.text()
    assert _laplace_scale(p) == pytest.approx(20000 / n / 0.5, rel=1e-3)
    # a Δ typed by the office still wins
    p.delta_edit.setText("7")
    p._replot_view(0)
    assert _laplace_scale(p) == pytest.approx(7 / 0.5, rel=1e-3)
