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
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent
ROOT = OUT.parent.parent
W, H = 1400, 900


def main() -> None:  # noqa: C901 - a linear script
    os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-shots-")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    from dpstudio.app.main_window import MainWindow

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)

    def wait_idle(timeout: float = 300.0) -> None:
        pump(0.2)
        end = time.monotonic() + timeout
        while win.controller.busy and time.monotonic() < end:
            pump(0.05)
        pump(0.5)

    def shot(widget, name: str) -> None:
        pump(0.6)
        widget.grab().save(str(OUT / name))
        print("saved", name, flush=True)

    win = MainWindow(offer_recovery=False)
    win.resize(W, H)
    win.show()
    pump(0.5)
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

    win.controller.run_protect()
    wait_idle()
    win.tabs.setCurrentIndex(3)
    shot(win, "18_survey_results_generalisation.png")

    win.tabs.setCurrentWidget(win.release_view)
    rv = win.release_view
    rv.tabs.setCurrentIndex(rv.tabs.count() - 1)
    rv.select_frequency_attribute("region")
    shot(win, "19_survey_frequencies.png")
    win.shutdown()


if __name__ == "__main__":
    main()
