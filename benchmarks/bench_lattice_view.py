"""The drawn OLA lattice (issue 24): CPU time of filling the canvas from a lattice frame and of
one paint, on lattices of a few hundred to ~50,000 nodes, fitted and zoomed in.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_lattice_view.py [--out results/bench_lattice_view.txt]

Everything here runs on the GUI thread (the frame itself is computed in a worker), so each
figure is a time the window cannot react.  CPU time (``time.process_time``: the machine is
shared); the median of ``--repeats`` paints.  The frame is synthetic (every node, states at
random, one chosen): the canvas's cost depends on the number of nodes and edges, not on the data.
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
from PySide6.QtCore import QPoint, QPointF, Qt  # noqa: E402
from PySide6.QtGui import QWheelEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
app = QApplication.instance() or QApplication(sys.argv)

from dpstudio import __version__  # noqa: E402
from dpstudio.app.widgets.lattice_view import LatticeCanvas  # noqa: E402

SHAPES = [(4, 4, 4, 4), (6, 6, 6, 6, 2), (5, 5, 5, 5, 5), (6, 6, 6, 6, 6, 6)]


def frame(heights: tuple[int, ...], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = int(np.prod(heights))
    lv = np.stack(np.unravel_index(np.arange(n), heights), axis=1)
    t = pd.DataFrame(lv, columns=[f"c{j}" for j in range(len(heights))])
    within = lv.sum(axis=1) >= rng.integers(0, sum(heights), n)
    t["suppressed"] = rng.integers(0, 500, n)
    t["within limit"] = within
    t["loss"] = np.where(within, rng.random(n), np.nan)
    t["chosen"] = False
    t.loc[int(np.flatnonzero(within)[0]), "chosen"] = True
    return t


def paint_s(c: LatticeCanvas, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        c.repaint()
        app.processEvents()
        out.append(time.process_time() - t0)
    return float(np.median(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_lattice_view.txt"))
    a = ap.parse_args()
    lines = [
        f"bench_lattice_view  dpstudio {__version__}  Python {platform.python_version()}  "
        f"{platform.machine()}  (CPU s, canvas 900x560, median of {a.repeats} paints)",
        f"{'heights':>22} {'nodes':>7} {'edges':>7} {'fill':>7} {'paint fit':>10} {'paint zoom×8':>13}",
    ]
    for shape in SHAPES:
        t = frame(shape)
        c = LatticeCanvas()
        c.resize(900, 560)
        c.show()
        app.processEvents()
        t0 = time.process_time()
        c.set_frame(t, [f"c{j}" for j in range(len(shape))])
        fill = time.process_time() - t0
        fit = paint_s(c, a.repeats)
        centre = QPointF(450, 280)
        ev = QWheelEvent(
            centre,
            c.mapToGlobal(centre),
            QPoint(0, 0),
            QPoint(0, int(120 * np.log(8) / np.log(1.25))),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        c.wheelEvent(ev)
        zoom = paint_s(c, a.repeats)
        lines.append(
            f"{'×'.join(map(str, shape)):>22} {len(c.nx):>7,} {len(c.edges):>7,} {fill:>7.3f} {fit:>10.3f} {zoom:>13.3f}"
        )
        print(lines[-1], flush=True)
        c.close()
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
