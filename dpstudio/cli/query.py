"""``dpstudio query FILE QUERY``: answer one statistic under differential privacy -- by noise
(discrete Laplace / geometric, discrete Gaussian, the exponential mechanism) or by knowledge
refinement (thesis ch. 5), ``--mechanism auto`` choosing the smaller expected error -- spending ε
from a private budget ledger (per requester when the office sets budgets), optionally writing
the researcher's PUBLIC answer file.
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

from dpstudio.cli._common import (
    parse_domains,
    parse_roles,
    parse_types,
    read_input,
    read_options,
    seed_arg,
    split_assign,
)
from dpstudio.cli._options import add_io_options
from dpstudio.cli._output import fmt, print_json, warn

if TYPE_CHECKING:
    from dpstudio.engine import query as qd
    from dpstudio.engine.query.ledger import BudgetLedger
    from dpstudio.engine.safe_write import WritePlan

NAME = "query"
SUMMARY = (
    "answer one statistic under differential privacy (noise or knowledge refinement, "
    "--mechanism auto by default), spending ε from a private budget ledger"
)
#: Largest --records-hint (a planning size, not a count of the data).
MAX_RECORDS_HINT = 10**12


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
    _add_answer_options(p)
    _add_prior_options(p)
    _add_ledger_options(p)
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


def _add_answer_options(p: argparse.ArgumentParser) -> None:
    """``query``'s options of the answer: ε, mechanism, declared domains and types, planning."""
    p.add_argument("--epsilon", required=True, help="ε spent by this answer (> 0)")
    p.add_argument(
        "--mechanism",
        choices=("auto", "refinement", "laplace", "geometric", "gaussian", "exponential"),
        default="auto",
        help="auto (default): the smaller expected error for the declared prior and ε, named in "
        "the output; refinement (thesis ch. 5); laplace/geometric (discrete Laplace: counts, sums, "
        "means, variances, ratios, values); gaussian (discrete Gaussian, zCDP; needs --delta or the "
        "ledger's δ); exponential (quantiles, medians, min, max, modes)",
    )
    p.add_argument(
        "--delta",
        metavar="δ",
        help="δ of the Gaussian mechanism, in (0, 0.01] (e.g. 1e-6; fixed for the ledger at its "
        "first Gaussian answer)",
    )
    p.add_argument(
        "--domain",
        action="append",
        metavar="COL=LB:UB",
        help="DECLARED domain of a column (repeatable): sums, means, variances and ratios by noise "
        "clamp each record to it (never taken from the data)",
    )
    p.add_argument(
        "--type",
        action="append",
        metavar="COL=TYPE",
        help="declared column type (repeatable): integer gives value/median a grid of whole numbers",
    )
    p.add_argument(
        "--records-hint",
        metavar="N",
        help="planning size for the accuracy of means, variances, ratios and quantiles (the "
        "filter's count is private; default: the number of records)",
    )
    p.add_argument(
        "--user-distance",
        metavar="grid|log|asymmetric:R",
        help="refinement: the researcher's distance d_i (thesis Protocol 2; default grid)",
    )
    p.add_argument(
        "--preview",
        action="store_true",
        help="print the expected error and 95 %% interval width of every mechanism (public "
        "planning figures) and stop: nothing is drawn or spent",
    )


def _add_prior_options(p: argparse.ArgumentParser) -> None:
    """``query``'s options of refinement: the prior, multicomponent queries, declared ranges
    and groups, the kind of query.
    """
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
    p.add_argument(
        "--groups",
        action="append",
        metavar="COL=a,b,c",
        help="declared groups of a '… by COL' query (one per column of '… by A, B')",
    )
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


def _add_ledger_options(p: argparse.ArgumentParser) -> None:
    """``query``'s options of the private budget ledger, the requesters and their files."""
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
        "--requester-budget",
        metavar="ε",
        help="the office sets --requester's own budget in the ledger before answering (recorded; "
        "never below what they spent); once a ledger has requester budgets every answer needs one",
    )
    p.add_argument(
        "--answer-file",
        metavar="FILE.json",
        help="write the researcher's PUBLIC answer file: --requester's answers in the ledger (query, "
        "mechanism, ε, response, 95 %% interval, prior) and their remaining budget; checked before "
        "anything is drawn",
    )
    p.add_argument(
        "--audit", metavar="FILE.csv|FILE.json", help="also export the ledger's audit trail (private, 0600)"
    )


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


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The new options checked before any file is read (one line naming the option)."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import DPStudioError, ParameterError
    from dpstudio.engine.query.refinement import check_distance
    from dpstudio.engine.validation import check_domain_pair

    out: dict[str, Any] = {"delta": None, "records_hint": None, "requester_budget": None}
    args.requester = (args.requester or "").strip() or None  # one name for the budget and the answer
    if args.delta is not None:
        try:
            out["delta"] = qd.mechanisms.check_delta(args.delta)
        except DPStudioError as exc:
            raise ParameterError(f"--delta: {exc}") from None
    if args.records_hint is not None:
        txt = str(args.records_hint).strip()
        if not (txt.isdigit() and len(txt) <= 13 and 1 <= int(txt) <= MAX_RECORDS_HINT):
            raise ParameterError(
                f"--records-hint must be a whole number of records in [1, {MAX_RECORDS_HINT:.0e}], got {txt!r}."
            )
        out["records_hint"] = int(txt)
    if args.requester_budget is not None:
        if not args.ledger or not args.requester or args.preview:
            raise ParameterError(
                "--requester-budget ε: sets --requester's budget in the ledger: give --ledger and --requester "
                "(and no --preview)."
            )
        try:
            v = float(args.requester_budget)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and v > 0):
            raise ParameterError(f"--requester-budget must be a finite ε > 0, got {args.requester_budget!r}.")
        try:
            qd.check_epsilon(v)
        except DPStudioError as exc:
            raise ParameterError(f"--requester-budget: {exc}") from None
        out["requester_budget"] = v
    if args.answer_file is not None and (not args.ledger or args.preview):
        raise ParameterError(
            "--answer-file FILE.json: the researcher's answers are read from the ledger: give --ledger "
            "(and no --preview)."
        )
    if args.user_distance is not None:
        try:
            check_distance(args.user_distance)
        except DPStudioError as exc:
            raise ParameterError(f"--user-distance: {exc}") from None
    if (
        args.mechanism != "auto"
        and args.mechanism != "refinement"
        and (args.user_distance or args.kind == "individual")
    ):
        raise ParameterError(
            f"--user-distance/--kind individual: refinement only (--mechanism {args.mechanism} adds noise)."
        )
    bounds = parse_domains(args.domain)
    for col, pair in bounds.items():
        check_domain_pair(col, pair)
    out["bounds"] = bounds
    out["types"] = parse_types(args.type)
    return out


def _groups(args: argparse.Namespace, by: list[str]) -> dict[str, list] | None:
    """--groups COL=a,b,c (one per '… by' column), declared, never read from the data."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError

    if not args.groups:
        return None
    out: dict[str, list] = {}
    for item in args.groups:
        gcol, gvals = split_assign(item, "--groups", "COLUMN=a,b,c (e.g. region=1,2,3)", last=True)
        if gcol not in by:
            raise ParameterError(
                f"--groups {gcol}=…: the query groups by {', '.join(by) or 'nothing'}; write "
                f"'… by {gcol}' in the query or --groups {by[0] if by else 'COL'}=…."
            )
        if not gvals:
            raise ParameterError(f"--groups {gcol}=: declare the groups, e.g. {gcol}=1,2,3.")
        out[gcol] = list(qd.parse_range(gvals).categories if "," in gvals else [qd.parse_literal(gvals)])
    return out


def run(args: argparse.Namespace) -> int:
    """Answer one statistic (``--mechanism``, default auto) and spend its ε in the ledger."""
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.roles import normalize_types

    q = qd.parse_any(args.query, allow_by=True)
    eps = _epsilons(args.epsilon)
    multi = isinstance(q, qd.MultiQuery)
    if len(eps) != 1 and not (multi and args.mode == "split"):
        raise ParameterError(
            "--epsilon: give one ε for the query (one per component only with --mode split)."
        )
    if not multi and (args.mode or args.distance):
        raise ParameterError("--mode/--distance: only for a multicomponent query (e.g. 'mean(x), mean(y)').")
    if (args.mode or args.distance) and args.mechanism not in ("auto", "refinement"):
        raise ParameterError(
            f"--mode/--distance: refinement of a multicomponent query (not --mechanism {args.mechanism})."
        )
    opts = _options(args)
    _query_plan(args)  # the ledger, the audit export and the answer file: checked before any work
    if isinstance(q, qd.MultiQuery):
        return _run_multi(args, q, eps, opts)
    roles = parse_roles(args.role)
    if q.column and roles.get(q.column) == "identifier":
        raise ParameterError(
            f"Column {q.column!r} is an identifier: use it in the filter "
            f"(value(COL) where {q.column} == …), not as the answer."
        )
    df, _ = read_input(args.input, read_options(args))
    opts["types"] = normalize_types(df.columns, opts["types"])  # known columns, known types
    ranges = _ranges(args)
    priors_txt = args.prior or ["uniform"]
    if len(priors_txt) != 1:
        raise ParameterError("--prior: give one prior (several only for a multicomponent query).")
    prior = qd.parse_prior(priors_txt[0], qd.resolve_range(q, ranges, df, args.ordered, types=opts["types"]))
    prior.weights()  # a prior that does not fit its range: refused here, naming it
    groups = _groups(args, [b for b in (q.by, q.by2) if b])
    kw = {
        "prior": prior,
        "bounds": opts["bounds"],
        "groups": groups,
        "delta": opts["delta"],
        "split": args.split,
        "kind": args.kind,
        "records_hint": opts["records_hint"],
        "distance": args.user_distance,
    }
    if args.preview:
        return _preview(args, q, eps[0], len(df), kw, ledger_delta=_ledger_delta(args))
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        _requester_budget(args, opts, ledger)
        ans = qd.answer_query(
            df,
            q,
            eps[0],
            mechanism=args.mechanism,
            ledger=ledger,
            requester=args.requester,
            rng=args.seed,
            **kw,
        )  # the ledger file holds this answer's ε before the answer is printed
        _query_audit(args, ledger)
        _query_answer_file(args, ledger)
    return _query_output(args, ans, ledger)


def _ledger_delta(args: argparse.Namespace) -> float | None:
    """δ of an existing ledger (read only, for --preview)."""
    from dpstudio.engine import query as qd

    if not args.ledger:
        return None
    led = qd.load_ledger(qd.resolve_ledger_path(args.ledger))
    return None if led is None else led.delta


def _preview(args: argparse.Namespace, q: Any, eps: float, n: int, kw: dict, *, ledger_delta) -> int:
    """--preview: every mechanism's expected error and 95 % interval width; nothing drawn."""
    from dpstudio.engine import query as qd

    delta = kw["delta"] if kw["delta"] is not None else ledger_delta
    acc = qd.assess(
        q, eps, prior=kw["prior"], n_total=n, bounds=kw["bounds"], delta=delta, split=kw["split"],
        groups=kw["groups"], records_hint=kw["records_hint"],
        only=None if args.mechanism == "auto" else args.mechanism,
    )  # fmt: skip
    if args.json:
        print_json({"query": q.describe(), "epsilon": eps, "accuracy": acc})
        return 0
    print(f"query: {q.describe()}")
    print(f"accuracy before spending ({acc['measure']}; public planning figures, no answer drawn):")
    for name, v in acc["mechanisms"].items():
        e = v["expected_error"]
        if e is None:
            print(f"  {name}: n/a ({v['how']})")
            continue
        w = v.get("interval_width")
        wtxt = "no value interval" if w is None else f"95 % interval width {fmt(w)}"
        print(f"  {name}: expected error {fmt(e)} ({v['how']}); {wtxt} ({v.get('interval_how', '')})")
    print(acc["why"] if args.mechanism == "auto" else f"mechanism: {args.mechanism} (chosen by the office)")
    print("epsilon spent: 0 (preview)")
    return 0


def _requester_budget(args: argparse.Namespace, opts: dict, ledger: BudgetLedger | None) -> None:
    """--requester-budget: set under the ledger's lock, before the answer (recorded as an event)."""
    if ledger is not None and opts["requester_budget"] is not None:
        ledger.set_requester_budget(args.requester, opts["requester_budget"], by="office")


def _query_answer_file(args: argparse.Namespace, ledger: BudgetLedger | None) -> None:
    from dpstudio.engine import query as qd

    if ledger is not None and args.answer_file:  # public; never over the data or the ledger
        qd.export_answer_file(
            args.answer_file, ledger, args.requester, inputs=[args.input, qd.resolve_ledger_path(args.ledger)]
        )


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
    if args.answer_file:  # the engine's own check (a .json name) and the plan's (not each other)
        qd.desk.check_answer_file_target(args.answer_file, [args.input])
        plan.file(args.answer_file, what="answer file (--answer-file)")
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


def _run_multi(args: argparse.Namespace, mq: qd.MultiQuery, eps: list[float], opts: dict) -> int:
    """A multicomponent query: one --range per answered column, one --prior per component in
    order (or one 'uniform' for all).  Refinement (thesis §5.3: --mode joint|split, --distance)
    or one noise mechanism for every component (``auto``: :func:`assess_components`).
    """
    from dpstudio.engine import query as qd
    from dpstudio.engine.errors import ParameterError
    from dpstudio.engine.roles import normalize_types

    comps = mq.components
    roles = parse_roles(args.role)
    for c in comps:
        if c.column and roles.get(c.column) == "identifier":
            raise ParameterError(
                f"Column {c.column!r} is an identifier: use it in the filter, not as the answer."
            )
    by = [b for b in (comps[0].by, comps[0].by2) if b]
    if args.groups and not by:
        raise ParameterError("--groups: the query has no '… by COL'; write 'count, mean(x) by COL'.")
    if args.user_distance:
        raise ParameterError("--user-distance: for one-component queries (a multicomponent one: --distance).")
    df, _ = read_input(args.input, read_options(args))
    opts["types"] = normalize_types(df.columns, opts["types"])
    ranges = _ranges(args)
    used = set()
    sups = []
    for c in comps:
        keys = [k for k in (c.column, c.agg if c.agg in ("count", "proportion") else None) if k]
        mine = {k: ranges[k] for k in keys if k in ranges}
        used |= set(mine)
        sups.append(qd.resolve_range(c, mine, df, args.ordered, types=opts["types"]))
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
    groups = _groups(args, by)
    mech = args.mechanism
    choice = None
    if mech == "auto" and not (args.mode or args.distance or len(eps) > 1):
        choice = qd.desk.assess_components(
            mq, eps[0], supports=sups, priors=priors, n_total=len(df), bounds=opts["bounds"],
            delta=opts["delta"] if opts["delta"] is not None else _ledger_delta(args), split=args.split,
            records_hint=opts["records_hint"],
        )  # fmt: skip
        mech = choice["auto"]
    elif mech == "auto":
        mech = "refinement"  # --mode/--distance or one ε per component: refinement's options
    if by and mech == "refinement":
        raise ParameterError(
            "several aggregates '… by COL': answered by noise (--mechanism auto/laplace/…); "
            "refinement answers one aggregate by COL."
        )
    if args.preview:
        raise ParameterError("--preview: for one-component queries.")
    if mech != "refinement":
        with _query_ledger(args) as ledger:
            _requester_budget(args, opts, ledger)
            ans = qd.answer_query(
                df, mq, eps[0], mechanism=mech, support=sups, bounds=opts["bounds"], groups=groups,
                delta=opts["delta"], split=args.split, records_hint=opts["records_hint"], ledger=ledger,
                requester=args.requester, rng=args.seed,
            )  # fmt: skip
            _query_audit(args, ledger)
            _query_answer_file(args, ledger)
        if choice is not None:  # auto over the components: say why (public planning figures)
            ans.accuracy = {**(ans.accuracy or {}), "why": choice["why"]}
        return _query_output(args, ans, ledger)
    with _query_ledger(args) as ledger:  # locked from the budget check to the ledger write
        _requester_budget(args, opts, ledger)
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
        ans.mechanism = "refinement"
        _query_audit(args, ledger)
        _query_answer_file(args, ledger)
    return _query_output(args, ans, ledger)


def _query_audit(args: argparse.Namespace, ledger: BudgetLedger | None) -> None:
    if ledger is not None and args.audit:  # through the one writer, never over the data file
        ledger.export(args.audit, protect=(args.input,))


def _query_output(args: argparse.Namespace, ans: Any, ledger: BudgetLedger | None) -> int:
    """The PUBLIC answer: ``response: …`` and ``interval 95 %: [lo, hi]`` lines (engine
    ``answer_lines``), or ``--json``; office-only notes on stderr.
    """
    from dpstudio.engine.query.desk import answer_lines

    if ledger is None:
        warn("no --ledger: this answer's ε is not recorded in any budget.")
    for note in ans.notes:
        print("dpstudio: note (office only, do not forward): " + note, file=sys.stderr)
    if args.json:
        print_json(ans.public())
        return 0
    rem = "not tracked (no --ledger)" if ledger is None else f"{fmt(ledger.remaining)} of {fmt(ledger.total)}"
    if ledger is not None and args.requester and args.requester in ledger.requesters:
        who = args.requester
        left = ledger.requesters[who] - ledger.spent_by_exact(who)
        rem += f"; {who}: {fmt(float(left))} of {fmt(float(ledger.requesters[who]))}"
    for line in answer_lines(ans, remaining=rem):
        print(line)
    return 0
