"""The window never stalls (issue 24 §5, issue 27 §4): after a Protect, showing the result
(Results, Release and Risk views) makes no pass over the records on the GUI thread -- the
aligned original, the changed cells, the frequency tables and the histograms' inputs are
computed in the worker, and the risk panel gathers the release's household ids in its own.

(The timing itself is measured by benchmarks/bench_app_workflow.py, not here.)
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from tests.app._household_setup import set_household_keps  # noqa: E402
from tests.app.test_new_user_file import _household  # noqa: E402

#: functions that read every record of a column or a table
FULL_TABLE = [
    ("dpstudio.app.widgets.release_view", "changed_mask"),
    ("dpstudio.app.widgets.release_view", "frequency_table"),
    ("dpstudio.app.widgets.risk_panel", "release_with_household_ids"),
    ("dpstudio.engine.codes", "take"),
    ("dpstudio.engine.codes", "take_rows"),
    ("dpstudio.engine.transformation", "_released_summary"),
]


@pytest.fixture
def calls(monkeypatch):
    """{function name: [True for a call on the GUI thread, False elsewhere]}."""
    import importlib

    out: dict[str, list[bool]] = {}
    main = threading.main_thread()
    for mod_name, name in FULL_TABLE:
        mod = importlib.import_module(mod_name)
        real = getattr(mod, name)

        def spy(*a, _real=real, _name=name, **k):
            out.setdefault(_name, []).append(threading.current_thread() is main)
            return _real(*a, **k)

        monkeypatch.setattr(mod, name, spy)
    return out


def test_showing_a_protected_result_reads_no_whole_column_on_the_gui_thread(qtbot, window, calls):
    win = window
    st = win.state
    df = _household()
    st.set_data(df, None)
    set_household_keps(win)
    qtbot.waitUntil(lambda: not win.controller.busy and not win.risk_panel.pending(), timeout=60000)
    calls.clear()
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    # every view shown once, as a user clicks through them
    for w in (win.results_panel, win.release_view, win.risk_panel):
        win.tabs.setCurrentIndex(win.tabs.indexOf(w)) if win.tabs.indexOf(w) >= 0 else w.show()
        qtbot.wait(50)
    win.release_view.tabs.setCurrentIndex(1)  # the category frequencies
    qtbot.waitUntil(lambda: not win.controller.busy and not win.risk_panel.pending(), timeout=60000)
    qtbot.wait(100)
    assert st.result is not None and win.risk_panel.report("release") is not None
    assert win.release_view.frequency_rows()  # the views did show the result
    on_gui = {name: c.count(True) for name, c in calls.items() if any(c)}
    assert not on_gui, f"whole-table work on the GUI thread: {on_gui}"
    # and the work was done (in workers)
    for name in ("changed_mask", "frequency_table", "release_with_household_ids", "_released_summary"):
        assert calls.get(name), name


def test_a_chained_release_made_current_reads_no_whole_column_on_the_gui_thread(qtbot, window, calls):
    """Issue 24 §5: "Use as the release" of the step list primes the Results and Release
    views in its worker, as Protect does; showing that release then makes no pass over the
    records on the GUI thread.
    """
    win = window
    st = win.state
    st.set_data(_household(), None)
    set_household_keps(win)
    p = win.step_panel
    assert p.add_step("local-suppression", {"k": 3})
    assert p.add_step("laplace", {"epsilon": 1.0})
    with qtbot.waitSignal(p.sig_chain_changed, timeout=120000):
        assert p.run_chain()
    assert p.wait(60)
    qtbot.waitUntil(lambda: not win.controller.busy and not win.risk_panel.pending(), timeout=60000)
    calls.clear()
    with qtbot.waitSignal(p.sig_release_set, timeout=60000):
        assert p.use_as_release()
    assert st.result is not None and st.result.method == "chain"
    for w in (win.results_panel, win.release_view, win.risk_panel):
        win.tabs.setCurrentIndex(win.tabs.indexOf(w))
        qtbot.wait(50)
    win.release_view.tabs.setCurrentIndex(1)  # the category frequencies
    qtbot.waitUntil(lambda: not win.risk_panel.pending(), timeout=60000)
    qtbot.wait(100)
    assert win.release_view.frequency_rows()  # the views did show the release
    on_gui = {name: c.count(True) for name, c in calls.items() if any(c)}
    assert not on_gui, f"whole-table work on the GUI thread: {on_gui}"
    for name in ("changed_mask", "frequency_table"):  # done, in the worker
        assert calls.get(name), name


def test_a_protects_candidate_row_is_drawn_in_a_later_turn_than_the_switch(qtbot, window):
    """Issue 24 §5: the Candidates table and plane point of a new run are drawn in a turn of
    their own, not in the switch to the Results tab (its first paint's turn); the run is
    recorded at once and drawn and selected soon after.
    """
    win = window
    win.state.set_data(_household().iloc[:300].reset_index(drop=True), None)
    win.roles_panel.set_roles({"age": "k-quasi", "income": "k-quasi"})
    win.method_panel.select_method("mdav")
    hp = win.history_panel
    seen = []
    win.controller.sig_protected.connect(
        lambda: seen.append((len(hp.candidates), hp.table.rowCount(), win.tabs.currentWidget()))
    )
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    assert seen == [(1, 0, win.results_panel)]  # recorded and switched; not drawn in this turn
    qtbot.waitUntil(lambda: hp.table.rowCount() == 1, timeout=5000)
    assert hp.selected() is not None and hp.selected().number == 1


def test_after_a_protect_each_part_of_the_results_runs_in_a_turn_of_its_own(qtbot, window, monkeypatch):
    """Issue 24 §5: the switch to the Results tab is made with the header's texts not yet
    laid out (their layout was most of the tab's first show); the texts, the header's height,
    the histogram, the release's tables and the candidates' row follow one per turn of the
    event loop (a 1 ms ticker turns between every two of them).
    """
    from PySide6.QtCore import QTimer

    from dpstudio.app import turns

    win = window
    rp = win.results_panel
    win.state.set_data(_household().iloc[:300].reset_index(drop=True), None)
    win.roles_panel.set_roles({"age": "k-quasi", "income": "k-quasi"})
    win.method_panel.select_method("mdav")
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)  # the hidden panels' refresh after the open
    ticks = [0]
    ticker = QTimer()
    ticker.setInterval(1)
    ticker.timeout.connect(lambda: ticks.__setitem__(0, ticks[0] + 1))
    ticker.start()
    ran: list[tuple[str, object, int]] = []
    real = turns.TurnQueue._run_next

    mine = (win.controller, rp, win.release_view, win.history_panel, win.risk_panel, win)

    def run_next(self):
        self._drop_dead()
        if self.jobs and any(self.jobs[0].owner is o for o in mine):
            j = self.jobs[0]
            ran.append((type(j.owner).__name__, j.key, ticks[0]))
        real(self)

    monkeypatch.setattr(turns.TurnQueue, "_run_next", run_next)
    at_switch = []
    win.controller.sig_protected.connect(
        lambda: at_switch.append([w.isHidden() for w in (rp.header, rp.generalisation, rp.kanon)])
    )
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    assert at_switch == [[True, True, True]]  # switched with the texts veiled
    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)
    ticker.stop()
    assert not rp.header.isHidden() and not rp.kanon.isHidden() and not rp.generalisation.isHidden()
    keys = [k for _o, k, _t in ran]
    for k in ("protected", "reveal-0", "reveal-3", "fit_header", "hist", "refresh", "rebuild"):
        assert k in keys, (k, keys)
    assert keys.index("protected") < keys.index("reveal-0") < keys.index("hist") < keys.index("rebuild")
    at = [t for _o, _k, t in ran]
    assert all(a < b for a, b in zip(at, at[1:])), ran  # the loop turned between every two
    assert win.tabs.currentWidget() is rp and win.history_panel.table.rowCount() == 1


def _protect(qtbot, win) -> None:
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    qtbot.wait(200)  # the histogram is drawn in a later turn of the event loop


def test_the_results_view_reuses_its_widgets_and_plot_items_across_protects(qtbot, window):
    """Issue 27.4: showing a second result updates the Results view's tables and histogram
    items in place (setData) instead of recreating them (construction + first paint on the
    GUI thread each time).
    """
    win = window
    win.state.set_data(_household(), None)
    win.roles_panel.set_roles({"region": "k-quasi", "age": "k-quasi", "income": "k-quasi"})
    win.method_panel.select_method("mdav")
    win.method_panel.set_values({"k": 3})
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=60000)
    rp = win.results_panel
    _protect(qtbot, win)
    win.tabs.setCurrentIndex(win.tabs.indexOf(rp))
    items = [id(x) for x in rp.hist.getPlotItem().listDataItems()]
    widgets = (rp.measures, rp.per_attr, rp.corr, rp.hist)
    assert items, "no histogram drawn"
    win.method_panel.set_values({"k": 4})
    _protect(qtbot, win)
    assert [id(x) for x in rp.hist.getPlotItem().listDataItems()] == items
    assert (rp.measures, rp.per_attr, rp.corr, rp.hist) == widgets
    # another attribute: the same items, new data
    before = rp.hist_prot.getData()[1].copy()
    rp.hist_attr.setCurrentText("income")
    assert [id(x) for x in rp.hist.getPlotItem().listDataItems()] == items
    assert rp.hist_prot.getData()[1].sum() == before.sum()  # same records, another column


def test_opening_a_file_updates_the_method_form_in_place(qtbot, window):
    """Issue 27.4: a new file does not rebuild the method's form (a stall of its own on
    open); k's upper limit follows the new number of records, the values the recipe's.
    """
    win = window
    mp = win.method_panel
    df = _household()
    roles = {"age": "k-quasi", "income": "k-quasi"}  # mdav stays applicable
    win.state.set_data(df, None, roles=roles)
    mp.select_method("mdav")
    mp.set_values({"k": 7})
    editors = {n: f.editor for n, f in mp.fields.items()}
    win.state.set_data(df.iloc[:40].reset_index(drop=True), None, roles=roles)
    assert {n: f.editor for n, f in mp.fields.items()} == editors
    assert mp.fields["k"].editor.maximum() == 20  # k ≤ n / 2
    assert mp.values()["k"] == win.state.recipe.params["k"] == 7
    win.state.set_data(df, None, roles=roles)
    assert mp.fields["k"].editor.maximum() == min(len(df) // 2, mp.fields["k"].p.get("maximum") or 10**9)


def test_a_running_sweep_redraws_at_most_a_few_times_a_second_one_plot_per_turn(qtbot, monkeypatch):
    """Issue 27.4: points arriving every 10 ms are drawn by at most ~5 redraws a second
    (the throttle), and each redraw sets one plot per turn of the event loop (so each paint
    is one plot's); the last points are all drawn at the end, and a clear drops a pending
    staggered part.
    """
    import time

    from dpstudio.app.state import AppState
    from dpstudio.app.widgets import explore_panel as ep_mod
    from dpstudio.engine.sweeps import SweepPoint

    st = AppState()
    st.set_data(_household().iloc[:200].reset_index(drop=True), None)
    panel = ep_mod.ExplorePanel(st)
    qtbot.addWidget(panel)
    panel.show()
    panel.begin([], False, method="mdav")
    redraws = []
    real = panel._redraw_ops
    monkeypatch.setattr(panel, "_redraw_ops", lambda ops: (redraws.append(1), real(ops)))
    n = 60
    t0 = time.perf_counter()
    for i, k in enumerate(range(2, 2 + n)):
        panel.add_points(
            [SweepPoint(k, None, 1, {"sse_normalized": (0.01 * k, 0.0), "rl": (50.0 / k, 0.0)}, i, n, 0.1)]
        )
        qtbot.wait(10)
    dt = time.perf_counter() - t0
    assert len(redraws) <= dt * 5 + 1, (len(redraws), dt)
    # a staggered redraw: the SSE plot at once, the RL plot and the plane in later turns
    s = next(iter(panel.series.values()))
    panel._redraw_timer.stop()
    before = len(s.rl.xData)
    panel.add_points(
        [SweepPoint(1000, None, 1, {"sse_normalized": (9.0, 0.0), "rl": (0.1, 0.0)}, n, n + 1, 0.2)]
    )
    panel._redraw_timer.stop()
    panel._redraw_staggered()
    assert len(s.sse.xData) == n + 1 and len(s.rl.xData) == before
    qtbot.waitUntil(lambda: len(s.rl.xData) == n + 1 and len(s.plane.xData) == n + 1, timeout=2000)
    panel.finish()
    assert panel.n_plotted() == n + 1
    assert s.rl.xData.max() == 1000
    # a clear drops what a staggered redraw had left to do
    panel.add_points(
        [SweepPoint(2000, None, 1, {"sse_normalized": (9.0, 0.0), "rl": (0.1, 0.0)}, n, n + 1, 0.2)]
    )
    panel._redraw_timer.stop()
    panel._redraw_staggered()
    panel.clear()
    qtbot.wait(100)
    # the series' items are emptied (kept for the next sweep) and stay empty: the pending
    # plane of the dropped redraw (n + 2 points) is not drawn after the clear
    assert panel.n_plotted() == 0 and (s.plane.xData is None or len(s.plane.xData) == 0)


def test_a_new_sweep_reuses_the_plot_items_of_the_last_one(qtbot):
    """Issue 24 §5: a sweep's series (curves, error bars, plane points) are made once and
    reused, emptied, by the next sweep (making and adding them was most of a sweep's first
    turn); a sweep with more series adds only the missing ones, restyled ones keep their items.
    """
    from dpstudio.app.state import AppState
    from dpstudio.app.widgets.explore_panel import BASELINE_COLOR, ExplorePanel
    from dpstudio.engine.sweeps import SweepPoint

    st = AppState()
    st.set_data(_household().iloc[:200].reset_index(drop=True), None)
    panel = ExplorePanel(st)
    qtbot.addWidget(panel)

    def items():
        return [id(it) for p in (panel.sse_plot, panel.rl_plot, panel.plane) for it in p.getPlotItem().items]

    def sweep(epsilons):
        panel.begin(list(epsilons), True, baselines=True, method="k-eps")
        pts = [
            SweepPoint(k, e, 1, {"sse_normalized": (0.01 * k, 0.0), "rl": (50.0 / k, 0.0)}, i, 6, 0.1)
            for i, (k, e) in enumerate((k, e) for k in (2, 5) for e in (None, *epsilons))
        ]
        panel.add_points(pts)
        panel.finish()
        assert panel.n_plotted() == len(pts)

    sweep([1.0])
    first = items()
    sweep([2.0])  # the same number of series: the same items
    assert items() == first
    assert panel.series[None].color == BASELINE_COLOR and len(panel.series[2.0].plane.xData) == 2
    sweep([1.0, 2.0, 4.0])  # two more series: only theirs are new
    assert items()[: len(first)] == first or set(first) <= set(items())
    assert len(set(items())) == len(set(first)) + 2 * 5
    panel.clear()
    assert panel.n_plotted() == 0 and set(first) <= set(items())


def test_the_forms_point_is_starred_when_its_sweep_ends_and_a_protect_repaints_no_plot(qtbot):
    """Issue 24 §5: the form's k and ε, set before the sweep, are starred on its curves when it
    ends (they were starred only at the next change of the recipe -- a Protect's new seed --
    which repainted the three plots in the Protect's turn); a recipe change that does not move
    the star leaves the plots alone.
    """
    from dpstudio.app.state import AppState
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.engine.sweeps import SweepPoint

    st = AppState()
    st.set_data(_household().iloc[:200].reset_index(drop=True), None)
    st.set_method("mdav", {"k": 5})
    panel = ExplorePanel(st)
    qtbot.addWidget(panel)
    panel.begin([], False, method="mdav")
    panel.add_points(
        [
            SweepPoint(k, None, 1, {"sse_normalized": (0.01 * k, 0.0), "rl": (50.0 / k, 0.0)}, i, 3, 0.1)
            for i, k in enumerate((2, 5, 10))
        ]
    )
    panel.finish()
    assert panel.n_plotted() == 3
    assert list(panel.markers["sse"].xData) == [5] and list(panel.markers["rl"].xData) == [5]
    changed = []
    for m in panel.markers.values():
        m.sigPlotChanged.connect(lambda *_: changed.append(1))
    st.set_seed(12345, pinned=None)  # as a Protect records its seed: the star stays
    assert changed == [] and list(panel.markers["sse"].xData) == [5]


def test_a_wrap_labels_height_is_qlabels_and_follows_its_text_and_font(qtbot):
    """WrapLabel (the Results header's texts) caches its height per width: the same heights
    as a plain word-wrapped QLabel, renewed by a new text, format or font."""
    from PySide6.QtWidgets import QLabel

    from dpstudio.app.widgets.common import WrapLabel

    text = "<b>Guarantee:</b> " + "every released value lies on the grid, inside the domain. " * 12
    ours, plain = WrapLabel(text), QLabel(text)
    plain.setWordWrap(True)
    for w in (ours, plain):
        qtbot.addWidget(w)
    for width in (200, 480, 900, 200):
        assert ours.heightForWidth(width) == plain.heightForWidth(width)
    short = "one line"
    ours.setText(short)
    plain.setText(short)
    assert ours.heightForWidth(200) == plain.heightForWidth(200)
    f = ours.font()
    f.setPointSizeF(f.pointSizeF() * 2)
    ours.setFont(f)
    plain.setFont(f)
    assert ours.heightForWidth(200) == plain.heightForWidth(200)
    assert ours.sizeHint().height() == ours.heightForWidth(WrapLabel.HINT_WIDTH)


def test_opening_a_file_leaves_the_hidden_panels_refresh_to_later_turns(qtbot, window):
    """Issue 24 §5: the turn that installs a file (``set_data`` and its handlers) does not
    draw the hidden panels' parts -- the Attributes tab's column statistics and histogram,
    the Candidates table, the Query desk's filter example; each comes in a turn of its own,
    and once the turns have run every panel shows what a synchronous refresh shows.
    """
    from dpstudio.app import turns

    win = window
    win.show()
    win.tabs.setCurrentWidget(win.data_panel)
    rp, hp, qp = win.roles_panel, win.history_panel, win.query_panel
    df = _household()
    win.state.set_data(df, None)
    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)
    rp.stat_labels["Column"].setText("stale")
    qp.filter_edit.setPlaceholderText("stale")
    hp.table.setRowCount(3)
    win.state.set_data(df.iloc[:50].reset_index(drop=True), None)
    # the handlers' turn: nothing of the hidden panels drawn yet
    assert rp.stat_labels["Column"].text() == "stale"
    assert qp.filter_edit.placeholderText() == "stale"
    assert hp.table.rowCount() == 3
    assert turns.pending(rp, "stats") and turns.pending(hp, "rebuild") and turns.pending(qp, "placeholder")
    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)
    after = (rp.stat_labels["Column"].text(), rp.hist.toolTip(), qp.filter_edit.placeholderText())
    assert "stale" not in after[0] and after[2] != "stale" and hp.table.rowCount() == 0
    rp._update_stats()
    qp._set_placeholder()
    assert (rp.stat_labels["Column"].text(), rp.hist.toolTip(), qp.filter_edit.placeholderText()) == after
    # a panel shown before its turn came draws at once
    win.state.set_data(df, None)
    assert turns.pending(rp, "stats")
    win.tabs.setCurrentWidget(rp)
    assert not turns.pending(rp, "stats") and df.columns[0] in rp.stat_labels["Column"].text()


def test_opening_a_file_paints_the_data_table_in_a_turn_of_its_own(qtbot, window):
    """Issue 24 §5: the shown data table holds its paint while the file is installed; it
    paints the new table in a later turn."""
    from dpstudio.app import turns

    win = window
    win.show()
    win.tabs.setCurrentWidget(win.data_panel)
    view = win.data_panel.view
    df = _household()
    win.state.set_data(df, None)
    assert not view.updatesEnabled() and turns.pending(win.data_panel, "paint")
    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)
    assert view.updatesEnabled() and win.data_panel.model.rowCount() == len(df)
