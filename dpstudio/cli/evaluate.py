"""``dpstudio evaluate ORIGINAL PROTECTED``: utility and risk measures of a protected file
(in memory, or on Dask with ``--engine dask``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dpstudio.cli import _dask
from dpstudio.cli._common import parse_list, read_input
from dpstudio.cli._options import add_recipe_options, add_type_option
from dpstudio.cli._output import fmt, print_json, warn

if TYPE_CHECKING:
    from dpstudio.engine.recipe import Recipe

NAME = "evaluate"
SUMMARY = "utility and risk measures of a protected file"

#: The measures of ``evaluate`` when --measures is not given.
DEFAULT_MEASURES = ("sse", "rl", "delta", "corr")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``evaluate`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        NAME,
        help=SUMMARY,
        description="Compares record j of PROTECTED with record j of ORIGINAL. Releases are in "
        "random order by default (every method) and some methods suppress records: such a "
        "release is not aligned with its input; its measures are in the summary and the "
        "private assessment of 'protect', or protect with --order input for a comparison.",
    )
    p.add_argument("original", metavar="ORIGINAL")
    p.add_argument("protected", metavar="PROTECTED")
    p.add_argument(
        "--attributes", help="comma-separated columns to compare (default: the numeric columns in both files)"
    )
    p.add_argument(
        "--measures",
        help="comma-separated: sse, rl, delta, corr (default), il1s, "
        "eigen, freq, suppressed, reid, classification",
    )
    p.add_argument(
        "--keys",
        help="comma-separated categorical key variables (freq, suppressed, "
        "reid; default: k-quasis typed categorical or holding text)",
    )
    p.add_argument("--weight", metavar="COL", help="sampling weight column (reid)")
    add_type_option(p, "column type: numeric, categorical, ordinal, date (repeatable)")
    p.add_argument(
        "--class-attribute",
        metavar="COL",
        help="classification: the attribute to predict (random forest, paper 001 §4.2)",
    )
    p.add_argument(
        "--binarise",
        metavar="median|mean|NUMBER",
        help="classification: how a numeric class attribute is made binary (default median)",
    )
    p.add_argument(
        "--classification-seed", type=int, default=0, help="classification: the forests' seed (default 0)"
    )
    p.add_argument("--confidential", help="comma-separated confidential columns (correlation loss)")
    p.add_argument("--rl-distance", choices=("standardized", "raw"), default="standardized")
    p.add_argument(
        "--method",
        help="method id the release was made with (its measurement "
        "policy: k-eps measures generalised numeric k-quasis 0/1)",
    )
    add_recipe_options(p)
    p.add_argument(
        "--role", action="append", metavar="COL=ROLE", help="role of a column in the release (repeatable)"
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        metavar="COL=FILE",
        help="hierarchy of a column: its semantic distance is used (repeatable)",
    )
    p.add_argument("--json", action="store_true")
    _dask.add_dask_options(
        p,
        "memory (default) or dask: Parquet/CSV larger than memory (sse, rl, "
        "delta, corr, reid; pip install 'dpstudio[scale]')",
    )
    p.add_argument(
        "--rl-sample",
        type=int,
        default=100_000,
        metavar="N",
        help="with --engine dask: record linkage on a uniform sample of N records, "
        "reported with its 95 %% confidence interval (default 100000)",
    )
    p.add_argument(
        "--rl-seed",
        type=int,
        default=0,
        help="with --engine dask: the record-linkage sample's seed (default 0)",
    )
    return p


def _measures(args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(parse_list(args.measures) or DEFAULT_MEASURES)


def _print_measures(out: dict[str, Any], skip: tuple[str, ...] = ("warnings",)) -> None:
    for w in out.get("warnings", []):
        warn(w)
    for k, v in out.items():
        if k not in skip:
            print(f"{k}: {fmt(v)}")


def _evaluate_dask(args: argparse.Namespace, s: Recipe) -> int:
    """``evaluate --engine dask`` (issue 12): the measures of evaluate_dask, records paired by
    position as in memory; record linkage on a uniform sample of --rl-sample records.
    """
    from dpstudio.engine.backends import dask_backend as DB
    from dpstudio.engine.backends.dask_measures import DASK_MEASURES, evaluate_dask

    measures = _measures(args)
    unsupported = [
        o
        for o, v in (
            ("--method", s.method),
            ("--hierarchy", s.hierarchies),
            ("--type", s.types),
            ("--class-attribute", args.class_attribute),
        )
        if v
    ]
    bad = [m for m in measures if m not in DASK_MEASURES or m == "kanon"]
    if bad or unsupported:
        raise DB.NotOnDask(
            f"{', '.join(bad + unsupported)}: not on Dask; use --engine memory "
            f"(Dask measures: sse, rl, delta, corr, reid)."
        )
    for inp in (args.original, args.protected):  # one line before any cluster starts
        DB.check_input(inp)
    try:
        with _dask.dask_client(args):  # the default client for dask.compute
            out = evaluate_dask(
                args.original,
                args.protected,
                parse_list(args.attributes),
                measures=measures,
                confidential=parse_list(args.confidential),
                rl_distance=args.rl_distance,
                rl_sample=args.rl_sample,
                rl_seed=args.rl_seed,
                keys=parse_list(args.keys),
                weight=args.weight,
            )
    except KeyboardInterrupt:
        warn("cancelled.")
        return 130
    if args.json:
        print_json(out)
        return 0
    _print_measures(out, skip=("warnings", "rl_label"))
    if "rl_label" in out:
        print(out["rl_label"])
    return 0


def run(args: argparse.Namespace) -> int:
    """Compare ``args.protected`` with ``args.original`` by the engine's measurement policy."""
    from dpstudio import engine
    from dpstudio.cli._settings import save_recipe, settings, write_plan
    from dpstudio.engine.errors import ParameterError

    s = settings(args, NAME)
    plan = write_plan(args, s, args.original, args.protected).check()  # --save-recipe: before any work
    if getattr(args, "engine", "memory") == "dask":
        return _evaluate_dask(args, s)

    orig, _ = read_input(args.original)
    prot, _ = read_input(args.protected)
    attrs = parse_list(args.attributes)
    if args.attributes is not None and not attrs:
        raise ParameterError("--attributes: name at least one column (comma-separated).")
    binarise: Any = args.binarise
    if binarise not in (None, "median", "mean"):
        try:
            binarise = float(binarise)
        except ValueError:
            raise ParameterError(
                f"--binarise must be median, mean or a number (the threshold). Got {args.binarise!r}."
            ) from None
    # the engine's measurement policy: the method (a generalising one measures its numeric
    # k-quasis 0/1), the roles and the hierarchies the release was made with
    out = engine.evaluate(
        orig,
        prot,
        attrs,
        confidential=parse_list(args.confidential),
        rl_distance=args.rl_distance,
        method=s.method or None,
        roles=s.roles or None,
        hierarchies={c: h["path"] for c, h in s.hierarchies.items()} or None,
        measures=_measures(args),
        keys=parse_list(args.keys),
        weight=args.weight,
        class_attribute=args.class_attribute,
        binarise=binarise or "median",
        classification_seed=args.classification_seed,
        types=s.types or None,
    )
    if s.method:
        save_recipe(args, s, plan, NAME)
    if args.json:
        print_json(out)
        return 0
    _print_measures(out)
    return 0
