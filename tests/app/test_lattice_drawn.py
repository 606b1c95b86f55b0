"""Issue 24 (lattice): OLA's lattice drawn as ARX's explorer draws it -- nodes in rows by the
sum of their levels, edges between neighbours, coloured by state -- from the same frame as the
table: the states and their counts match OLA's result, and the chosen node is painted as
chosen (read off the painted pixels)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("pyreadstat")

from PySide6.QtCore import QPoint, QPointF  # noqa: E402

from tests.app.test_survey_app import _anes, _idle, _open  # noqa: E402


def _colour_at(widget, p: QPointF):
    img = widget.grab().toImage()
    dpr = img.devicePixelRatio()
    return img.pixelColor(QPoint(round(p.x() * dpr), round(p.y() * dpr)))


def test_drawn_lattice_matches_olas_result(qtbot, window, tmp_path):
    from dpstudio.app.widgets.lattice_view import STATE_COLOUR, STATES

    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    window.roles_panel.set_roles({"age": "k-quasi", "educ": "k-quasi", "PID": "k-quasi"})
    window.method_panel.select_method("k-eps")
    window.method_panel.set_values({"k": 5})
    with qtbot.waitSignal(window.controller.sig_protected, timeout=60000):
        assert window.controller.run_protect()
    _idle(qtbot, window)
    dlg = window.results_panel.open_lattice()
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.frame is not None, timeout=60000)
    t, c = dlg.frame, dlg.canvas
    gen = window.state.result.info["generalisation"]
    cols = ["age", "educ", "PID"]
    heights = [int(t[x].max()) + 1 for x in cols]
    total = int(np.prod(heights))
    assert c.whole and len(c.nx) == total == c.size_total
    n = c.counts()
    within = t["within limit"].to_numpy(bool)
    assert n["chosen"] == 1
    assert n["anonymous"] == int(within.sum()) - 1
    assert n["not"] == int((~within).sum())
    assert n["unknown"] == total - len(t)  # every node is weighed on a lattice this small
    assert sum(n.values()) == total
    # node by node: the state drawn is the table's
    for rec in t.to_dict("records"):
        lv = tuple(int(rec[x]) for x in cols)
        want = "chosen" if rec["chosen"] else ("anonymous" if rec["within limit"] else "not")
        assert c.state_of(lv) == want, lv
    assert c.state_of(tuple(gen["node"])) == "chosen"
    # the rows: the bottom node alone in the lowest row, the top alone in the highest
    assert (
        c.ny[c.index_of((0, 0, 0))] == 0
        and c.ny[c.index_of(tuple(h - 1 for h in heights))] == sum(heights) - 3
    )
    # edges join nodes one level apart in one column
    d = np.abs(c.levels[c.edges[:, 0]] - c.levels[c.edges[:, 1]]).sum(axis=1)
    assert len(c.edges) and (d == 1).all()
    assert len(c.edges) == sum(total // h * (h - 1) for h in heights)
    # painted: the chosen node in the chosen colour, a weighed other node in its own
    dlg.tabs.setCurrentIndex(0)
    dlg.resize(900, 640)
    qtbot.wait(50)
    p = c.node_point(tuple(gen["node"]))
    assert _colour_at(c, p).name() == STATE_COLOUR["chosen"].name()
    other = next(
        tuple(int(rec[x]) for x in cols)
        for rec in t.to_dict("records")
        if rec["within limit"] and not rec["chosen"]
    )
    assert _colour_at(c, c.node_point(other)).name() == STATE_COLOUR["anonymous"].name()
    assert c.last_painted == total
    # the tooltip: state, suppressed records and loss of the chosen node
    tip = c.tooltip_text(c.index_of(tuple(gen["node"])))
    assert "chosen by OLA" in tip and f"records suppressed: {gen['suppressed_records']:,}" in tip
    assert f"loss: {gen['loss']:.4g}" in tip
    assert c.node_at(p) == c.index_of(tuple(gen["node"]))
    # the table is still there, as a tab
    assert dlg.tabs.count() == 2 and dlg.table.rowCount() == len(t)
    assert "chosen by OLA" in dlg.legend.text() and STATES[0] == "unknown"


def test_large_lattice_unweighed_nodes_and_zoom(qtbot):
    """A lattice of thousands of nodes of which only a neighbourhood was weighed: the others
    are drawn as not evaluated; zooming in paints only the visible ones."""
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtGui import QWheelEvent

    from dpstudio.app.widgets.lattice_view import LatticeCanvas
    from dpstudio.engine.transformation import levels_weighed

    rng = np.random.default_rng(1)
    df = pd.DataFrame({f"c{j}": rng.integers(0, 60, 400) for j in range(4)})
    t = levels_weighed(df, list(df.columns), 3, max_nodes=50, chosen=None)
    c = LatticeCanvas()
    qtbot.addWidget(c)
    c.resize(800, 500)
    c.set_frame(t, list(df.columns))
    total = int(np.prod([int(t[x].max()) + 1 for x in df.columns]))
    assert total > 1000 and c.size_total == total and len(c.nx) == total
    n = c.counts()
    assert n["unknown"] == total - len(t) and n["chosen"] == 0
    assert n["anonymous"] + n["not"] == len(t)
    c.show()
    c.grab()
    assert c.last_painted == total
    centre = QPointF(400, 250)
    for _ in range(8):
        ev = QWheelEvent(
            centre,
            c.mapToGlobal(centre),
            QPoint(0, 0),
            QPoint(0, 120),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        c.wheelEvent(ev)
    c.grab()
    assert c.zoom > 5 and 0 < c.last_painted < total
    c.reset_view()
    c.grab()
    assert c.last_painted == total
