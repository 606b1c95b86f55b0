"""Drive the app through the workflow and save a numbered screenshot of each step.

Run under a real X server (the pictures are those a user sees)::

    env -u QT_QPA_PLATFORM xvfb-run -a -s "-screen 0 1600x1000x24" \
        python3 docs/screenshots/make_screenshots.py

or, without an X server, offscreen (the widgets are grabbed, not the screen)::

    QT_QPA_PLATFORM=offscreen python3 docs/screenshots/make_screenshots.py

It uses a throw-away settings folder, the bundled samples only, and the app's real paths
(the controller's open/sweep/protect, the panels' own fields).  The walk-through
(``docs/walkthrough.md``) shows these pictures; rerun this script after a UI change.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent
W, H = 1400, 900


def main() -> None:  # noqa: C901 - a linear script
    os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-shots-")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    from dpstudio.app.main_window import MainWindow
    from dpstudio.app.widgets.export_dialog import ExportDialog
    from dpstudio.app.widgets.help_dialog import open_help

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
        if win.controller.busy:
            raise SystemExit("timed out waiting for the app")
        pump(0.5)

    def wait_for(cond, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end:
            pump(0.05)
        pump(0.5)

    def shot(widget, name: str) -> None:
        pump(0.6)
        path = OUT / name
        widget.grab().save(str(path))
        print("saved", path.name, flush=True)

    for old in OUT.glob("[01][0-9]_*.png"):  # a fresh set of this script's pictures (01-12);
        if int(old.name[:2]) <= 12:  # the chain and survey scripts make 13 and up
            old.unlink()

    win = MainWindow(offer_recovery=False)
    win.resize(W, H)
    win.show()
    pump(0.5)
    # the method form whole (its default 420 px clip the seed row and the guarantee)
    win.method_splitter.setSizes([520, W - 520])
    st = win.state

    # 01 Data: the Census sample
    win.controller.open_sample()
    wait_idle()
    win.tabs.setCurrentIndex(0)
    shot(win, "01_data.png")

    # 02 Attributes: roles, types, domains
    cols = ["FICA", "FEDTAX", "INTVAL", "POTHVAL"]
    win.tabs.setCurrentIndex(1)
    win.roles_panel.set_roles({c: "eps-quasi" for c in cols} | {"AFNLWGT": "identifier"})
    # domains a statistician declares from knowledge of the population (not the file's range)
    for c, b in {"FICA": (0, 10000), "FEDTAX": (0, 25000), "INTVAL": (0, 60000), "POTHVAL": (0, 120000)}.items():
        st.set_domain(c, b)
    win.roles_panel.select_column("FICA")
    shot(win, "02_attributes.png")

    # 03 Method & trade-offs: an ir-dp sweep, finished
    win.method_panel.select_method("ir-dp")
    win.method_panel.set_values({"k": 20, "epsilon": 5.0})
    win.tabs.setCurrentIndex(2)
    ep = win.explore_panel
    ep.ks.setText("2-10, 15, 20, 30, 50, 75, 100")
    ep.eps.setText("0.5, 1, 5")
    ep.repeats.setValue(2)
    win.controller.run_sweep()
    wait_idle()
    shot(win, "03_method_sweep.png")

    # 04 Results: the guarantee and the measures
    win.controller.run_protect()
    wait_idle()
    win.tabs.setCurrentIndex(3)
    win.results_panel.vsplit.setSizes([450, H - 450])  # the guarantee and the note whole
    shot(win, "04_results.png")

    # 05 Release data: changed cells marked
    win.tabs.setCurrentWidget(win.release_view)
    shot(win, "05_release_data.png")

    # 06 Export dialog
    ed = ExportDialog(st.result, st.path, win, roles=st.roles)
    ed.show()
    shot(ed, "06_export_dialog.png")
    ed.close()

    # 07 Candidates: two more runs, compared with the first
    win.method_panel.set_values({"k": 50, "epsilon": 1.0})
    win.controller.run_protect()
    wait_idle()
    win.method_panel.set_values({"k": 10, "epsilon": 1.0})
    win.controller.run_protect()
    wait_idle()
    win.tabs.setCurrentWidget(win.history_panel)
    shot(win, "07_candidates.png")

    # 08 Risk on free1, before protection
    win.controller.open_free1_sample()
    wait_idle()
    rp = win.risk_panel
    wait_for(lambda: not rp.pending() and rp.result is not None)
    win.tabs.setCurrentWidget(rp)
    shot(win, "08_risk_free1_before.png")

    # 09 A local-suppression sweep: expected re-identifications against k
    win.method_panel.select_method("local-suppression")
    win.tabs.setCurrentIndex(2)
    ep.ks.setText("2-10")
    ep.repeats.setValue(1)
    win.controller.run_sweep()
    wait_idle()
    shot(win, "09_local_suppression_sweep.png")

    # 10 Risk on free1, after a local-suppression run (k = 3)
    win.method_panel.set_values({"k": 3})
    win.controller.run_protect()
    wait_idle()
    win.tabs.setCurrentWidget(rp)
    wait_for(lambda: not rp.pending() and rp.shows_release())
    shot(win, "10_risk_free1_after.png")

    # 11 Query desk on the Census sample, with an answer
    win.controller.open_sample()
    wait_idle()
    qp = win.query_panel
    win.tabs.setCurrentIndex(win.tab_query)
    qp.agg_combo.setCurrentText("mean")
    qp.col_combo.setCurrentText("FEDTAX")
    qp.filter_edit.setText("STATETAX > 1000")
    qp.lo_edit.setText("0")
    qp.hi_edit.setText("20000")
    qp.step_edit.setText("10")
    qp.prior_combo.setCurrentText("normal")
    qp.prior_edit.setText("6000:4000")
    qp.eps_edit.setText("0.3")
    if not qp.budget_edit.isReadOnly():
        qp.budget_edit.setText("1")
    if qp.answer():
        wait_for(lambda: not qp.runner.busy)
    else:
        print("query not answered:", qp.error_label.text())
    shot(win, "11_query_desk.png")

    # 12 Help: the glossary at a measure
    dlg = open_help(win, "glossary.md")
    dlg.resize(900, 700)
    pump(0.3)
    dlg.show_term("rl")  # after the resize: the heading at the top of the laid-out text
    shot(dlg, "12_help_glossary.png")
    dlg.close()

    win.state.mark_dirty(False)
    win.shutdown()


if __name__ == "__main__":  # sweeps start child processes that import this module
    main()
