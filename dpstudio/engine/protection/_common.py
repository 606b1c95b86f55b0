"""What several protection methods share: the parameter declarations used by more than one
method, the pieces of their guarantees (:class:`~dpstudio.engine.guarantee.Guarantee`: the
DP claim and budget split, record order, baseline), the budget split itself and the noise application helpers (replace columns, shuffle the release).

Noise comes from :func:`dpstudio.engine.algorithms.noise.grid_noise` (exact integer noise on
each attribute's output grid γ, issue 8 §3), so the 'staircase' noise choice works wherever
Laplace does.  Clustered methods draw the noise on the integer cluster sums of the grid values
t = rint(x/γ) − base and release the sum's mean rounded to the grid; the sensitivity passed is
the L1 sensitivity of those sums (Δ/γ plus at most one step of rounding per record), and the
noise is ε_i-DP for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms import keyed as K
from dpstudio.engine.algorithms import microaggregation as MA
from dpstudio.engine.errors import ParameterError
from dpstudio.engine.guarantee import Clause, Guarantee, GuaranteeContext, Model, Scope
from dpstudio.engine.params import EPSILON_MAX, EPSILON_MIN, WEIGHT_MAX, WEIGHT_MIN, Param
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output, epsilon_shares
from dpstudio.engine.validation import BLOCK_CELLS

# --------------------------------------------------------------------------- shared parameters


def k_param(default: int = 5, minimum: int = 1, help: str | None = None) -> Param:
    return Param(
        "k",
        "int",
        default,
        help or "Minimum cluster / equivalence-class size. Larger k: less risk, more information loss.",
        label="k",
        minimum=minimum,
        maximum=None,
    )


def epsilon_param(default: float = 1.0) -> Param:
    return Param(
        "epsilon",
        "float",
        default,
        f"Total privacy budget ε ({EPSILON_MIN:g} to {EPSILON_MAX:g}). Smaller ε: stronger "
        "privacy, more noise.",
        label="ε",
        minimum=EPSILON_MIN,
        maximum=EPSILON_MAX,
        log_scale=True,
    )


NOISE_PARAM = Param(
    "noise",
    "choice",
    "laplace",
    "Noise distribution. 'staircase' is the optimal (minimum-variance) ε-DP noise of "
    "thesis ch. 4 for ONE released number: the same guarantee as Laplace with less variance. "
    "When one record can move several released centroids of an attribute (ir-dp, "
    "insensitive-dp, categorical-dp with k ≥ 2) each staircase draw gets ε_i/n_c; Laplace then "
    "gives less noise for ir-dp.",
    label="noise",
    choices=("laplace", "staircase"),
    choice_labels={"laplace": "Laplace", "staircase": "Optimal (staircase)"},
)

BUDGET_PARAM = Param(
    "budget",
    "choice",
    "equal",
    "How the total ε is split over the protected attributes: 'equal' (ε/m each, release is "
    "ε-DP), 'weights' (user weights normalised to sum ε), 'per-attribute' (each attribute "
    "gets the whole ε: the release is only (m·ε)-DP; this is what the thesis's Census "
    "experiments did).",
    label="budget split",
    choices=("equal", "weights", "per-attribute"),
    choice_labels={
        "equal": "Equal (ε/m each)",
        "weights": "User weights",
        "per-attribute": "Whole ε per attribute (m·ε-DP)",
    },
    warning={"per-attribute": "Each attribute gets the whole ε: the release is only (m·ε)-DP."},
)

WEIGHTS_PARAM = Param(
    "weights",
    "mapping",
    None,
    "Budget weights per attribute (used with budget='weights'; each "
    f"{WEIGHT_MIN:g} to {WEIGHT_MAX:g}); normalised so that they sum to ε.",
    label="budget weights",
    minimum=WEIGHT_MIN,
    maximum=WEIGHT_MAX,
    advanced=True,
)

DROP_MISSING_PARAM = Param(
    "drop_missing",
    "bool",
    False,
    "Drop records with missing values in the protected attributes (their number is reported). "
    "Off: such records are refused with a count.",
    label="drop records with missing values",
    advanced=True,
)

#: The values of the shared ``order`` parameter (a choice: a value can be added without
#: changing the others).  With a household-id column (role ``household``) the records of one
#: household can be released as a unit (issue 23 §3): ``households`` -- households in random
#: order, the members of each in random order inside it (the default when a household id is
#: declared and no order is given) -- or ``households-input`` -- households in random order,
#: the members of each in their input order.  Never the input order of the households.
ORDER_RANDOM = "random"
ORDER_INPUT = "input"
ORDER_HOUSEHOLDS = "households"
ORDER_HOUSEHOLDS_INPUT = "households-input"
#: the values that release households as units
HOUSEHOLD_ORDERS = (ORDER_HOUSEHOLDS, ORDER_HOUSEHOLDS_INPUT)

ORDER_PARAM = Param(
    "order",
    "choice",
    ORDER_RANDOM,
    "Order of the released records. 'random' (default): a keyed random permutation, the same "
    "for the same seed, data and parameters, whatever the method. 'input': the input order, "
    "which weakens every guarantee: an intruder who knows how the input was sorted (by name, "
    "by id, households in adjacent rows) links records by their position, and for "
    "microaggregated DP methods which rows share a value shows the clusters, which the noise "
    "does not hide. Use 'input' only for internal comparisons. With a household-id column: "
    "'households' (the default when the household id is released) releases each household's records together, households "
    "in random order and the members in random order inside each; 'households-input' the same "
    "with the members in their input order. Households as units show which records belong to "
    "one household (the guarantee says so).",
    label="record order",
    choices=(ORDER_RANDOM, ORDER_INPUT, ORDER_HOUSEHOLDS, ORDER_HOUSEHOLDS_INPUT),
    choice_labels={
        ORDER_RANDOM: "Random order (default)",
        ORDER_INPUT: "Keep input order (weakens the guarantee)",
        ORDER_HOUSEHOLDS: "Households as units, random order (household id needed)",
        ORDER_HOUSEHOLDS_INPUT: "Households as units, members in input order (household id needed)",
    },
    warning={
        ORDER_INPUT: "Records keep their input order: a record's position can link it to the "
        "input file (sorted by name or id, households in adjacent rows), which the guarantee "
        "does not cover; microaggregated DP releases then do not satisfy ε-DP.",
        ORDER_HOUSEHOLDS: "The records of a household are adjacent: the release shows which "
        "records belong to one household, even when the household id is not released.",
        ORDER_HOUSEHOLDS_INPUT: "The records of a household are adjacent and in their input "
        "order: the release shows which records belong to one household and in which order "
        "they were listed.",
    },
    advanced=True,
)

#: Old name of ``order`` (a bool, clustered DP methods only), still read from old recipes and
#: ``--param shuffle=false``: True means 'random', False 'input'.
SHUFFLE_PARAM = Param(
    "shuffle",
    "bool",
    True,
    "Old name of 'order': true = random, false = input.",
    label="shuffle released records",
    advanced=True,
)


#: The public warning of order='input' (a function of the parameters only).
INPUT_ORDER_WARNING = (
    "order=input: the records are released in input order, not shuffled. A record's position "
    "can link it to the input file (sorted by name or id, households in adjacent rows), which "
    "the guarantee does not cover."
)


def keep_order(p: Mapping) -> bool:
    """Whether the release keeps the input order (``order='input'``; every other value of
    ``order`` puts the records in a random order).
    """
    return p.get("order", ORDER_RANDOM) == ORDER_INPUT


def household_order(p: Mapping) -> bool:
    """Whether the release puts the records of one household together (``order`` one of
    :data:`HOUSEHOLD_ORDERS`).
    """
    return p.get("order", ORDER_RANDOM) in HOUSEHOLD_ORDERS


LAYOUT_PARAM = Param(
    "layout",
    "choice",
    "records",
    "How the protected attributes are released. 'records': one table with a row per record "
    "(the protected attributes side by side, other non-identifier columns beside them "
    "unchanged). When several attributes are clustered separately, or columns are released "
    "unchanged beside clustered ones, the rows show which records were grouped together and "
    "the records are NOT ε-DP (per attribute only). 'separate-tables': one one-column table per "
    "protected attribute, each in its own independent random order; columns that are not "
    "protected are NOT released. That release is ε-DP by sequential composition over the "
    "tables (ε_i each, total ε).",
    label="release layout",
    choices=("records", "separate-tables"),
    choice_labels={
        "records": "Records (one table)",
        "separate-tables": "Separate table per attribute (ε-DP)",
    },
    warning={
        "separate-tables": "One table per protected attribute, each shuffled on its own: "
        "the rows of different tables do not belong together, and columns that are not "
        "protected are not released."
    },
)

#: The parameters of every numeric DP method, and of the clustered ones.
DP_PARAMS = (epsilon_param(), NOISE_PARAM, BUDGET_PARAM, WEIGHTS_PARAM, DROP_MISSING_PARAM, ORDER_PARAM)
CLUSTERED_DP_PARAMS = DP_PARAMS + (LAYOUT_PARAM,)

# --------------------------------------------------------------------------- guarantee clauses
# A method's ``guarantee(ctx)`` returns a :class:`~dpstudio.engine.guarantee.Guarantee` built
# from these pieces; the sentence is the concatenation of its clauses (issue 22 §1).

NOT_DP_LABEL = "does not satisfy ε-DP (see paper 002 §3)"

BOUNDED = "bounded DP: neighbouring data sets differ in one record"


def separate_tables(p) -> bool:
    return p.get("layout", "records") == "separate-tables"


def layout_scope(ctx: GuaranteeContext) -> Scope:
    """Where a method's model holds before the API looks at the released columns: for the
    records, or for the separate tables of layout 'separate-tables'.
    """
    return Scope.TABLES if separate_tables(ctx.params) else Scope.RECORDS


def order_clause(p, clustered: bool = True) -> str:
    """What the guarantee says about the record order.  ``clustered``: the wording of
    microaggregated releases (input order shows which rows share a cluster).
    """
    if separate_tables(p):
        return (
            " Released as one table per protected attribute, each in its own independent "
            "random order (rows of different tables do not belong together)."
        )
    if household_order(p):
        inside = "in their input order" if p.get("order") == ORDER_HOUSEHOLDS_INPUT else "in random order"
        return (
            " Records are released in random order of households, the records of each household "
            f"together ({inside} inside it): the release shows which records belong to one "
            "household, which the guarantee does not cover."
        )
    if not keep_order(p):
        return " Records are released in random order."
    if clustered:
        return (
            " Records are released in INPUT ORDER (order=input), which shows which records "
            "share a cluster: as released this does not satisfy the stated guarantee."
        )
    return (
        " Records are released in INPUT ORDER (order=input), which weakens this guarantee: a "
        "record's position can link it to the input file (e.g. one sorted by name or id, or "
        "with households in adjacent rows), which the guarantee does not cover."
    )


def ordering(ctx: GuaranteeContext, clustered: bool = True) -> tuple[Clause, tuple[str, ...]]:
    """The order clause and what it voids: a clustered release in input order shows which
    records share a cluster, so its model does not hold as released (``input-order``).
    """
    p = ctx.params
    code = "layout" if separate_tables(p) else "order"
    void = ("input-order",) if clustered and keep_order(p) and not separate_tables(p) else ()
    return Clause(code, order_clause(p, clustered)), void


def named(ctx: GuaranteeContext) -> str:
    """`` (a, b)``: the protected columns when they are known, else ``""``."""
    cols = ctx.attributes
    return f" ({', '.join(cols)})" if cols else ""


def fmt(x) -> str:
    return f"{float(x):g}"


def as_k(k) -> int | None:
    """K as the guarantee's field (None when not set)."""
    return None if k is None else int(k)


def budget_clause(ctx: GuaranteeContext) -> str:
    p = ctx.params
    budget = p.get("budget", "equal")
    cols = ctx.attributes
    if cols and p.get("epsilon") is not None:  # the protected columns are known
        return budget_detail(p, list(cols), epsilon_shares(p, list(cols)))
    if budget == "per-attribute":
        return (
            f"ε = {fmt(p['epsilon'])} given whole to each of the m protected attributes, so "
            "the release as a whole is only (m·ε)-DP, m = number of ε-quasi-identifiers"
        )
    if budget == "weights":
        return (
            f"ε = {fmt(p['epsilon'])} split over the protected attributes in proportion to the user weights"
        )
    return f"ε = {fmt(p['epsilon'])}, split equally over the m protected attributes (ε/m each)"


def budget_detail(p, cols: list[str], eps: np.ndarray) -> str:
    """The budget clause with the actual attributes (the guarantee text without them cannot
    know m, the number of protected attributes).
    """
    m = len(cols)
    names = ", ".join(cols)
    total = fmt(eps.sum())
    budget = p.get("budget", "equal")
    if budget == "per-attribute":
        return (
            f"ε = {fmt(p['epsilon'])} given whole to each of the {m} protected attributes "
            f"({names}): the release is ({m}·{fmt(p['epsilon'])} = {total})-DP by "
            "sequential composition"
        )
    shares = ", ".join(f"{c}: {fmt(e)}" for c, e in zip(cols, eps))
    if m == 1:
        return f"ε = {fmt(p['epsilon'])}, all of it for the one protected attribute {names}"
    how = "equally" if budget == "equal" else "by the user weights"
    return (
        f"ε = {fmt(p['epsilon'])} split {how} over the {m} protected attributes "
        f"({shares}); total {total} by sequential composition"
    )


def dp_budget(ctx: GuaranteeContext) -> dict:
    """The ε fields of a DP guarantee: the declared ε, ε_i per protected attribute (when they
    are known) and the total by sequential composition (None when m is unknown and each
    attribute gets the whole ε).
    """
    p = ctx.params
    eps = p.get("epsilon")
    if eps is None:
        return {"epsilon": None}
    eps = float(eps)
    cols = list(ctx.attributes)
    if cols:
        try:
            shares = epsilon_shares(p, cols)
        except ParameterError:  # weights missing: the run refuses them, the sentence says so
            shares = None
        if shares is not None:
            return {
                "epsilon": eps,
                "epsilon_per_attribute": tuple((c, float(e)) for c, e in zip(cols, shares)),
                "epsilon_total": float(shares.sum()),
            }
    return {"epsilon": eps, "epsilon_total": None if p.get("budget") == "per-attribute" else eps}


def dp_claim(ctx: GuaranteeContext) -> tuple[Clause, ...]:
    """The head of a DP sentence: the model with its ε, the budget split, the neighbours."""
    p = ctx.params
    eps = fmt(p["epsilon"])
    cols = ctx.attributes
    if p.get("budget", "equal") == "per-attribute" and cols:
        m = len(cols)
        head = f"({m}·{eps} = {fmt(m * float(p['epsilon']))})-differential privacy"
    elif p.get("budget", "equal") == "per-attribute":
        head = f"(m·{eps})-differential privacy, i.e. (m·ε)-DP"
    else:
        head = f"{eps}-differential privacy"
    return (
        Clause("claim", f"{head} ("),
        Clause("budget", budget_clause(ctx)),
        Clause("neighbours", f"; {BOUNDED})"),
    )


def dp_guarantee(ctx: GuaranteeContext, *clauses: Clause, **fields) -> Guarantee:
    """An ε-DP guarantee: :func:`dp_claim` followed by ``clauses``."""
    return Guarantee(
        model=fields.pop("model", Model.EPSILON_DP),
        clauses=dp_claim(ctx) + tuple(c for c in clauses if c.text),
        scope=fields.pop("scope", layout_scope(ctx)),
        covered=ctx.attributes,
        **{**dp_budget(ctx), **fields},
    )


def baseline_sentence(what: str) -> str:
    return (
        f"Noise-free baseline ({what} only, ε not set): no differential privacy; for "
        "comparison, never for release."
    )


def baseline_guarantee(ctx: GuaranteeContext, what: str, *clauses: Clause) -> Guarantee:
    """The guarantee of a noise-free baseline (a sweep's point without noise): none."""
    return Guarantee(
        model=Model.NONE,
        clauses=(Clause("baseline", baseline_sentence(what)),) + tuple(c for c in clauses if c.text),
        covered=ctx.attributes,
        baseline=True,
    )


def noise_name(p) -> str:
    return "staircase (optimal)" if p.get("noise") == "staircase" else "Laplace"


STAIRCASE_VECTOR_NOTE = (
    "staircase noise is ε-DP for ONE released number of sensitivity Δ; it does not extend to a "
    "vector of centroids whose changes add up to Δ (each coordinate could cost the full ε), so "
    "when one record can move up to n_c centroids of an attribute every draw gets "
    "sensitivity Δ(A_i)/k and budget ε_i/n_c (sequential composition over the clusters)"
)


def staircase_split(kind: str, k: int, nc: int) -> bool:
    """True when staircase draws must be calibrated per cluster with ε_i/n_c: one record can
    move several of the n_c released centroids of an attribute (k ≥ 2, n_c ≥ 2).
    """
    return kind == "staircase" and int(k) > 1 and int(nc) > 1


# --------------------------------------------------------------------------- run helpers


def eps_quasi(job: Job) -> list[str]:
    return job.columns(Role.EPS_QUASI)


def eps_info(job: Job, cols: list[str]) -> tuple[np.ndarray | None, dict]:
    """The budget split ε_i of ``cols`` (None for the noise-free baseline) and its info."""
    if job.noise_free:
        return None, {"epsilon": None, "noise": "none (noise-free baseline)"}
    eps = job.epsilon_shares(cols)
    return eps, {
        "epsilon": float(job.params["epsilon"]),
        "budget": job.params.get("budget"),
        "noise": job.params.get("noise", "laplace"),
        "epsilon_per_attribute": {c: float(e) for c, e in zip(cols, eps)},
        "epsilon_total_composed": float(eps.sum()),
        "budget_detail": budget_detail(job.params, cols, eps),
    }


def frame_with(job: Job, new: dict[str, np.ndarray] | dict[str, pd.Series]) -> pd.DataFrame:
    """The job's data with the columns in ``new`` replaced (one frame construction: setting
    columns one by one on a copy costs more than the whole method on small data).
    """
    data = job.data
    names = data.columns.tolist()
    if (
        len(new) == len(names)
        and len(data) * len(names) <= BLOCK_CELLS
        and all(isinstance(new.get(c), np.ndarray) and new[c].dtype == np.float64 for c in names)
    ):
        # every column replaced by numbers (a small table): one float block, which the
        # release's shuffle gathers at once (issue 27 §2: 13 one-column blocks cost more than
        # MDAV itself on Census); the same columns, values and dtypes
        block = np.column_stack([new[c] for c in names])
        return pd.DataFrame(block, columns=data.columns, index=data.index, copy=False)
    cols = {c: (new[c] if c in new else data[c]) for c in data.columns}
    return pd.DataFrame(cols, index=data.index, copy=False)


def frame_with_matrix(job: Job, cols: list[str], M: np.ndarray) -> pd.DataFrame:
    """:func:`frame_with` of ``{c: M[:, j] for j, c in enumerate(cols)}`` for a float64 (n, m)
    matrix ``M`` of new values, which the caller hands over (it is not used again).  When
    ``cols`` are all the job's columns in their order on a small table, ``M`` (C-contiguous)
    is the release's one float block as it is -- what :func:`frame_with` would stack column by
    column into the same values (issue 27 §2).
    """
    return _frame_and_block(job, cols, M)[0]


def matrix_output(job: Job, cols: list[str], M: np.ndarray, **kw: Any) -> Output:
    """``Output(frame_with_matrix(job, cols, M), **kw)``; when that frame would be exactly
    ``M`` (:func:`_is_release_block`), the frame is left to the API: ``Output(None,
    block=M, columns=...)``, which the API builds once, in the release's record order
    (:func:`dpstudio.engine.api.run_prepared`; the same frame, issue 27 §2).
    """
    if _is_release_block(job, cols, M):
        return Output(None, block=M, columns=job.data.columns, **kw)
    return Output(frame_with(job, {c: M[:, j] for j, c in enumerate(cols)}), **kw)


def _is_release_block(job: Job, cols: list[str], M: np.ndarray) -> bool:
    """True when the frame of :func:`frame_with_matrix` is ``M`` itself: a C-contiguous
    float64 matrix of every column of the job's data, in their order, on a small table.
    """
    data = job.data
    return bool(
        isinstance(M, np.ndarray)
        and M.ndim == 2
        and M.dtype == np.float64
        and M.flags.c_contiguous
        and M.shape == (len(data), len(cols))
        and len(data) * len(cols) <= BLOCK_CELLS
        and list(cols) == job.column_names()
    )


def block_frame(job: Job, out: Output) -> pd.DataFrame:
    """The frame of an :class:`Output` whose release is its block (``data`` None) in the
    job's record order: what :func:`frame_with_matrix` builds.
    """
    assert out.block is not None
    return pd.DataFrame(out.block, columns=out.columns, index=job.data.index, copy=False)


def _frame_and_block(job: Job, cols: list[str], M: np.ndarray) -> tuple[pd.DataFrame, np.ndarray | None]:
    """(the frame of :func:`frame_with_matrix`, ``M`` when the frame is ``M`` itself, else None)."""
    if _is_release_block(job, cols, M):
        data = job.data
        return pd.DataFrame(M, columns=data.columns, index=data.index, copy=False), M
    return frame_with(job, {c: M[:, j] for j, c in enumerate(cols)}), None


def job_stream(job: Job, purpose: int, index: int = 0) -> K.KeyedStream:
    """The keyed, partition-independent stream of ``purpose`` (``K.PURPOSE_*``) and attribute
    ``index`` (position in the method's column list) for this run (issue 12).  The run's root
    key is drawn from ``job.rng`` at the first call (so a pinned seed gives the same streams on
    the in-memory and the Dask path) and kept on the job, not in ``job.cache`` (shared by the
    cells of a sweep).
    """
    return K.KeyedStream(job_root(job), purpose, index)


def job_root(job: Job) -> tuple[int, int]:
    """The run's keyed root: the first draw of ``job.rng``, drawn once and kept on the job."""
    root = job.__dict__.get("_keyed_root")
    if root is None:
        root = job.__dict__["_keyed_root"] = K.root_key(job.rng)
    return root


def job_attribute(job: Job, index: int, column: str, *, grid=None, epsilon=None):
    """The :class:`~dpstudio.engine.outofcore.Attribute` of ``column`` (position ``index``
    among the method's protected columns) in this in-memory run: what an out-of-core plan's
    functions are told, so the in-memory run calls them the same way.
    """
    from dpstudio.engine.outofcore import Attribute

    return Attribute(
        column=column,
        index=int(index),
        root=job_root(job),
        params=job.params,
        n=job.n,
        grid=grid,
        epsilon=None if epsilon is None else float(epsilon),
    )


def released(job: Job, new: dict[str, np.ndarray], *, row_map: np.ndarray | None = None, **kw) -> Output:
    """The Output for a clustered DP release: rows in random order unless order='input' (the
    order of the records' keyed sort keys: the same permutation on every backend).
    ``row_map``: :func:`record_permutation` of the job when already computed.
    """
    data = frame_with(job, new)
    if not keep_order(job.params):
        if row_map is None:
            row_map = record_permutation(job, job.n)
        from dpstudio.engine.parallel import gather_rows

        data = gather_rows(data, row_map)
    else:
        row_map = None
    return Output(data, row_map=row_map, **kw)


def record_permutation(job: Job, n: int, rows: np.ndarray | None = None) -> np.ndarray:
    """The keyed random order of ``n`` released records (record j of the release is input
    record ``perm[j]``): ids ordered by their keyed 128-bit sort keys, the same permutation on
    every backend (the Dask backend sorts by the same keys).

    With ``order`` 'households' / 'households-input' the units are the households of the
    household-id column (``rows``: the input record of each of the ``n`` records, default
    0..n−1): :func:`household_permutation`.
    """
    if household_order(job.params):
        return household_permutation(job, n, rows)
    return K.permutation(job_stream(job, K.PURPOSE_SHUFFLE), n)


def household_ids(job: Job, rows: np.ndarray | None = None) -> np.ndarray:
    """The household of each record as an int code 0..H−1 (``rows``: of those input records);
    a record without a household id is a household of its own.  Refuses data without a
    household-id column.
    """
    hid = next((c for c, r in job.roles.items() if r is Role.HOUSEHOLD), None)
    if hid is None:
        raise ParameterError(
            f"The 'order' parameter of method {job.method!r} is {job.params.get('order')!r}, "
            "which needs a household-id column: give one column the role 'household' "
            "(--role COL=household), or choose order 'random'."
        )
    s = job.data[hid]
    if rows is not None:
        s = s.iloc[np.asarray(rows)]
    codes, _ = pd.factorize(s, use_na_sentinel=True)
    codes = codes.astype(np.int64, copy=False)
    miss = codes < 0
    if miss.any():  # each record without a household id is a household of its own
        top = int(codes.max()) + 1 if codes.size else 0
        codes[miss] = top + np.arange(int(miss.sum()), dtype=np.int64)
    return codes


def household_permutation(job: Job, n: int, rows: np.ndarray | None = None) -> np.ndarray:
    """Households in keyed random order, the records of each together: in keyed random order
    inside it (``order='households'``) or in their input order ('households-input').  The
    household order and the member order come from two keyed streams of the run (purpose
    SHUFFLE, indices 1 and 2), so they depend on the seed, the data and the parameters only.
    """
    units = household_ids(job, rows)
    if units.size != n:  # pragma: no cover - a caller's bug
        raise ValueError("household ids do not match the records")
    n_units = int(units.max()) + 1 if n else 0
    unit_rank = np.empty(n_units, dtype=np.int64)
    unit_rank[K.permutation(job_stream(job, K.PURPOSE_SHUFFLE, 1), n_units)] = np.arange(n_units)
    if job.params.get("order") == ORDER_HOUSEHOLDS_INPUT:
        inside = np.arange(n, dtype=np.int64)
    else:
        inside = np.empty(n, dtype=np.int64)
        inside[K.permutation(job_stream(job, K.PURPOSE_SHUFFLE, 2), n)] = np.arange(n)
    return np.lexsort((inside, unit_rank[units]))


def ir_sorted(job: Job, c: str) -> tuple[np.ndarray, np.ndarray]:
    """Individual-ranking order of one attribute and its sorted values (cached per column;
    shared by ir-dp, idp-ls, idp-cbls and ir-swap, independent of k).
    """
    key = ("num.ir-order", c)
    if key not in job.cache:
        job.cache[key] = _ir_sorted_values(job.data[c])
    return job.cache[key]


def _ir_sorted_values(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    x = s.to_numpy(dtype=np.float64)
    order = MA.ir_order(x)
    return order, x[order]


def ir_sorted_all(job: Job, cols: list[str]) -> None:
    """:func:`ir_sorted` of every column of ``cols`` (cached), the sorts of a large table
    side by side (:func:`dpstudio.engine.parallel.map_ordered`: the same orders).
    """
    from dpstudio.engine.parallel import map_ordered

    todo = [c for c in dict.fromkeys(cols) if ("num.ir-order", c) not in job.cache]
    series = [job.data[c] for c in todo]  # taken in this thread
    for c, got in zip(todo, map_ordered(_ir_sorted_values, series, cells=job.n * len(todo))):
        job.cache[("num.ir-order", c)] = got


def chunks(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Start positions and sizes of the consecutive chunks of individual ranking (the last
    chunk takes the remainder: every chunk has k to 2k − 1 records).
    """
    nc = MA.n_clusters_for(n, k)
    k = max(int(k), 1)
    starts = np.arange(nc, dtype=np.int64) * k
    sizes = np.full(nc, k, dtype=np.int64)
    sizes[-1] = n - starts[-1]
    return starts, sizes
