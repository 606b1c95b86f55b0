"""``dpstudio sweep IN --out FILE.csv``: the risk-utility trade-off over a grid of k and ε."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from dpstudio.cli._common import apply_declared_types, parse_floats, parse_ints, parse_list, read_input
from dpstudio.cli._options import add_method_options

NAME = "sweep"
SUMMARY = "trade-off sweep over k and ε"

#: Repetitions per grid point when neither --repeats nor the recipe gives them.
DEFAULT_REPEATS = 10

#: The measures printed for each point (the CSV holds every measure).
PRINTED = ("sse_normalized", "sse_raw", "rl", "suppressed_cells", "expected_reidentifications")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``sweep`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("input", metavar="IN")
    add_method_options(p, sweep=True)
    p.add_argument("--repeats", type=int, default=None, help="repetitions per point (default 10)")
    p.add_argument(
        "--measures", help="measures (default: sse,rl; for local-suppression suppressed,reid,freq,kanon)"
    )
    p.add_argument("--no-baselines", action="store_true", help="skip the noise-free baselines")
    p.add_argument("--out", required=True, metavar="FILE.csv")
    return p


def run(args: argparse.Namespace) -> int:
    """Run every (k, ε) point of the grid, writing the CSV after each point."""
    import pandas as pd

    from dpstudio import engine
    from dpstudio.cli._settings import save_recipe, settings, write_plan
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.io import write_table
    from dpstudio.engine.registry import get_method

    s = settings(args, NAME)
    if s.sweep["repeats"] is None:
        s.sweep["repeats"] = DEFAULT_REPEATS
    k_grid, eps_grid, repeats = s.sweep["ks"], s.sweep["epsilons"], s.sweep["repeats"]
    plan = write_plan(args, s, args.input)
    out = plan.file(args.out, what="sweep CSV (--out)", private=True)  # measured against the original
    plan.check()  # before any work
    assert s.method is not None  # settings() refuses a sweep without a method
    spec = get_method(s.method)
    if spec.uses_k and k_grid is None:
        raise ParameterError(f"Method {spec.id!r} uses k: give --k (e.g. --k 2:100 or --k 2,5,10).")
    if spec.uses_epsilon and eps_grid is None:
        raise ParameterError(f"Method {spec.id!r} uses ε: give --epsilon (e.g. --epsilon 0.01,0.1,1,10).")
    ks = parse_ints(k_grid) if (spec.uses_k and k_grid is not None) else []
    eps = parse_floats(eps_grid) if (spec.uses_epsilon and eps_grid is not None) else []
    from dpstudio.engine.sweeps import check_repeats

    check_repeats(repeats, "--repeats")
    df, in_meta = read_input(args.input, s.read_options)
    s.types = apply_declared_types(s.types, s.roles, in_meta, os.path.basename(args.input))
    from dpstudio.engine.measures import default_measures

    measures = tuple(parse_list(args.measures) or default_measures(spec.id))
    gen = engine.sweep(
        df,
        spec.id,
        s.roles,
        s.domains,
        ks=ks,
        epsilons=eps,
        repeats=repeats,
        seed=s.seed,
        measures=measures,
        baselines=not args.no_baselines,
        hierarchies={c: h["path"] for c, h in s.hierarchies.items()} or None,
        precision=s.precision or None,
        types=s.types or None,
        keep_household=bool(args.keep_household),
        **s.params,
    )
    rows = []
    for pt in gen:
        rows.append(pt.as_row())
        if pt.skipped:
            print(
                f"[{pt.index + 1}/{pt.total}] k={pt.k} epsilon={pt.epsilon}: skipped, the "
                f"method cannot run there: {pt.skipped}",
                file=sys.stderr,
                flush=True,
            )
            continue
        vals = ", ".join(f"{n}={m:.4g}" for n, (m, _sd) in pt.values.items() if n in PRINTED)
        eps_s = "none (baseline)" if pt.epsilon is None else f"{pt.epsilon:g}"
        print(
            f"[{pt.index + 1}/{pt.total}] k={pt.k} epsilon={eps_s} repeats={pt.repeats}: {vals} "
            f"({pt.elapsed:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        # rewrite after every point (atomically): an interrupted sweep keeps what it computed
        write_table(pd.DataFrame(rows), out, "csv", plan=plan)
    print(f"{len(rows)} point(s) written to {out}")
    save_recipe(args, s, plan, NAME)
    return 0
