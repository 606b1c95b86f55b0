#!/usr/bin/env python3
"""Large files through the command line (issue 27.1): whole ``dpstudio protect`` processes
against the floor (reading and writing the same CSV with pyarrow, in the same run) and,
optionally, against ARX, in interleaved rounds, with peak memory and the load average.

Cases (``--cases``, comma-separated):

``keps``
    Adult × 100 (``benchmarks/make_adult_copies.py 100``: 3,016,200 records, 9 columns),
    k-eps / OLA with the bundled ARX hierarchies of the 8 quasi-identifiers ARX uses, k = 500,
    at most 5 % suppression, precision metric, ``--no-measures`` (the issue's command).
``laplace``, ``irdp``
    ``--rows`` × 10 synthetic numbers (default 10,000,000; gamma magnitudes written as
    integers, as bench_engine's ``_synthetic``), every column an ε-quasi-identifier with a
    declared domain; laplace ε = 1, ir-dp k = 10, ε = 1; ``--no-measures``.

Every figure is a fresh process timed from outside (imports included); peak memory is the
child's maximum resident set size (``wait4``).  dpstudio's bytecode is compiled before the
rounds and ``PYTHONDONTWRITEBYTECODE`` removed from the children's environment (as installed:
no run compiles the modules again).  The floor of a case is a fresh Python process
that reads the case's CSV with ``pyarrow.csv.read_csv`` (types inferred) and writes it back
with ``pyarrow.csv.write_csv``; its in-process read + write time is reported too.  Rounds are
interleaved (floor, dpstudio, ARX, floor, ...) so that the load of the shared machine hits all
alike; the table gives medians.  The seed is pinned so that the releases can be compared
between commits; ``--check`` compares them with a reference release.

ARX is not built here (never commit it): give a command template with ``--arx-cmd``, e.g.
``--arx-cmd "java -Xmx4g -cp /tmp/arx/classes:/tmp/arx/lib/... ArxAdult {input} {output}
{hierarchies} 500"`` (a driver reading the CSV, anonymising with k-anonymity(500), 5 %
suppression, the precision metric, and saving the output CSV).  It is timed for the keps case.

Usage::

    python benchmarks/bench_cli_large.py [--cases keps,laplace,irdp] [--repeat 3]
        [--rows 10000000] [--dir /tmp/dpbench] [--arx-cmd CMD] [--out results/bench_cli_large.txt]
        [--threads N]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIER = ROOT / "resources" / "adult" / "hierarchies"
QI8 = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex", "workclass"]

FLOOR = r"""
import sys, time
t0 = time.perf_counter()
import pyarrow.csv as pc
t1 = time.perf_counter()
sep = sys.argv[3]
tb = pc.read_csv(sys.argv[1], parse_options=pc.ParseOptions(delimiter=sep))
t2 = time.perf_counter()
pc.write_csv(tb, sys.argv[2], pc.WriteOptions(delimiter=sep))
t3 = time.perf_counter()
print(f"{t3 - t1:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {tb.num_rows}")
"""


def load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


#: CPU seconds (user + sys) of the last child :func:`run` waited for
LAST_CPU = [0.0]


def run(cmd: list[str], env=None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stdout): fork + wait4 to get this child's peak (and its
    CPU seconds, user + sys, in :data:`LAST_CPU`).
    """
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        os.dup2(w, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.chdir("/")
        try:
            os.execvpe(cmd[0], cmd, env or os.environ)
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    LAST_CPU[0] = ru.ru_utime + ru.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return wall, ru.ru_maxrss / 1024.0, b"".join(chunks).decode()


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            h.update(block)
    return h.hexdigest()


def make_adult(copies: int, path: Path) -> None:
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_adult_copies.py"), str(copies), str(path)],
                       check=True)


def make_numbers(rows: int, path: Path, m: int = 10) -> None:
    """rows × m gamma magnitudes written as integers (bench_engine's _synthetic), in blocks."""
    if path.exists():
        return
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pc

    rng = np.random.default_rng(1)
    tmp = path.with_suffix(".part")
    with pc.CSVWriter(str(tmp), pa.schema([(f"A{i}", pa.int64()) for i in range(m)])) as wr:
        for a in range(0, rows, 1_000_000):
            b = min(rows, a + 1_000_000)
            X = np.round(rng.gamma(shape=2.0, scale=1000.0, size=(b - a, m))).astype(np.int64)
            wr.write_table(pa.table({f"A{i}": X[:, i] for i in range(m)}))
    # pyarrow quotes the header names: write them plain, as the other tools do
    with open(tmp, "rb") as src, open(path, "wb") as dst:
        src.readline()
        dst.write((",".join(f"A{i}" for i in range(m)) + "\n").encode())
        while block := src.read(1 << 24):
            dst.write(block)
    tmp.unlink()


def protect_args(case: str, src: Path, out: Path) -> list[str]:
    if case == "keps":
        a = ["protect", str(src), str(out), "--method", "k-eps", "--k", "500", "--suppression", "0.05",
             "--param", "loss=precision", "--no-measures", "--seed", "7"]
        for c in QI8:
            a += ["--role", f"{c}=k-quasi", "--hierarchy", f"{c}={HIER / f'adult_hierarchy_{c}.csv'}"]
        return a
    a = ["protect", str(src), str(out), "--no-measures", "--seed", "7", "--epsilon", "1"]
    a += ["--method", "laplace"] if case == "laplace" else ["--method", "ir-dp", "--k", "10"]
    for i in range(10):
        a += ["--role", f"A{i}=eps-quasi", "--domain", f"A{i}=0:100000"]
    return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="keps,laplace,irdp")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--dir", default="/tmp/dpbench")
    ap.add_argument("--arx-cmd", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--threads",
        default=None,
        help="DPSTUDIO_THREADS for the dpstudio processes (default: dpstudio's own choice; 1: no threads)",
    )
    a = ap.parse_args()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # dpstudio as installed: its modules' bytecode written once, read by every run (as pip
    # installs it; pyarrow, the floor's only import, comes compiled).  With
    # PYTHONDONTWRITEBYTECODE set (these shells set it) and no up-to-date .pyc, every
    # dpstudio process compiled its ~120 modules again: ~0.4 s of each run (issue 27)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "dpstudio")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    if a.threads is not None:
        env["DPSTUDIO_THREADS"] = str(a.threads)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"benchmarks/bench_cli_large.py at {commit} (+ working tree), {a.repeat} interleaved rounds, "
             f"medians; load average before: {load()}; DPSTUDIO_THREADS={env.get('DPSTUDIO_THREADS', '(default)')}; "
             "bytecode compiled beforehand"]
    for case in a.cases.split(","):
        if case == "keps":
            src, sep = d / f"adult{a.copies}.csv", ";"
            make_adult(a.copies, src)
        else:
            src, sep = d / f"numbers{a.rows}.csv", ","
            make_numbers(a.rows, src)
        out = d / f"out_{case}.csv"
        res: dict[str, list] = {"floor": [], "floor_rw": [], "dpstudio": [], "arx": []}
        cpu: dict[str, list] = {"floor": [], "dpstudio": [], "arx": []}
        loads = []
        for _ in range(a.repeat):
            loads.append(load())
            w, mb, txt = run([sys.executable, "-c", FLOOR, str(src), str(d / "floor.csv"), sep], env)
            res["floor"].append((w, mb))
            cpu["floor"].append(LAST_CPU[0])
            res["floor_rw"].append(float(txt.split()[0]))
            w, mb, txt = run([sys.executable, "-m", "dpstudio", *protect_args(case, src, out)], env)
            res["dpstudio"].append((w, mb))
            cpu["dpstudio"].append(LAST_CPU[0])
            if case == "keps" and a.arx_cmd:
                cmd = a.arx_cmd.format(input=src, output=d / "arx_out.csv", hierarchies=HIER)
                w, mb, txt = run(shlex.split(cmd), env)
                res["arx"].append((w, mb))
                cpu["arx"].append(LAST_CPU[0])
        med = {k: (statistics.median(x for x, _ in v), max(m for _, m in v)) for k, v in res.items()
               if v and k != "floor_rw"}
        rw = statistics.median(res["floor_rw"])
        lines.append("")
        lines.append(f"{case}: {src.name} ({src.stat().st_size / 1e6:.0f} MB); loads per round: {' | '.join(loads)}")
        lines.append(f"  pyarrow read+write, in process: {rw:.2f} s   (whole process {med['floor'][0]:.2f} s, "
                     f"peak {med['floor'][1]:.0f} MB)")
        dp = med["dpstudio"]
        lines.append(f"  dpstudio protect, whole process: {dp[0]:.2f} s = {dp[0] / rw:.1f}x the read+write "
                     f"({dp[0] / med['floor'][0]:.1f}x the floor process), peak {dp[1]:.0f} MB "
                     f"(each round: {', '.join(f'{x:.2f}' for x, _ in res['dpstudio'])})")
        if "arx" in med:
            ax = med["arx"]
            lines.append(f"  ARX 3.9.2, whole process:        {ax[0]:.2f} s, peak {ax[1]:.0f} MB "
                         f"(each round: {', '.join(f'{x:.2f}' for x, _ in res['arx'])}); "
                         f"dpstudio is {ax[0] / dp[0]:.2f}x as fast")
        c = {k: statistics.median(v) for k, v in cpu.items() if v}
        lines.append(
            "  CPU seconds (user + sys, medians): floor process "
            f"{c['floor']:.2f}, dpstudio {c['dpstudio']:.2f} ({c['dpstudio'] / c['floor']:.1f}x)"
            + (f", ARX {c['arx']:.2f}" if "arx" in c else "")
            + f"; release sha256 {_sha256(out)[:16]}"
        )
        print("\n".join(lines[-5:]), flush=True)
    lines.append(f"load average after: {load()}")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
