"""Polish 5: the risk–utility plane's legend never covers a point.  It was anchored inside the
view box's top-right corner and hid the point drawn there (on Adult, k-eps: ε = 0.1 at k = 2);
it now sits beside the view box, in the plot's layout.  Checked in scene coordinates."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from dpstudio.app.state import AppState  # noqa: E402


def _scene_points(plot, items):
    """Scene positions of the points of ``items`` drawn on ``plot`` (view -> scene)."""
    import pyqtgraph as pg

    vb = plot.getPlotItem().vb
    out = []
    for it in items:
        if it.xData is None:
            continue
        xs, ys = it.getData()  # in view coordinates (log10 on a log axis)
        for x, y in zip(xs, ys, strict=True):
            out.append((it, vb.mapViewToScene(pg.Point(float(x), float(y)))))
    return out


def _check_legend_clear(panel, extra=()):
    """The legend is shown, lists entries, lies outside the view box and covers no point."""
    from PySide6.QtCore import QRectF

    vb = panel.plane.getPlotItem().vb
    legend = panel.legend
    assert legend.isVisible() and legend.items
    leg = legend.mapRectToScene(legend.rect())
    view = vb.mapRectToScene(vb.rect())
    assert leg.width() > 20 and leg.height() > 10
    # within the plot (not pushed out of sight)
    whole = panel.plane.getPlotItem().mapRectToScene(panel.plane.getPlotItem().rect())
    assert whole.contains(leg), (whole, leg)
    items = [s.plane for s in panel.series.values()] + list(extra)
    pts = _scene_points(panel.plane, items)
    assert pts
    for it, p in pts:
        assert view.contains(p)  # the point is drawn in the view box …
        r = it.opts.get("symbolSize") or 7
        mark = QRectF(p.x() - r / 2, p.y() - r / 2, r, r)
        assert not leg.contains(p) and not leg.intersects(mark), (it.name(), p, leg)  # … not under it
    assert not leg.intersects(view), (leg, view)  # beside the data area, not on it
    return pts


def _settle(qtbot) -> None:
    """Until the turn queue is idle (the plots are shown a turn each after the panel), then
    the layouts settle."""
    from dpstudio.app import turns

    qtbot.waitUntil(lambda: not turns.pending(), timeout=10000)
    qtbot.wait(50)


def _corner_points():
    from dpstudio.engine.sweeps import SweepPoint

    rows = [(2, None, 0.01, 1.0), (5, None, 0.05, 5.0), (2, 1.0, 0.1, 10.0), (5, 1.0, 1.0, 90.0)]
    rows += [(2, 10.0, 0.02, 3.0)]
    return [
        SweepPoint(k, e, 1, {"sse_normalized": (s, 0.0), "rl": (r, 0.0)}, i, len(rows), 0.1)
        for i, (k, e, s, r) in enumerate(rows)
    ]


@pytest.mark.parametrize("size", [(1100, 700), (640, 420)])
def test_a_point_in_the_top_right_corner_is_not_under_the_legend(qtbot, size):
    from dpstudio.app.widgets.explore_panel import ExplorePanel

    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    qtbot.waitExposed(panel)
    panel.begin([1.0, 10.0], True, baselines=True, method="mdav")
    panel.add_points(_corner_points())
    panel.finish()
    panel.n_plotted()
    _settle(qtbot)  # the plots shown (a turn each) and the layouts settled
    vb = panel.plane.getPlotItem().vb
    pts = _check_legend_clear(panel)
    # the point with the largest SSE and RL is the view box's top-right-most point
    top_right = max(pts, key=lambda ip: ip[1].x() - ip[1].y())[1]
    view = vb.mapRectToScene(vb.rect())
    assert view.right() - top_right.x() < 0.1 * view.width()
    assert top_right.y() - view.top() < 0.1 * view.height()
    assert [lab.text for _s, lab in panel.legend.items] == ["no noise", "ε = 1", "ε = 10"]


def test_many_series_fit_beside_the_plane(qtbot):
    """Eleven series: the legend takes a second column instead of running off the plot."""
    from dpstudio.app.widgets.explore_panel import ExplorePanel
    from dpstudio.engine.sweeps import SweepPoint

    eps = [0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 20.0]
    panel = ExplorePanel(AppState())
    qtbot.addWidget(panel)
    panel.resize(1100, 600)
    panel.show()
    qtbot.waitExposed(panel)
    panel.begin(eps, True, baselines=True, method="mdav")
    pts = []
    for e in [None, *eps]:
        for k in (2, 10):
            v = 0.01 * k * (1 if e is None else 1 + 1 / e)
            pts.append(
                SweepPoint(k, e, 1, {"sse_normalized": (v, 0.0), "rl": (90 / k, 0.0)}, len(pts), 22, 0.1)
            )
    panel.add_points(pts)
    panel.finish()
    panel.n_plotted()
    _settle(qtbot)
    assert len(panel.legend.items) == 11 and panel.legend.columnCount == 2
    _check_legend_clear(panel)


def test_real_census_sweep_and_a_candidate_release_are_all_visible(qtbot, window):
    """The bundled Census sample through the window: sweep, protect (a candidate release on the
    plane), and no point of either under the legend."""
    from dpstudio.app.resources import sample_path

    win = window
    win.resize(1400, 900)
    win.show()
    qtbot.waitExposed(win)
    with qtbot.waitSignal(win.sig_loaded, timeout=30000):
        win.controller.open_file(str(sample_path()), confirm=False)
    win.state.set_roles({c: "eps-quasi" for c in ("FICA", "FEDTAX", "STATETAX", "INTVAL")})
    for c in ("FICA", "FEDTAX", "STATETAX", "INTVAL"):  # no domain: γ = 1 from the declared type
        win.state.set_type(c, "integer")
    win.method_panel.select_method("idp-cbls")
    ep = win.explore_panel
    ep.ks.setText("3, 5, 10, 20, 50")
    ep.eps.setText("0.5, 2, 10")
    ep.repeats.setValue(1)
    win.tabs.setCurrentIndex(win.tabs.indexOf(win.method_splitter))
    assert win.controller.run_sweep()
    qtbot.waitUntil(lambda: "done" in ep.status.text(), timeout=120000)
    win.method_panel.set_values({"k": 5, "epsilon": 1.0})
    with qtbot.waitSignal(win.controller.sig_protected, timeout=60000):
        assert win.controller.run_protect()
    qtbot.waitUntil(lambda: not win.controller.busy, timeout=30000)
    win.tabs.setCurrentIndex(win.tabs.indexOf(win.method_splitter))
    qtbot.waitUntil(lambda: win.history_panel.points.xData is not None, timeout=10000)
    _settle(qtbot)
    assert not win.errors, win.errors
    assert ep.n_plotted() == 20
    names = [lab.text for _s, lab in ep.legend.items]
    assert names == ["no noise", "ε = 0.5", "ε = 2", "ε = 10", "candidate releases"]
    pts = _check_legend_clear(ep, extra=[win.history_panel.points])
    assert sum(it is win.history_panel.points for it, _p in pts) == 1
    assert len({id(it) for it, _p in pts}) == 5  # four series and the candidates
