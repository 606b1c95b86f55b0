#!/usr/bin/env python3
"""Whole-process ``dpstudio protect`` on Adult × 10 (issue 12): old (a git ref, default ``main``)
against new (this working tree), back to back, best of N, with the load average next to each
figure (the machine is shared).

The command is the one ARX is compared with: k-eps / OLA, k = 5, at most 5 % suppression, the 8
quasi-identifiers ARX uses (all but ``occupation``) with the bundled ARX hierarchies; input
``benchmarks/make_adult_copies.py 10`` (302,000 records, CSV).  Each run is a fresh
``python3 -m dpstudio`` process (imports included), timed from outside.  The releases of old
and new are compared byte for byte (the seed is pinned here only so that they can be).

Usage::

    python benchmarks/bench_cli_adult10.py [--old-ref main] [--repeat 3] [--copies 10]
        [--out results/bench_cli_adult10.txt]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QI8 = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex", "workclass"]


def load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def protect_args(src: str, out: str, hier: Path) -> list[str]:
    args = ["protect", src, out, "--method", "k-eps", "--k", "5", "--suppression", "0.05", "--seed", "7"]
    for c in QI8:
        args += ["--role", f"{c}=k-quasi", "--hierarchy", f"{c}={hier / f'adult_hierarchy_{c}.csv'}"]
    return args


def run(code: Path, args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(code), QT_QPA_PLATFORM="offscreen")
    where = subprocess.run(
        [sys.executable, "-c", "import dpstudio; print(dpstudio.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=code.parent,
    ).stdout.strip()
    assert Path(where).resolve().is_relative_to(code.resolve()), f"{where} is not from {code}"
    t0 = time.perf_counter()
    # cwd: 'python -m' puts the working folder first on sys.path; it must not shadow PYTHONPATH
    subprocess.run(
        [sys.executable, "-m", "dpstudio", *args], env=env, check=True, capture_output=True, cwd=code.parent
    )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-ref", default="main")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    old_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", a.old_ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    new_commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old" / "src"
        old.mkdir(parents=True)
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", a.old_ref], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=arch.stdout, check=True)
        src = os.path.join(tmp, f"adult{a.copies}.csv")
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "make_adult_copies.py"), str(a.copies), src],
            check=True,
        )
        hier = ROOT / "resources" / "adult" / "hierarchies"
        times: dict[str, list[tuple[float, str]]] = {"old": [], "new": []}
        outs = {k: os.path.join(tmp, f"{k}.csv") for k in times}
        for _ in range(a.repeat):  # interleaved: old, new, old, new, ...
            for k, code in (("old", old), ("new", ROOT)):
                before = load()
                t = run(code, protect_args(src, outs[k], hier))
                times[k].append((t, before))
                print(f"{k}: {t:.2f} s (load {before})", flush=True)
        same = Path(outs["old"]).read_bytes() == Path(outs["new"]).read_bytes()
    lines = [
        f"# bench_cli_adult10: dpstudio protect adult{a.copies}.csv (k-eps/OLA, k=5, 5 % suppression, "
        "8 QIs with ARX hierarchies), whole process",
        f"# old = {a.old_ref} ({old_commit}), new = {new_commit}; best of {a.repeat}, interleaved; "
        f"{os.cpu_count()} cores (shared)",
        "version  best_s  runs_s (load avg 1/5/15 min before each run)",
    ]
    for k in ("old", "new"):
        best = min(t for t, _ in times[k])
        runs = "; ".join(f"{t:.2f} ({ld})" for t, ld in times[k])
        lines.append(f"{k:<7}  {best:6.2f}  {runs}")
    lines.append(f"releases byte-identical: {same}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
