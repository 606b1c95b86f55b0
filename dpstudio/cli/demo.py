"""``dpstudio demo``: ir-dp on the bundled Census sample (also what ``dpstudio`` runs when the
desktop app cannot start).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dpstudio.cli._common import SEED_HELP, assess_result, read_input, seed_arg
from dpstudio.cli._output import report_warnings

NAME = "demo"
SUMMARY = "run ir-dp on the bundled Census sample"

#: The sample's attributes the demo protects.
DEMO_COLUMNS = ("FICA", "FEDTAX", "INTVAL", "POTHVAL")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``demo`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=seed_arg, default=None, help=SEED_HELP)
    return p


def demo_path() -> Path:
    """The bundled Census sample."""
    import dpstudio

    return Path(dpstudio.__file__).resolve().parent.parent / "resources" / "census.csv"


def run(args: argparse.Namespace) -> int:
    """Protect the sample with ir-dp and print the guarantee, the headline measures and the
    run's warnings and private notes (each on a line of its own, after the summary).
    """
    from dpstudio import engine
    from dpstudio.engine.errors import InputError

    path = demo_path()
    if not path.exists():
        raise InputError(f"The bundled sample {path} is missing; reinstall dpstudio.")
    df, _ = read_input(str(path))
    cols = list(DEMO_COLUMNS)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(f"The bundled sample lacks column(s) {', '.join(missing)}.")
    # The papers' convention for the demo only: [0, 1.5 × max]. For a real release
    # declare domains from knowledge of the population, not from the file.
    domains = {c: (0.0, 1.5 * float(df[c].max())) for c in cols}
    k, eps = args.k, args.epsilon
    res = engine.protect(
        df, "ir-dp", {c: "eps-quasi" for c in cols}, domains, seed=args.seed, k=k, epsilon=eps
    )
    a = assess_result(res, level="summary")
    m = a.measures if a is not None else None
    print(
        f"dpstudio demo: individual ranking + Laplace (ir-dp) on the bundled Census sample "
        f"({len(df)} records), attributes {', '.join(cols)}, k={k}, ε={eps:g}."
    )
    print(
        "(Demo only: domains are [0, 1.5 × max of the file], the papers' convention; "
        "declare real domains for a release.)"
    )
    print(f"Guarantee: {res.guarantee}")
    if m:
        print(f"SSE raw {m['sse_raw']:.4g}; SSE normalized {m['sse_normalized']:.4g}; RL {m['rl']:.3g} %")
    report_warnings(res.public_warnings, res.private_notes)  # stdout flushed first: own lines
    return 0
