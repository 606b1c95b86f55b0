#!/usr/bin/env python3
"""Cost of keying every run on its data (issue 21 §3, N3): the data digest of
:mod:`dpstudio.engine.keying` on 1,000,000 × 10 numbers (and text), and ``protect`` (laplace,
ir-dp) on the same data, whose time now includes the digest.

Usage::

    python benchmarks/bench_keying.py                    # 1,000,000 × 10, median of 3
    python benchmarks/bench_keying.py --rows 100000 --repeats 5
    python benchmarks/bench_keying.py --out results/bench_keying.txt

Run it from another checkout (``git archive``) to compare ``protect`` before and after: the
digest lines are skipped where :mod:`dpstudio.engine.keying` does not exist.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--cols", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="also write the lines to this file")
    args = ap.parse_args(argv)

    import numpy as np
    import pandas as pd

    from dpstudio import engine

    rng = np.random.default_rng(1)
    n, m = args.rows, args.cols
    cols = [f"A{i}" for i in range(m)]
    X = np.round(rng.gamma(shape=2.0, scale=1000.0, size=(n, m)))
    floats = pd.DataFrame(X, columns=cols)
    ints = floats.astype(np.int64)
    text = pd.DataFrame({"region": rng.choice([f"R{i:02d}" for i in range(40)], n),
                         "sex": rng.choice(["f", "m"], n)})
    domains = {c: (0.0, 1.5 * float(floats[c].max())) for c in cols}
    roles = {c: "eps-quasi" for c in cols}
    lines = [
        f"bench_keying: {n:,} records x {m} columns, median of {args.repeats} "
        f"({platform.python_implementation()} {platform.python_version()}, numpy {np.__version__}, "
        f"pandas {pd.__version__}; load {os.getloadavg()[0]:.2f})"
    ]
    try:
        from dpstudio.engine.keying import data_digest
    except ImportError:
        data_digest = None
    if data_digest is not None:
        for name, df, cs in (("float64", floats, cols), ("int64", ints, cols), ("text x 2", text, list(text))):
            t = _median_time(lambda df=df, cs=cs: data_digest(df, cs), args.repeats)
            lines.append(f"  data digest, {name:<9}: {t:7.3f} s")
    for method, params in (("laplace", {"epsilon": 1.0}), ("ir-dp", {"k": 10, "epsilon": 1.0})):
        t = _median_time(
            lambda method=method, params=params: engine.protect(
                floats, method, roles, domains, seed=1, **params
            ),
            args.repeats,
        )
        lines.append(f"  protect {method:<8} (digest included where present): {t:7.3f} s")
    text_out = "\n".join(lines) + "\n"
    print(text_out, end="")
    if args.out:
        Path(args.out).write_text(text_out, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
