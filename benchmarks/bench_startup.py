"""Whole-process start-up of the command line (issue 13): ``dpstudio --version`` and
``dpstudio protect`` on the bundled Census sample (ir-dp, one attribute; the asv case
``StartUp.time_protect_census``), next to the floor every run pays: the interpreter and
``import numpy, pandas``.  Ten runs each in fresh interpreters; median and min wall time.

Measured as after a normal install: the dpstudio bytecode is compiled once first and
``PYTHONDONTWRITEBYTECODE`` is removed from the children's environment (with it set, every run
recompiles every dpstudio module it imports, ≈ 0.1–0.2 s more).

    python3 benchmarks/bench_startup.py [--runs 10] [--out results/bench_startup.txt]
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CENSUS = ROOT / "resources" / "census.csv"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    compileall.compile_dir(str(ROOT / "dpstudio"), quiet=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = tempfile.mkdtemp(prefix="dpstudio-startup-")

    def timed(cmd: list[str]) -> tuple[float, float]:
        ts = []
        for _ in range(a.runs):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=out)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts), min(ts)

    py = sys.executable
    cases = [
        ("python -c pass", [py, "-c", "pass"], None),
        ("import numpy, pandas", [py, "-c", "import numpy, pandas"], None),
        ("dpstudio --version", [py, "-m", "dpstudio", "--version"], 0.2),
        (
            "dpstudio protect Census",
            [py, "-m", "dpstudio", "protect", str(CENSUS), os.path.join(out, "out.csv"), "--method", "ir-dp",
             "--k", "10", "--epsilon", "1", "--role", "FICA=eps-quasi", "--domain", "FICA=0:12000", "--seed", "7"],
            0.5,
        ),
    ]
    load0 = os.getloadavg()
    lines = [
        f"dpstudio start-up benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, {a.runs} runs each, bytecode cached;"
        f" load average at start {load0[0]:.2f}",
        f"{'case':28} {'median s':>9} {'min s':>7}  target",
    ]
    for name, cmd, target in cases:
        med, mn = timed(cmd)
        verdict = "" if target is None else f"≤ {target} s: {'PASS' if med <= target else 'FAIL'}"
        lines.append(f"{name:28} {med:9.3f} {mn:7.3f}  {verdict}")
    lines.append(f"load average at end {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
