"""Issue 24 (builder): categories grouped by dragging them, with their value labels, onto a
group or a new group.  The drop goes through the tree model's ``dropMimeData`` (what the view
calls on a real drop); the result must be the hierarchy -- preview, ARX file -- of the same
groups typed in the mapping table."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")
pytest.importorskip("pyreadstat")

from PySide6.QtCore import QMimeData, Qt  # noqa: E402

from tests.app.test_survey_app import PID, _anes, _open  # noqa: E402

GROUPS = {
    "0": "Democrat",
    "1": "Democrat",
    "2": "Independent",
    "3": "Independent",
    "4": "Independent",
    "5": "Republican",
    "6": "Republican",
}
MOVE = Qt.DropAction.MoveAction


def _drop(qtbot, b, values, target):
    """Drag the categories ``values`` and drop them on ``target`` (an index of the tree)."""
    m = b.group_model
    md = m.mimeData([m.category_index(v) for v in values])
    assert m.canDropMimeData(md, MOVE, -1, -1, target)
    assert m.dropMimeData(md, MOVE, -1, -1, target)
    qtbot.wait(20)  # the tree is filled again once the drop returned


def _rename(qtbot, b, old, new):
    m = b.group_model
    m.itemFromIndex(m.group_row(old)).setText(new)  # what editing the group's cell does
    qtbot.wait(20)


def _table(b):
    return [
        [b.levels.item(r, c).text() for c in range(b.levels.columnCount())]
        for r in range(b.levels.rowCount())
    ]


def test_grouping_by_drag_equals_the_typed_mapping(qtbot, window, tmp_path):
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    b = window.hierarchy_builder("PID")
    qtbot.addWidget(b)
    assert b.kind.currentData() == "groups"
    m = b.group_model
    # every category with its value label, ungrouped at first
    assert m.groups() == {"": [str(i) for i in range(7)]}
    assert m.itemFromIndex(m.category_index("0")).text() == "0 — Strong Democrat"
    # Democrats: both dragged onto "+ New group", then renamed
    _drop(qtbot, b, ["0", "1"], m.new_group_row())
    assert m.groups()["Group 1"] == ["0", "1"]
    assert b.mapping_dict() == {"0": "Group 1", "1": "Group 1"}
    _rename(qtbot, b, "Group 1", "Democrat")
    # the preview follows every drop: level 1 now has 6 groups, their counts add up
    assert b.levels.item(1, 1).text() == "6"
    # Independents: one to a new group, the others dropped on the group and on its member
    _drop(qtbot, b, ["2"], m.new_group_row())
    _rename(qtbot, b, "Group 1", "Independent")
    _drop(qtbot, b, ["3"], m.group_row("Independent"))
    _drop(qtbot, b, ["4"], m.category_index("2"))  # on a category: into its group
    # Republicans: 5 first lands with the Democrats, then moves (a group row is dragged whole
    # when its row is dragged: 6 joins by dragging a one-member group)
    _drop(qtbot, b, ["5"], m.group_row("Democrat"))
    assert "5" in m.groups()["Democrat"]
    _drop(qtbot, b, ["6"], m.new_group_row())
    _rename(qtbot, b, "Group 1", "Republican")
    md = m.mimeData([m.category_index("5")])
    assert m.dropMimeData(md, MOVE, -1, -1, m.group_row("Republican"))
    qtbot.wait(20)
    # a category dropped on "(ungrouped)" keeps its own value again; dragged back after
    _drop(qtbot, b, ["4"], m.group_row(""))
    assert b.mapping_dict().get("4") is None and "4" in m.groups()[""]
    _drop(qtbot, b, ["4"], m.group_row("Independent"))
    assert b.mapping_dict() == GROUPS
    assert m.groups() == {
        "": [],
        "Democrat": ["0", "1"],
        "Independent": ["2", "3", "4"],
        "Republican": ["5", "6"],
    }
    # the preview: 3 groups at level 1, records per group as the data has them
    assert b.levels.item(1, 1).text() == "3"
    pid = window.state.df["PID"]
    b.levels.selectRow(1)
    b._show_counts(1)
    counts = {b.counts.item(r, 0).text(): int(b.counts.item(r, 1).text().replace(",", "")) for r in range(3)}
    assert counts == {
        "Democrat": int(pid.isin([0, 1]).sum()),
        "Independent": int(pid.isin([2, 3, 4]).sum()),
        "Republican": int(pid.isin([5, 6]).sum()),
    }

    # the same groups typed in the mapping table's cells
    t = window.hierarchy_builder("PID")
    qtbot.addWidget(t)
    for r in range(t.mapping.rowCount()):
        t.mapping.item(r, 3).setText(GROUPS[t.mapping.item(r, 0).text()])
    assert t.hierarchy is not None and b.hierarchy is not None
    assert t.hierarchy.table.tolist() == b.hierarchy.table.tolist()
    assert _table(t) == _table(b)
    # the ARX CSV: the same bytes, and the tree of the typed mapping shows the same groups
    assert b.save(str(tmp_path / "drag.csv")) and t.save(str(tmp_path / "typed.csv"))
    assert (tmp_path / "drag.csv").read_bytes() == (tmp_path / "typed.csv").read_bytes()
    assert t.group_model.groups() == m.groups()
    # and loaded back: the levels of the file
    assert b.load(str(tmp_path / "typed.csv")) and _table(b) == _table(t)


def test_dragging_a_group_onto_another_merges_them(qtbot, window, tmp_path):
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    b = window.hierarchy_builder("PID")
    qtbot.addWidget(b)
    b.set_mapping({"0": "D", "1": "D", "5": "R"})
    m = b.group_model
    md = m.mimeData([m.group_row("R")])  # the group's row: all its categories
    assert m.dropMimeData(md, MOVE, -1, -1, m.group_row("D"))
    qtbot.wait(20)
    assert b.mapping_dict() == {"0": "D", "1": "D", "5": "D"}
    assert "R" not in m.groups()
    # renamed to nothing: back to their own values
    _rename(qtbot, b, "D", "")
    assert b.mapping_dict() == {} and m.groups() == {"": [str(i) for i in range(7)]}
    assert b.hierarchy is not None and b.levels.item(1, 1).text() == "7"


def test_foreign_or_broken_drops_change_nothing(qtbot, window, tmp_path):
    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    b = window.hierarchy_builder("PID")
    qtbot.addWidget(b)
    b.set_mapping({"0": "D", "1": "D"})
    m = b.group_model
    before = b.hierarchy.table.tolist()
    text = QMimeData()
    text.setText("0")  # text from another application
    assert not m.canDropMimeData(text, MOVE, -1, -1, m.group_row("D"))
    assert not m.dropMimeData(text, MOVE, -1, -1, m.group_row("D"))
    for payload in (b"not json", b'{"a": 1}', b"[1, 2]", b"\xff\xfe"):
        bad = QMimeData()
        bad.setData("application/x-dpstudio-categories", payload)
        assert not m.dropMimeData(bad, MOVE, -1, -1, m.group_row("D"))
    # values the column does not have: ignored
    ghost = QMimeData()
    ghost.setData("application/x-dpstudio-categories", b'["99", "Strong Democrat"]')
    assert m.dropMimeData(ghost, MOVE, -1, -1, m.group_row("D"))
    qtbot.wait(20)
    assert b.hierarchy.table.tolist() == before and b.mapping_dict() == {"0": "D", "1": "D"}
    # the view never removes rows after a move: the tree is refilled from the table
    assert not m.removeRows(0, 1, m.group_row("D"))
    assert sorted(m.groups()) == ["", "D"] and PID[0.0] in m.itemFromIndex(m.category_index("0")).text()


def test_a_drop_event_on_the_view_regroups(qtbot, window, tmp_path):
    """The view's own drop path (QAbstractItemView.dropEvent: the row under the cursor, its
    drop flags, then the model's dropMimeData), with a drop event sent to the tree."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    _anes(tmp_path / "anes.sav")
    _open(qtbot, window, tmp_path / "anes.sav")
    b = window.hierarchy_builder("PID")
    qtbot.addWidget(b)
    b.set_mapping({"0": "D"})
    b.show()
    qtbot.waitExposed(b)
    tree, m = b.group_tree, b.group_model
    tree.expandAll()
    qtbot.wait(20)

    def drop_on(values, index):
        """Enter, move over ``index``, drop: the events a real drag sends to the view."""
        md = m.mimeData([m.category_index(v) for v in values])
        at = tree.visualRect(index).center()
        acts = MOVE | Qt.DropAction.CopyAction
        args = (acts, md, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
        for ev in (QDragEnterEvent(at, *args), QDragMoveEvent(at, *args), QDropEvent(QPointF(at), *args)):
            QApplication.sendEvent(tree.viewport(), ev)
            assert ev.isAccepted(), ev.type()
        qtbot.wait(20)
        tree.expandAll()
        qtbot.wait(20)

    drop_on(["1"], m.group_row("D"))  # on the group's row
    assert b.mapping_dict() == {"0": "D", "1": "D"}
    drop_on(["2"], m.category_index("0"))  # on a category of the group
    assert b.mapping_dict() == {"0": "D", "1": "D", "2": "D"}
    drop_on(["5", "6"], m.new_group_row())  # on "+ New group"
    assert b.mapping_dict() == {"0": "D", "1": "D", "2": "D", "5": "Group 1", "6": "Group 1"}
    assert b.levels.item(1, 1).text() == "4"  # D, Group 1, 3, 4
