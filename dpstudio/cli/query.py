"""``dpstudio query FILE QUERY``: answer one statistic under ε-DP by knowledge refinement
(thesis ch. 5), spending ε from a private budget ledger.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpstudio.cli._common import parse_roles, read_input, read_options, seed_arg, split_assign
from dpstudio.cli._options import add_io_options
from dpstudio.cli._output import fmt, print_json, warn

if TYPE_CHECKING:
    from dpstudio.engine import query as qd
    from dpstudio.engine.query_ledger import BudgetLedger
    from dpstudio.engine.safe_write import WritePlan

NAME = "query"
SUMMARY = (
    "answer one statistic under ε-DP by knowledge refinement "
    "(thesis ch. 5), spending ε from a private budget ledger"
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``query`` command and its options."""
    p: argparse.ArgumentParser = subparsers.add_parser(NAME, help=SUMMARY)
    p.add_argument("input", metavar="FILE")
    p.add_argument(
        "query",
        metavar="QUERY",
        help='e.g. "mean(income) where region == 3"; aggregates count, proportion, '
        "mean, sum, median, mode, value (one record); filters use ==, !=, <, <=, "
        ">, >=, in (…), and, or, not; '… by COL' with --groups",
    )
    p.add_argument("--epsilon", required=True, help="ε spent by this answer (> 0)")
    p.add_argument(
        "--prior",
        action="append",
        help="the researcher's prior: uniform (default), normal:MEAN:SD, "
        "histogram:E0,…,Ek:W1,…,Wk, categorical:VALUE=P,…; a multicomponent query takes "
        "one --prior per component, in order (their product is the joint prior)",
    )
    p.add_argument(
        "--mode",
        choices=("joint", "split"),
        help="multicomponent query (thesis §5.3): joint = one refinement over the product "
        "range, one ε for the vector (default); split = each component with its own εi "
        "(--epsilon total or one per component), ε = Σεi (max εi for disjoint filters)",
    )
    p.add_argument(
        "--distance",
        choices=("max", "sum", "euclidean", "priority"),
        help="--mode joint: distance over the product range, each component as a fraction "
        "of its declared range (default max; priority = the first component decides)",
    )
    p.add_argument(
        "--range",
        action="append",
        metavar="COL=LB:UB[:STEP] | COL=a,b,c",
        help="DECLARED range of the answer (never taken from the data); the key is "
        "the query's column, or count/proportion",
    )
    p.add_argument("--ordered", action="store_true", help="declared categories are ordinal")
    p.add_argument("--groups", metavar="COL=a,b,c", help="declared groups of a '… by COL' query")
    p.add_argument(
        "--kind",
        choices=("statistical", "individual"),
        help="default: individual for value(…), else statistical",
    )
    p.add_argument(
        "--split",
        type=float,
        default=0.5,
        help="statistical queries: αu = e^(tε), αd = e^(−(1−t)ε) (default t = 0.5)",
    )
    p.add_argument(
        "--ledger",
        metavar="FILE.json|PROJECT",
        help="PRIVATE budget ledger of the data set (a ledger JSON, 0600, shared with the app and "
        "other queries; or a project file that names it); locked for the whole answer",
    )
    p.add_argument(
        "--budget",
        type=float,
        help="total ε of a new ledger (an existing ledger's total must not differ: see --set-budget)",
    )
    p.add_argument(
        "--set-budget",
        type=float,
        metavar="TOTAL",
        help="change the ledger's total ε (never below what was spent); recorded in the ledger",
    )
    p.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="how long to wait for a ledger in use by another query (default 30)",
    )
    p.add_argument("--requester", help="who asked (recorded in the ledger)")
    p.add_argument(
        "--audit", metavar="FILE.csv|FILE.json", help="also export the ledger's audit trail (private, 0600)"
    )
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="attribute roles (identifiers may only be used in filters)",
    )
    p.add_argument("--seed", type=seed_arg, help="random seed (testing only; default OS entropy)")
    p.add_argument("--json", action="store_true", help="machine-readable public answer")
    add_io_options(p)
    return p


def _epsilons(text: str) -> list[float]:
    """--epsilon: in the order typed, one per component in --mode split (not a sorted sweep grid)."""
    from dpstudio.engine.errors import ParameterError

    eps = []
    for part in str(text).split(","):
        try:
            eps.append(float(part))
        except ValueError:
            raise ParameterError(
                f"--epsilon: {part.strip()!r} is not a number (e.g. 0.5, or 0.3,0.2)."
            ) from None
    return eps


def _ranges(args: argparse.Namespace) -> dict[str, str]:
    """--range COL=…: the declared ranges; numeric bounds checked by the domains' rule (finite
    width, ±10¹⁵).
    """
    from dpstudio.engine.validation import check_domain_pair

    ranges = dict(
        split_assign(it, "--range", "COLUMN=LOWER:UPPER[:STEP] or COLUMN=a,b,c", last=True)
        for it in args.range or []
    )
    for col, text in ranges.items():
        bits = text.split(":")
        try:
            pair = (float(bits[0]), float(bits[1])) if len(bits) in (2, 3) else None
        except ValueError:
            pair = None  # parse_range explains the syntax
        if pair is not None:
            check_domain_pair(col, pair)
    return ranges


def run(args: argparse.Namespace) -> int:
    """Answer one statistic by knowledge refinement (thesis ch. 5) and spend its ε in the ledger."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError

    q = qd.parse_any(args.query)
    eps = _epsilons(args.epsilon)
    multi = isinstance(q, qd.MultiQuery)
    if len(eps) != 1 and not (multi and args.mode == "split"):
        raise ParameterError(
            "--epsilon: give one ε for the query (one per component only with --mode split)."
        )
    if not multi and (args.mode or args.distance):
        raise ParameterError("--mode/--distance: only for a multicomponent query (e.g. 'mean(x), mean(y)').")
    _query_plan(args)  # the ledger and the audit export: checked before any work
    if isinstance(q, qd.MultiQuery):
        return _run_multi(args, q, eps)
    roles = parse_roles(args.role)
    if q.column and roles.get(q.column) == "identifier":
        raise ParameterError(
            f"Column {q.column!r} is an identifier: use it in the filter "
            f"(value(COL) where {q.column} == …), not as the answer."
        )
    df, _ = read_input(args.input, read_options(args))
    ranges = _ranges(args)
    priors_txt = args.prior or ["uniform"]
    if len(priors_txt) != 1:
        raise ParameterError("--prior: give one prior (several only for a multicomponent query).")
    prior = qd.parse_prior(priors_txt[0], qd.resolve_range(q, ranges, df, args.ordered))
    groups = None
    if args.groups:
        gcol, gvals = split_assign(args.groups, "--groups", "COLUMN=a,b,c (e.g. region=1,2,3)", last=True)
        if gcol != q.by:
            raise ParameterError(
                f"--groups {gcol}=…: the query groups by {q.by!r}; write "
                f"'… by {gcol}' in the query or --groups {q.by}=…."
            )
        groups = list(qd.parse_range(gvals).categories if "," in gvals else [qd._literal(gvals)])
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        ans = qd.refine_query(
            df,
            q,
            prior,
            eps[0],
            args.kind,
            args.seed,
            ledger=ledger,
            groups=groups,
            split=args.split,
            requester=args.requester,
        )  # the ledger file holds this answer's ε before the answer is printed
        _query_audit(args, ledger)
    return _query_output(args, ans, ledger)


def _query_plan(args: argparse.Namespace) -> WritePlan:
    """--ledger and --audit checked by the one guarded writer before the data are read (never
    the input, never each other, never a FIFO/device/folder/link or read-only file).
    """
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.safe_write import WritePlan

    if args.audit and (not args.ledger or Path(args.audit).suffix.lower() not in (".csv", ".json")):
        raise ParameterError(
            "--audit FILE.csv|FILE.json exports the ledger: give --ledger and "
            "a .csv or .json name in an existing folder."
        )
    from dpstudio.engine import query as qd

    plan = WritePlan(inputs=[args.input])
    if args.ledger:  # the ledger file itself (a project file names its ledger file)
        plan.file(qd.resolve_ledger_path(args.ledger), what="query ledger (--ledger)", private=True)
    if args.audit:
        plan.file(args.audit, what="ledger audit (--audit)", private=True)
    return plan.check()


def _query_ledger(args: argparse.Namespace) -> contextlib.AbstractContextManager[BudgetLedger | None]:
    """The ledger of ``--ledger`` held under its lock for the whole answer (a context manager
    yielding the bound ledger, or None without ``--ledger``).  The ledger is bound to the
    input's SHA-256; a new one needs ``--budget``; a ``--budget`` that differs from an existing
    ledger's total is refused (``--set-budget`` changes it, recorded in the ledger).
    """
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.io import file_sha256

    if args.audit and (
        not args.ledger
        or Path(args.audit).suffix.lower() not in (".csv", ".json")
        or not os.path.isdir(os.path.dirname(os.path.abspath(args.audit)))
    ):
        raise ParameterError(
            "--audit FILE.csv|FILE.json exports the ledger: give --ledger and "
            "a .csv or .json name in an existing folder."
        )
    for opt, v in (("--budget", args.budget), ("--set-budget", args.set_budget)):
        if v is not None and not (math.isfinite(v) and v > 0):
            raise ParameterError(f"{opt} must be a finite total ε > 0, got {v!r}.")
    wait = qd.DEFAULT_WAIT if args.wait is None else args.wait
    if not (math.isfinite(wait) and 0 <= wait <= 3600):
        raise ParameterError(f"--wait must be a number of seconds in [0, 3600], got {wait!r}.")
    if not args.ledger:
        if args.budget is not None or args.set_budget is not None:
            raise ParameterError(
                "--budget/--set-budget: the total budget belongs to a ledger; give --ledger FILE.json."
            )
        return contextlib.nullcontext(None)
    if args.budget is not None and args.set_budget is not None:
        raise ParameterError(
            "--budget and --set-budget: give one (--set-budget changes an existing ledger's)."
        )
    path = qd.resolve_ledger_path(args.ledger)
    digest = file_sha256(args.input)
    new_total = args.set_budget if args.set_budget is not None else args.budget

    @contextlib.contextmanager
    def held() -> Iterator[BudgetLedger | None]:
        with qd.locked_ledger(
            path, total=new_total, dataset=os.path.basename(args.input), digest=digest, timeout=wait
        ) as ledger:
            if ledger.on_file:  # an existing ledger: its total is the data set's budget
                if args.budget is not None and qd.eps_fraction(args.budget) != ledger.total_exact:
                    raise ParameterError(
                        f"--budget {args.budget:g} differs from the total budget {ledger.total:g} of "
                        f"ledger {args.ledger}: leave --budget out to use the ledger's, or change it "
                        f"with --set-budget {args.budget:g} (recorded in the ledger)."
                    )
                if args.set_budget is not None:
                    ledger.set_total(args.set_budget, requester=args.requester)
            yield ledger

    return held()


def _run_multi(args: argparse.Namespace, mq: qd.MultiQuery, eps: list[float]) -> int:
    """A multicomponent query (thesis §5.3): one --range per answered column, one --prior per
    component in order (or one 'uniform' for all), --mode joint|split, --distance.
    """
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError

    comps = mq.components
    roles = parse_roles(args.role)
    for c in comps:
        if c.column and roles.get(c.column) == "identifier":
            raise ParameterError(
                f"Column {c.column!r} is an identifier: use it in the filter, not as the answer."
            )
    if args.groups:
        raise ParameterError("--groups: a multicomponent query has no groups; ask '… by COL' separately.")
    df, _ = read_input(args.input, read_options(args))
    ranges = _ranges(args)
    used = set()
    sups = []
    for c in comps:
        keys = [k for k in (c.column, c.agg if c.agg in ("count", "proportion") else None) if k]
        mine = {k: ranges[k] for k in keys if k in ranges}
        used |= set(mine)
        sups.append(qd.resolve_range(c, mine, df, args.ordered))
    unused = [k for k in ranges if k not in used]
    if unused:
        raise ParameterError(
            f"--range {unused[0]}=…: no component answers {unused[0]!r}; the keys are the components' "
            "columns, or count / proportion."
        )
    ptxt = args.prior or ["uniform"]
    if len(ptxt) == 1 and ptxt[0].strip().lower() == "uniform":
        ptxt = ptxt * len(comps)
    if len(ptxt) != len(comps):
        raise ParameterError(
            f"--prior: give one prior per component, in order ({len(comps)}), or none for uniform priors."
        )
    priors = [qd.parse_prior(t, s) for t, s in zip(ptxt, sups)]
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        ans = qd.refine_multicomponent(
            df,
            mq,
            priors,
            eps[0] if len(eps) == 1 else list(eps),
            mode=args.mode or "joint",
            distance=args.distance or "max",
            kind=args.kind,
            rng=args.seed,
            ledger=ledger,
            split=args.split,
            requester=args.requester,
        )
        _query_audit(args, ledger)
    return _query_output(args, ans, ledger)


def _query_audit(args: argparse.Namespace, ledger: BudgetLedger | None) -> None:
    if ledger is not None and args.audit:  # through the one writer, never over the data file
        ledger.export(args.audit, protect=(args.input,))


def _query_output(args: argparse.Namespace, ans: Any, ledger: BudgetLedger | None) -> int:
    if ledger is None:
        warn("no --ledger: this answer's ε is not recorded in any budget.")
    for note in ans.notes:
        print("dpstudio: note (office only, do not forward): " + note, file=sys.stderr)
    pub = ans.public()
    if args.json:
        print_json(pub)
        return 0
    print(f"query: {pub['query']}")
    print(f"response: {fmt(pub['response'])}")
    print(f"prior: {pub['prior']}")
    rem = "not tracked (no --ledger)" if ledger is None else f"{fmt(ledger.remaining)} of {fmt(ledger.total)}"
    print(f"epsilon spent: {fmt(pub['epsilon'])}; remaining budget: {rem}")
    print(f"guarantee: {pub['guarantee']}")
    return 0
