"""The Attributes (roles) panel on wide files: time to build it for 1,000 / 10,000 / 40,000 columns.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_roles_panel.py [--cols 1000 10000 40000]
        [--rows 50] [--limit 60] [--out results/bench_roles_panel.txt]

Issue 15 ("Freezes"): a 10,000-column CSV froze the UI thread for 55-114 s because the panel
built one combo box per column on the GUI thread.  Measured here: ``AppState.set_data`` (which
makes the panel rebuild its table; column statistics are precomputed, as the loading worker
does) until the panel is shown and painted once, and a scroll to the last row.  All of it runs
on the GUI thread, so the figure is how long the UI cannot react.  ``--limit``: sizes after one
that took longer than this many seconds are skipped (the old panel grows linearly).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["DPSTUDIO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="dps-bench-")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
app = QApplication.instance() or QApplication(sys.argv)

from dpstudio import __version__  # noqa: E402
from dpstudio.app.state import AppState, column_stats  # noqa: E402
from dpstudio.app.widgets.roles_panel import RolesPanel  # noqa: E402


def wide_frame(n_cols: int, n_rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = {}
    for j in range(n_cols):
        kind = j % 3
        if kind == 0:
            data[f"v{j}"] = rng.normal(50, 10, n_rows)
        elif kind == 1:
            data[f"v{j}"] = rng.integers(1, 6, n_rows)  # a code: suggested categorical
        else:
            data[f"v{j}"] = rng.choice(["a", "b", "c"], n_rows)
    return pd.DataFrame(data)


def build_once(n_cols: int, n_rows: int) -> dict:
    df = wide_frame(n_cols, n_rows)
    stats = column_stats(df)
    st = AppState()
    panel = RolesPanel(st)
    panel.resize(1200, 700)
    panel.show()
    app.processEvents()
    t0 = time.perf_counter()
    st.set_data(df, None, stats=stats)
    app.processEvents()
    panel.repaint()
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    view = panel.table
    view.scrollToBottom()
    app.processEvents()
    view.repaint()
    t_scroll = time.perf_counter() - t0
    t0 = time.perf_counter()
    st.set_roles({c: "k-quasi" for c in list(df.columns)[: n_cols // 2]})  # a bulk role change
    app.processEvents()
    view.repaint()
    t_bulk = time.perf_counter() - t0
    panel.close()
    panel.deleteLater()
    st.deleteLater()
    app.processEvents()
    return {"build": t_build, "scroll": t_scroll, "bulk": t_bulk}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, nargs="+", default=[1000, 10000, 40000])
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_roles_panel.txt"))
    args = ap.parse_args()
    lines = [
        f"dpstudio {__version__} roles-panel benchmark — {time.strftime('%Y-%m-%d %H:%M')} — "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"Qt platform {os.environ.get('QT_QPA_PLATFORM')}"
    ]
    slow = False
    for n in args.cols:
        if slow:
            lines.append(f"{n:>7,} columns: skipped (a smaller size took over {args.limit:g} s)")
            continue
        r = build_once(n, args.rows)
        lines.append(
            f"{n:>7,} columns: panel built and painted in {r['build']:.3f} s; scroll to the last "
            f"row {r['scroll'] * 1000:.0f} ms; half the columns made k-quasi at once {r['bulk']:.3f} s"
        )
        print(lines[-1], flush=True)
        slow = r["build"] > args.limit
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
