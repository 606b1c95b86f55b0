"""airspeed velocity (asv) benchmarks: the issue-13 figures tracked across commits.

Each class wraps one case of the scripts in ``benchmarks/`` (which keep writing their tables
to ``results/``): MDAV on Census and on 100,000 × 5, the reduced Census sweep (with the time
to its first point), the command line's start-up (``--version`` and ``protect`` on Census,
each a fresh interpreter), OLA on Adult (ARX's set-up, per metric) and Laplace noise on
100,000 × 10.  Data come from the repository's ``resources/`` (the working tree, not the
commit measured) or are synthetic and seeded.  Run ``asv run`` / ``asv continuous --factor
1.2 main HEAD`` from the repository root (CONTRIBUTING.md, "Benchmarks").
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "resources"
CENSUS = RESOURCES / "census.csv"
ADULT = RESOURCES / "adult"
ADULT_QI8 = ["age", "education", "marital-status", "native-country", "race", "salary-class", "sex",
             "workclass"]


def _gamma_table(n: int, m: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = np.round(rng.gamma(shape=2.0, scale=1000.0, size=(n, m)))
    return pd.DataFrame(X, columns=[f"A{i}" for i in range(m)])


def _mdav():
    try:
        from dpstudio.engine.algorithms.microaggregation import mdav
    except ImportError:   # older layouts
        from dpstudio.engine.microaggregation import mdav
    return mdav


class MDAV:
    """MDAV (k = 5) on Census 1,080 × 13 and on 100,000 × 5 synthetic records."""

    params = (["census", "100k"],)
    param_names = ["data"]
    timeout = 300

    def setup(self, data):
        self.mdav = _mdav()
        if data == "census":
            self.X = pd.read_csv(CENSUS).to_numpy(dtype=float)
        else:
            self.X = _gamma_table(100_000, 5).to_numpy()
        # load (and on a first run compile) the kernel outside the timing: the 100k case
        # then measures a long-running process, as benchmarks/bench_mdav.py's medians do
        self.mdav(self.X if data == "100k" else self.X[:50], 5)

    def time_mdav_k5(self, data):
        self.mdav(self.X, 5)


class CensusSweep:
    """The Census ir-dp sweep, reduced: k = 2…20, 4 ε, 2 repetitions, SSE + RL (76 points)."""

    timeout = 600
    number = 1
    repeat = 3

    def setup(self):
        from dpstudio import engine

        self.engine = engine
        self.df = pd.read_csv(CENSUS)
        self.cols = list(self.df.columns)
        self.domains = {c: (0.0, 1.5 * float(self.df[c].max())) for c in self.cols}

    def _points(self):
        return self.engine.sweep(self.df, "ir-dp", {c: "eps-quasi" for c in self.cols},
                                 self.domains, ks=range(2, 21), epsilons=[0.01, 0.1, 1.0, 10.0],
                                 repeats=2, seed=7, measures=("sse", "rl"))

    def time_sweep(self):
        for _ in self._points():
            pass

    def track_first_point_seconds(self):
        t0 = time.perf_counter()
        for _ in self._points():
            return time.perf_counter() - t0
        return float("nan")

    track_first_point_seconds.unit = "seconds"


class StartUp:
    """The command line in a fresh interpreter: ``dpstudio --version`` and ``dpstudio
    protect`` on Census (ir-dp, one attribute), whole process."""

    number = 1
    repeat = 5
    timeout = 120

    def setup(self):
        self.tmp = tempfile.mkdtemp()
        # the checkout this benchmark process imports (ASV_PYTHONPATH, the editable install):
        # the subprocess must start that one too, not whatever the interpreter finds
        import dpstudio

        src = str(Path(dpstudio.__file__).resolve().parents[1])
        self.env = {**os.environ, "PYTHONPATH": src}
        # as after a normal install: bytecode compiled once and cached (an environment with
        # PYTHONDONTWRITEBYTECODE=1 recompiles every dpstudio module in every run: +0.1-0.2 s)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        import compileall

        compileall.compile_dir(str(Path(src) / "dpstudio"), quiet=1)

    def time_version(self):
        subprocess.run([sys.executable, "-m", "dpstudio", "--version"], check=True,
                       capture_output=True, env=self.env)

    def time_protect_census(self):
        subprocess.run([sys.executable, "-m", "dpstudio", "protect", str(CENSUS),
                        os.path.join(self.tmp, "out.csv"), "--method", "ir-dp", "--k", "10",
                        "--epsilon", "1", "--role", "FICA=eps-quasi", "--domain", "FICA=0:12000",
                        "--seed", "7"], check=True, capture_output=True, cwd=self.tmp,
                       env=self.env)


class OLAAdult:
    """OLA on Adult (ARX's hierarchies, 8 QIs, k = 5, ≤ 5 % suppressed), per utility metric;
    1 and 10 copies of every record; discernibility and AECS also with the compiled search
    (issue 13: ``DPSTUDIO_OLA_KERNEL=1``; the numpy search otherwise)."""

    params = (["precision", "loss", "discernibility", "aecs", "entropy"], [1, 10], ["numpy", "compiled"])
    param_names = ["metric", "copies", "search"]
    timeout = 300

    def setup(self, metric, copies, search):
        if search == "compiled" and metric not in ("discernibility", "aecs"):
            raise NotImplementedError("no compiled search for this metric")
        os.environ.pop("DPSTUDIO_OLA_NUMPY", None)
        os.environ.pop("DPSTUDIO_OLA_KERNEL", None)
        os.environ["DPSTUDIO_OLA_NUMPY" if search == "numpy" else "DPSTUDIO_OLA_KERNEL"] = "1"
        try:  # OLA's module since issue 22 §6; generalization.py before
            from dpstudio.engine.algorithms import ola as ola_module
        except ImportError:
            from dpstudio.engine.algorithms import generalization as ola_module
        ola = ola_module.ola
        from dpstudio.engine.hierarchies.hierarchy import load_hierarchy

        if search == "compiled" and not hasattr(ola_module, "_ola_kernel"):
            raise NotImplementedError("a commit before the compiled search")
        self.ola = ola
        df = pd.read_csv(ADULT / "adult.csv", sep=";")
        self.df = pd.concat([df] * copies, ignore_index=True) if copies > 1 else df
        self.hs = {c: load_hierarchy(str(ADULT / "hierarchies" / f"adult_hierarchy_{c}.csv"), c)
                   for c in ADULT_QI8}
        # an older commit without this metric: NotImplementedError skips the case
        try:
            self.ola(self.df.iloc[:200], ADULT_QI8, 2, hierarchies=self.hs, loss=metric)
        except Exception as e:
            if type(e).__name__ == "ParameterError":
                raise NotImplementedError(metric) from e
            raise

        self.ola(self.df, ADULT_QI8, 5, hierarchies=self.hs, suppression=0.05, loss=metric)  # loads

    def time_ola(self, metric, copies, search):
        self.ola(self.df, ADULT_QI8, 5, hierarchies=self.hs, suppression=0.05, loss=metric)


class Laplace:
    """``laplace`` through the engine on 100,000 × 10 synthetic records (ε = 1)."""

    timeout = 300

    def setup(self):
        from dpstudio import engine

        self.engine = engine
        self.df = _gamma_table(100_000, 10)
        self.cols = list(self.df.columns)
        self.domains = {c: (0.0, 1.5 * float(self.df[c].max())) for c in self.cols}

    def time_laplace_100k_x10(self):
        self.engine.protect(self.df, "laplace", {c: "eps-quasi" for c in self.cols},
                            domains=self.domains, epsilon=1.0, seed=7)


class MDAVProtect:
    """``engine.protect(census, "mdav", k=5)``, the whole call (issue 27 §2: the fixed
    overhead around the clustering -- validation, guarantee, copies, digest, keyed shuffle).
    ``time_mdav_labels`` is the clustering alone on the same table, so the difference of the
    two is the overhead (benchmarks/bench_mdav_overhead.py prints it, with sdcMicro)."""

    def setup(self):
        from dpstudio import engine

        self.engine = engine
        self.df = pd.read_csv(CENSUS)
        self.roles = {c: "k-quasi" for c in self.df.columns}
        self.X = np.ascontiguousarray(self.df.to_numpy(dtype=np.float64))
        self.mdav = _mdav()
        self.mdav(self.X, 5)
        self.engine.protect(self.df, "mdav", roles=self.roles, k=5, seed=1)

    def time_protect_census_k5(self):
        self.engine.protect(self.df, "mdav", roles=self.roles, k=5, seed=1)

    def time_mdav_labels(self):
        self.mdav(self.X, 5)


def _child_peak(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of a child process (wait4)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise RuntimeError(f"failed: {' '.join(cmd)}")
    return time.perf_counter() - t0, ru.ru_maxrss / 1024.0


class LargeCSV:
    """Large CSVs through the command line (issue 27 §1), each a fresh process:
    ``k-eps`` on Adult × 10 (301,620 records, ARX's 8 QIs and hierarchies, k = 50, ≤ 5 %,
    precision, ``--no-measures``) and ``laplace`` on 1,000,000 × 10 numbers; the ratio to
    the floor (a fresh Python process reading and writing the same file with pyarrow, timed
    in the same round) and the child's peak memory are tracked too.  (benchmarks/bench_cli_large.py runs the full-size cases:
    Adult × 100 and 10,000,000 × 10, with ARX.)"""

    params = (["keps", "laplace"],)
    param_names = ["case"]
    number = 1
    repeat = 3
    timeout = 900

    def setup(self, case):
        import dpstudio

        self.tmp = tempfile.mkdtemp()
        src = str(Path(dpstudio.__file__).resolve().parents[1])
        self.env = {**os.environ, "PYTHONPATH": src}
        d = Path(self.tmp)
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import bench_cli_large as B

        self.B = B
        if case == "keps":
            self.src, self.sep = d / "adult10.csv", ";"
            B.make_adult(10, self.src)
            self.args = B.protect_args("keps", self.src, d / "out.csv")
            self.args[self.args.index("--k") + 1] = "50"
        else:
            self.src, self.sep = d / "numbers1000000.csv", ","
            B.make_numbers(1_000_000, self.src)
            self.args = B.protect_args("laplace", self.src, d / "out.csv")
        self.cmd = [sys.executable, "-m", "dpstudio", *self.args]

    def teardown(self, case):
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)

    def time_protect_process(self, case):
        _child_peak(self.cmd, self.env)

    def track_ratio_to_pyarrow_floor(self, case):
        floor, _ = _child_peak(
            [sys.executable, "-c", self.B.FLOOR, str(self.src), os.path.join(self.tmp, "floor.csv"), self.sep],
            self.env,
        )
        wall, _ = _child_peak(self.cmd, self.env)
        return wall / floor

    track_ratio_to_pyarrow_floor.unit = "ratio"

    def track_peak_rss_mb(self, case):
        return _child_peak(self.cmd, self.env)[1]

    track_peak_rss_mb.unit = "MB"
