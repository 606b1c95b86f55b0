"""Option groups shared by several commands: read options, recipe options, method options."""

from __future__ import annotations

import argparse

from dpstudio.cli._common import SEED_HELP, seed_arg

#: Options that set a method parameter directly (``--k 5`` is ``--param k=5``), in the order
#: they are applied (a later ``--param`` of the same name wins).
COMMON_PARAMS = (
    "k",
    "epsilon",
    "algorithm",
    "suppression",
    "confidence",
    "noise",
    "calibration",
    "budget",
    "layout",
    "order",
    "pd",
    "alpha",
    "strata",
    "variables",
    "household_vars",
    "merge_file",
)

#: Repeatable ``--OPTION COL=TEXT`` options of the methods' per-column parameters (the
#: ``option`` of a :class:`~dpstudio.engine.params.Param` of kind ``per-column``) -> the
#: parameter's name.  Declared here, not read from the registry: a command's ``--help`` must
#: not import the methods (numpy); ``tests/engine/test_cli_survey_methods.py`` checks that
#: every per-column parameter's option is here.
PER_COLUMN_OPTIONS = {
    "recode": "breaks",
    "merge": "merge",
    "top": "top",
    "bottom": "bottom",
    "pram-matrix": "matrix",
}

_PER_COLUMN_HELP = {
    "recode": "recode a numeric column into intervals (method recode): COL=b0,b1,...,bm "
    "(intervals (b_i, b_i+1], the lowest value in the first), COL=N, COL=equal-width:N or "
    "COL=quantile:N (quantile breaks are computed from the data) (repeatable)",
    "merge": "merge categories of a column (method recode): COL=A+B:AB,C+D:CD (repeatable; "
    "given twice for a column, the groups add up)",
    "top": "top coding (method top-bottom-coding): COL=VALUE[:REPLACEMENT], every value above "
    "VALUE becomes REPLACEMENT (default VALUE); VALUE may be a percentile, e.g. p99 "
    "(data-dependent) (repeatable)",
    "bottom": "bottom coding (method top-bottom-coding): COL=VALUE[:REPLACEMENT], every value "
    "below VALUE becomes REPLACEMENT (default VALUE); VALUE may be a percentile, e.g. p1 "
    "(repeatable)",
    "pram-matrix": "a transition matrix of your own for a PRAM column (method pram): "
    "COL=FILE.csv, first row and first column name the categories, rows sum to 1 (repeatable)",
}


def add_type_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """The repeatable ``--type COL=TYPE`` option (each command says what types mean to it)."""
    p.add_argument("--type", action="append", metavar="COL=TYPE", help=help_text)


def add_io_options(p: argparse.ArgumentParser) -> None:
    """--sep, --decimal, --encoding, --sheet: how the input is read."""
    p.add_argument("--sep", help="CSV separator (default: detected among , ; tab |)")
    p.add_argument("--decimal", choices=(".", ","), help="decimal mark of a CSV (default: detected)")
    p.add_argument("--encoding", help="text encoding of a CSV (default: detected)")
    p.add_argument("--sheet", help="Excel sheet name (default: the first)")


_RECIPE_HELP = (
    "read the settings from a recipe JSON file or an app project file (.dpsproj): method, "
    "parameters, roles, types, domains, precision, hierarchies, read options, sweep grid and a "
    "seed only if it was pinned. Options given on the command line override the recipe's values"
)
_SAVE_RECIPE_HELP = (
    "write the effective recipe (recipe and command-line options merged) to FILE.json: PRIVATE "
    "(0600), it can hold domains you computed; the seed only if you pinned one (--seed)"
)


def add_recipe_options(p: argparse.ArgumentParser) -> None:
    """--recipe, --save-recipe."""
    p.add_argument("--recipe", metavar="FILE", help=_RECIPE_HELP)
    p.add_argument("--save-recipe", metavar="FILE.json", help=_SAVE_RECIPE_HELP)


def add_method_options(p: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """The method, its parameters, the roles, types, domains, precisions, hierarchies, the
    seed, the recipe options and the read options (protect and sweep; ``sweep``: --k and
    --epsilon are grids).
    """
    p.add_argument("--method", help="method id (see 'dpstudio methods'); required unless --recipe names one")
    add_recipe_options(p)
    if sweep:
        p.add_argument("--k", help="k values: 2:100, 2:100:5 or 2,5,10")
        p.add_argument("--epsilon", help="ε values: 0.01,0.1,1,10")
    else:
        p.add_argument("--k", help="k: minimum cluster / class size")
        p.add_argument("--epsilon", help="ε: total privacy budget (> 0)")
    p.add_argument(
        "--role",
        action="append",
        metavar="COL=ROLE",
        help="attribute role: identifier, k-quasi, eps-quasi, confidential, other, "
        "weight (sampling weight, released unchanged), household (household id, "
        "not released unless --keep-household) (repeatable)",
    )
    add_type_option(
        p,
        "column type: numeric, integer, categorical, ordinal, date (repeatable); "
        "numeric-only methods refuse categorical/ordinal quasi-identifiers; integer: whole "
        "numbers, noisy values on the grid of whole numbers (default precision 1)",
    )
    p.add_argument(
        "--keep-household",
        action="store_true",
        help="release the household-id column unchanged (default: not released)",
    )
    p.add_argument(
        "--domain",
        action="append",
        metavar="COL=LB:UB",
        help="declared domain of a numeric attribute (repeatable)",
    )
    p.add_argument(
        "--precision",
        action="append",
        metavar="COL=GAMMA",
        help="output precision (grid) of a noisy numeric attribute, e.g. FICA=1 or "
        "INCOME=0.01; noise is drawn exactly on that grid (repeatable; default 1 "
        "for columns declared --type COL=integer, else about a millionth of the declared "
        "domain; never taken from the data)",
    )
    p.add_argument("--seed", type=seed_arg, help=SEED_HELP)
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=VALUE",
        help="any method parameter, e.g. budget=per-attribute (repeatable)",
    )
    p.add_argument(
        "--hierarchy",
        action="append",
        metavar="COL=FILE",
        help="ARX generalisation hierarchy / taxonomy CSV for a column (repeatable)",
    )
    for name in ("algorithm", "suppression", "confidence", "noise", "calibration", "budget"):
        p.add_argument(f"--{name}", help=f"method parameter '{name}' (see 'dpstudio methods')")
    for opt, help_text in _PER_COLUMN_HELP.items():
        p.add_argument(
            f"--{opt}", action="append", metavar="COL=TEXT", dest=opt.replace("-", "_"), help=help_text
        )
    p.add_argument(
        "--merge-file",
        dest="merge_file",
        metavar="FILE.csv",
        help="mapping file of merged categories (method recode): CSV 'column,from,to'",
    )
    p.add_argument(
        "--pd", help="PRAM: minimum diagonal probability of the transition matrix, in (0, 1] (default 0.8)"
    )
    p.add_argument(
        "--alpha", help="PRAM: the invariant matrix mixed with the identity, in [0, 1] (default 0.5)"
    )
    p.add_argument("--strata", metavar="COL[,COL]", help="PRAM: strata columns (the matrix per stratum)")
    p.add_argument("--variables", metavar="COL[,COL]", help="PRAM: the categorical columns to PRAM")
    p.add_argument(
        "--household-vars",
        dest="household_vars",
        metavar="COL[,COL]",
        help="household variables (constant within a household, e.g. size, region): protected "
        "once per household (recode, top-bottom-coding, pram; needs --role HID=household)",
    )
    p.add_argument(
        "--order",
        choices=("random", "input", "households", "households-input"),
        help="order of the released records: random (default: a keyed random permutation, "
        "every method) or input (keep the input order: WEAKENS the guarantee, stated in it; "
        "for internal comparisons only); with a household-id column: households (the default "
        "with --keep-household: households in random order, each household's records together) or "
        "households-input (members in their input order)",
    )
    p.add_argument(
        "--drop-missing",
        action="store_true",
        help="drop records with missing values in protected attributes (reported)",
    )
    add_io_options(p)
