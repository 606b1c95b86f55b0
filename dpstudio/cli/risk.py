"""``dpstudio risk IN``: re-identification risk of a file with categorical keys (sdcMicro's
measures, SUDA2, ARX's models).
"""

from __future__ import annotations

import argparse
from typing import Any

from dpstudio.cli._common import parse_roles, parse_types, read_input, read_options
from dpstudio.cli._options import add_io_options, add_type_option
from dpstudio.cli._output import fmt, print_json

NAME = "risk"
SUMMARY = (
    "re-identification risk of a file with categorical keys "
    "(sdcMicro's f_k, F_k, individual/global/household risk, l-diversity)"
)

_RISK_KEY_ROLES = {"k-quasi", "eps-quasi", "key", "quasi", "quasi-identifier"}
_RISK_ROLES = _RISK_KEY_ROLES | {"confidential", "sensitive", "weight", "household", "identifier", "other"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``risk`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("input", metavar="IN")
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="k-quasi (key), confidential, weight, household, identifier, other (repeatable)",
    )
    add_type_option(
        p, "column type: categorical, ordinal, numeric, date (keys are always compared as categories here)"
    )
    p.add_argument("--weight", metavar="COL", help="sampling weight column")
    p.add_argument("--household", metavar="COL", help="household (cluster) id column")
    p.add_argument(
        "--missing",
        choices=("any", "category"),
        default="any",
        help="a missing key value matches any value (sdcMicro, default) or is a category",
    )
    p.add_argument(
        "--threshold",
        type=float,
        help="also count records with individual risk above this (and the threshold of ARX's models, default 0.2)",
    )
    p.add_argument(
        "--suda", action="store_true", help="also SUDA2 special-uniques and DIS scores (sdcMicro's suda2)"
    )
    p.add_argument(
        "--suda-dis-fraction", metavar="F", help="sampling fraction of the DIS score, in (0, 1) (0.01)"
    )
    p.add_argument("--suda-max-size", metavar="K", help="largest MSU size searched (default: all keys)")
    p.add_argument(
        "--per-record",
        metavar="FILE.csv",
        help="write f_k, F_k and risks (with --suda: suda_score, suda_dis) per record to a private file (mode 0600)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_io_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Re-identification risk of a file with categorical keys (sdcMicro's measures)."""
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.measures.reid_models import ARX_DEFAULT_THRESHOLD
    from dpstudio.engine.measures.survey_risk import assess_risk

    plan = None
    if args.per_record:  # checked before any work
        from dpstudio.engine.safe_write import WritePlan

        plan = WritePlan(inputs=[args.input])
        plan.file(args.per_record, what="per-record risk file (--per-record)", private=True)
        plan.check()
    df, _ = read_input(args.input, read_options(args))
    roles = parse_roles(args.role)
    for col, role in roles.items():
        if role not in _RISK_ROLES:
            raise ParameterError(
                f"--role {col}={role}: unknown role; use one of {', '.join(sorted(_RISK_ROLES))}"
            )
    from dpstudio.engine.roles import normalize_types

    normalize_types(df.columns, parse_types(args.type))  # names the column / type
    weight = args.weight or next((c for c, r in roles.items() if r == "weight"), None)
    household = args.household or next((c for c, r in roles.items() if r == "household"), None)
    keys = [c for c, r in roles.items() if r in _RISK_KEY_ROLES]
    sens = [c for c, r in roles.items() if r in ("confidential", "sensitive")]
    if not keys:
        raise ParameterError("name the key variables: --role COL=k-quasi (repeatable)")
    if args.threshold is not None and not 0.0 <= args.threshold <= 1.0:  # also refuses nan
        raise ParameterError(
            f"--threshold must be a risk in the range [0, 1]. Got {args.threshold!r} instead."
        )
    suda = args.suda or args.suda_dis_fraction is not None or args.suda_max_size is not None
    rep = assess_risk(
        df,
        keys,
        weight=weight,
        household=household,
        sensitive=sens,
        missing=args.missing,
        reid_threshold=ARX_DEFAULT_THRESHOLD if args.threshold is None else args.threshold,
        suda=suda,
        suda_dis_fraction=0.01 if args.suda_dis_fraction is None else args.suda_dis_fraction,
        suda_max_size=args.suda_max_size,
    )
    out = rep.to_dict()
    if args.threshold is not None:
        out["records_risk_above_threshold"] = {
            "threshold": args.threshold,
            "records": rep.records_above(args.threshold),
        }
    if args.per_record:  # private (0600): computed from the original records; the app's export too
        from dpstudio.engine.measures.survey_risk import write_per_record_risk

        write_per_record_risk(rep, args.per_record, protect=(args.input,), plan=plan)
    if args.json:
        print_json(out)
        return 0
    for k, v in out.items():
        print(f"{k}: {fmt(v)}")
    return 0
