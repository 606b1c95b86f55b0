"""The step-list screenshots of docs/walkthrough.md §8b (offscreen):
``python3 docs/screenshots/make_chain_screenshots.py docs/screenshots``."""

import os
import sys
import tempfile
import time

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp()
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
import dpstudio.app
from PySide6.QtWidgets import QApplication

app = QApplication(sys.argv)
from dpstudio.app.main_window import MainWindow

win = MainWindow(offer_recovery=False)
win.resize(1500, 1000)
win.show()


def wait_until(cond, t=120):
    t0 = time.time()
    while not cond() and time.time() - t0 < t:
        app.processEvents()
        time.sleep(0.02)
    for _ in range(30):
        app.processEvents()


win.controller.open_free1_sample()
wait_until(lambda: win.state.df is not None and not any(r.busy for r in win.controller.runners))
st = win.state
st.set_role("INCOME", "eps-quasi")
st.set_domain("INCOME", (0.0, 1_000_000.0))
win.tabs.setCurrentIndex(2)
win.method_splitter.setSizes([760, 740])
p = win.step_panel
win.method_panel.select_method("local-suppression")
win.method_panel.set_values({"k": 3})
p.add_current_method()
win.method_panel.select_method("ir-dp")
win.method_panel.set_values({"k": 10, "epsilon": 1.0})
p.add_current_method()
p.run_chain()
wait_until(lambda: p.run is not None and len(p.run) == 2 and not p.runner.busy)
p.list.setCurrentRow(1)
for i, name in enumerate(
    [
        "13_chain_after_every_step",
        "14_chain_before_after",
        "15_chain_weighted_estimates",
        "16_chain_pipeline_log",
    ]
):
    p.tabs.setCurrentIndex(i)
    wait_until(lambda: True, 0.2)
    p.grab().save(os.path.join(out, name + ".png"))
print(p.status.text())
print(p.log.toPlainText())
# undo
p.undo()
wait_until(lambda: True, 0.2)
p.tabs.setCurrentIndex(0)
wait_until(lambda: True, 0.2)
p.grab().save(os.path.join(out, "17_chain_after_undo.png"))
print("after undo:", p.status.text())
win.state.mark_dirty(False)
