"""Drive the app through the workflow and save a screenshot of each step.

    Xvfb :99 -screen 0 1366x768x24 &  DISPLAY=:99 python docs/screenshots/make_screenshots.py
(or QT_QPA_PLATFORM=offscreen).  Uses a throw-away settings folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent


def main() -> None:
    os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-shots-")

    from PySide6.QtCore import QTimer  # noqa: E402
    from PySide6.QtWidgets import QApplication  # noqa: E402

    global app
    app = QApplication(sys.argv)
    from dpstudio.app.main_window import MainWindow, sample_path  # noqa: E402
    from dpstudio.app.widgets.csv_dialog import CsvPreviewDialog  # noqa: E402
    from dpstudio.app.widgets.export_dialog import ExportDialog  # noqa: E402


    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.01)


    def wait_idle(win, timeout=120.0) -> None:
        end = time.monotonic() + timeout
        while any(r.busy for r in win.runners) and time.monotonic() < end:
            app.processEvents()
            time.sleep(0.02)
        pump(0.3)


    def shot(widget, name: str) -> None:
        pump(0.3)
        widget.grab().save(str(OUT / name))
        print("saved", name)


    win = MainWindow(offer_recovery=False)
    win.resize(1366, 740)
    win.show()
    pump(0.3)
    dlg = CsvPreviewDialog(str(sample_path()), parent=win)
    dlg.show()
    shot(dlg, "01_csv_preview.png")
    dlg.close()
    win.open_sample()
    wait_idle(win)
    shot(win, "02_data.png")
    win.tabs.setCurrentIndex(1)
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    win.state.set_roles({c: "eps-quasi" for c in cols} | {"AFNLWGT": "identifier"})
    win.roles_panel.suggest_domains()
    win.roles_panel.select_column("FICA")
    shot(win, "03_attributes.png")
    win.method_panel.select_method("ir-dp")
    win.tabs.setCurrentIndex(2)
    win.explore_panel.ks.setText("2-10, 15, 20, 30, 50, 75, 100")
    win.explore_panel.eps.setText("0.1, 1, 10")
    win.explore_panel.repeats.setValue(3)
    win.run_sweep()
    end = time.monotonic() + 30
    while len(win.explore_panel.points) < 25 and time.monotonic() < end:
        pump(0.05)
    shot(win, "04_sweep_running.png")
    wait_idle(win)
    win.explore_panel.target_value.setValue(2.0)
    win.explore_panel._on_target_clicked()
    shot(win, "05_sweep_done.png")
    win.run_protect()
    wait_idle(win)
    shot(win, "06_results.png")
    win.results_panel.tabs.setCurrentIndex(1)
    shot(win, "07_results_corr.png")
    ed = ExportDialog(win.state.result, win.state.path, win, roles=win.state.roles)
    ed.show()
    shot(ed, "08_export_dialog.png")
    ed.close()
    # a method that is not applicable
    win.tabs.setCurrentIndex(2)
    win.method_panel.select_method("mdav")
    shot(win, "09_not_applicable.png")
    # MDAV on k-quasis: the k-anonymity check in the results
    win.tabs.setCurrentIndex(1)
    win.state.set_roles({c: "k-quasi" for c in cols})
    win.roles_panel.select_column("FICA")
    win.method_panel.set_values({"k": 5})
    win.run_protect()
    wait_idle(win)
    shot(win, "10_results_mdav.png")
    # a bad file: readable message, details on demand
    bad = Path(tempfile.mkdtemp()) / "broken.csv"
    bad.write_bytes(b'a,b\n1,2\n"unterminated,3\n4,5,6,7\n')
    win.open_file(str(bad), confirm=False)
    wait_idle(win)
    pump(0.5)
    from PySide6.QtWidgets import QMessageBox
    boxes = [w for w in app.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    if boxes:
        shot(boxes[0], "11_error_bad_csv.png")
        boxes[0].close()
    pump(0.3)

    # t-close-dp on Census: k 'auto', a sweep whose infeasible (k, ε) cells are left out
    win.open_sample()
    wait_idle(win)
    win.state.set_roles({"FICA": "k-quasi", "FEDTAX": "k-quasi", "INTVAL": "confidential",
                         "AFNLWGT": "identifier"})
    win.method_panel.select_method("t-close-dp")
    win.tabs.setCurrentIndex(2)
    win.explore_panel.ks.setText("2-10, 12, 15, 20, 25, 30, 40, 50, 75, 100")
    win.explore_panel.eps.setText("0.1, 1, 10")
    win.explore_panel.repeats.setValue(1)
    win.run_sweep()
    wait_idle(win)
    shot(win, "12_tclose_sweep.png")

    # Adult: categorical-dp on occupation / native-country with their ARX hierarchies
    from dpstudio.app.main_window import resources_dir  # noqa: E402
    from dpstudio.engine.hierarchies.hierarchy import Hierarchy  # noqa: E402

    hd = resources_dir() / "adult" / "hierarchies"
    win.open_adult_sample()
    wait_idle(win)
    st = win.state
    st.set_roles({"occupation": "eps-quasi", "native-country": "eps-quasi"})
    for c in ("occupation", "native-country"):
        hp = str(hd / f"adult_hierarchy_{c}.csv")
        st.set_hierarchy(c, Hierarchy.read_arx(hp), hp)
    win.tabs.setCurrentIndex(1)
    win.roles_panel.select_column("occupation")
    shot(win, "13_adult_attributes.png")
    win.method_panel.select_method("categorical-dp")
    win.method_panel.set_values({"k": 100, "epsilon": 10.0})
    win.run_protect()
    wait_idle(win)
    win.results_panel.tabs.setCurrentIndex(0)
    win.results_panel.hist_attr.setCurrentText("occupation")
    shot(win, "14_adult_categorical_results.png")

    # Adult: (k, ε)-anonymity with age / sex / race / marital-status as k-quasi
    st.set_roles({"occupation": "other", "native-country": "other"}
                 | {c: "k-quasi" for c in ("age", "sex", "race", "marital-status")})
    for c in ("sex", "race", "marital-status"):
        hp = str(hd / f"adult_hierarchy_{c}.csv")
        st.set_hierarchy(c, Hierarchy.read_arx(hp), hp)
    win.method_panel.select_method("k-eps")
    win.method_panel.set_values({"k": 10})
    win.run_protect()
    wait_idle(win)
    win.results_panel.hist_attr.setCurrentText("age")
    shot(win, "15_adult_keps_results.png")
    win.shutdown()


if __name__ == "__main__":  # sweeps start child processes that import this module
    main()
