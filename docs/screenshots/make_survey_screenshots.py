"""The survey walk-through's pictures (issue 24): the synthetic household survey
(``resources/household_survey/household_survey.sav``) with value labels, a k-quasi about to
be wiped, the hierarchy builder, the chosen generalisation and the category frequencies.

Run under an X server or offscreen (the widgets are grabbed, not the screen)::

    QT_QPA_PLATFORM=offscreen python3 docs/screenshots/make_survey_screenshots.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent
ROOT = OUT.parent.parent
W, H = 1400, 900


def main() -> None:  # noqa: C901 - a linear script
    os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-shots-")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    from dpstudio.app.main_window import MainWindow

    sys.path.insert(0, str(OUT))
    from _driver import Driver

    drv = Driver(app, OUT)
    pump, shot = drv.pump, drv.shot

    def wait_idle(timeout: float = 300.0) -> None:
        drv.wait_idle(win, timeout)

    win = MainWindow(offer_recovery=False)
    win.resize(W, H)
    win.show()
    pump(0.5)
    win.method_splitter.setSizes([520, W - 520])  # the method form whole
    st = win.state
    win.open_data(str(ROOT / "resources" / "household_survey" / "household_survey.sav"))
    wait_idle()
    win.tabs.setCurrentIndex(0)
    shot(win, "13_survey_data_labels.png")

    win.tabs.setCurrentIndex(1)
    win.roles_panel.set_roles(
        {
            "hh_id": "household",
            "region": "k-quasi",
            "sex": "k-quasi",
            "age": "k-quasi",
            "econ_status": "k-quasi",
            "income_person": "eps-quasi",
            "person_weight": "weight",
        }
    )
    st.set_domain("income_person", (0, 2_000_000))
    win.roles_panel.select_column("econ_status")
    shot(win, "14_survey_attributes.png")

    win.method_panel.select_method("k-eps")
    win.method_panel.set_values({"k": 5, "epsilon": 1.0, "drop_missing": True})
    win.tabs.setCurrentIndex(2)
    pump(3.0)
    mp = win.method_panel
    if mp.wipe_banner.isVisible():  # the pre-run warning in view (it sits below the form)
        win.method_splitter.widget(0).ensureWidgetVisible(mp.wipe_banner)
    print("wipe warning shown:", mp.wipe_banner.isVisible(), repr(mp.wipe_banner.label.text()[:80]))
    shot(win, "15_survey_keps_warning.png")

    b = win.hierarchy_builder("age")
    b.resize(1000, 640)
    b.set_kind("breaks")
    b.breaks.setText("16, 25, 35, 45, 55, 65, 75")
    b.rebuild()
    b.show()
    shot(b, "16_hierarchy_builder_age.png")
    b.close()

    g = win.hierarchy_builder("econ_status")
    g.resize(1000, 640)
    g.set_mapping({"1": "Employed", "2": "Employed", "3": "Employed", "4": "Unemployed", "5": "Inactive",
                   "6": "Retired", "7": "Inactive", "8": "Inactive", "9": "Inactive"})
    g.show()
    shot(g, "17_hierarchy_builder_groups.png")
    g.close()

    # 20: the same groups by drag and drop (through the tree's own drop handler): the
    # employed codes dropped on "+ New group", renamed; retired and inactive under way
    from PySide6.QtCore import Qt

    d = win.hierarchy_builder("econ_status")
    d.resize(1000, 680)
    m = d.group_model
    move = Qt.DropAction.MoveAction

    def drop(values, target):
        m.dropMimeData(m.mimeData([m.category_index(v) for v in values]), move, -1, -1, target)
        pump(0.1)

    drop(["1", "2", "3"], m.new_group_row())
    m.itemFromIndex(m.group_row("Group 1")).setText("Employed")
    pump(0.1)
    drop(["5", "7"], m.new_group_row())
    m.itemFromIndex(m.group_row("Group 1")).setText("Inactive")
    pump(0.1)
    drop(["8"], m.group_row("Inactive"))
    d.show()
    pump(0.3)
    tree = d.group_tree
    tree.expandAll()
    tree.setCurrentIndex(m.category_index("9"))  # the next one the user drags
    shot(d, "20_hierarchy_builder_drag.png")
    d.close()

    win.controller.run_protect()
    wait_idle()
    win.tabs.setCurrentIndex(3)
    rp = win.results_panel
    rp.vsplit.setSizes([520, 380])  # the generalisation table whole, above the measures
    pump(0.3)
    rp.header_area.ensureWidgetVisible(rp.generalisation, 0, 0)
    shot(win, "18_survey_results_generalisation.png")

    # 21: the lattice OLA searched, drawn (the table is the dialog's other tab)
    lat = win.results_panel.open_lattice()
    lat.resize(1000, 700)
    for _ in range(600):
        if lat.frame is not None:
            break
        pump(0.1)
    lat.tabs.setCurrentIndex(0)
    shot(lat, "21_ola_lattice.png")
    lat.close()

    win.tabs.setCurrentWidget(win.release_view)
    rv = win.release_view
    rv.tabs.setCurrentIndex(rv.tabs.count() - 1)
    rv.select_frequency_attribute("region")
    shot(win, "19_survey_frequencies.png")
    win.shutdown()


if __name__ == "__main__":
    main()
