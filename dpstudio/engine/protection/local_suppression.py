"""``local-suppression``: k-anonymity on categorical keys by setting the fewest key values to
missing (sdcMicro's ``localSuppression``; docs/methods.md ``local-suppression``).

1. optionally, global recoding first: each k-quasi-identifier listed in ``recode_levels``
   is generalised to that level of its loaded hierarchy (every value of the column to the
   same level, as sdcMicro's ``globalRecode``);
2. local suppression (:func:`dpstudio.engine.algorithms.local_suppression.local_suppression`):
   key values are set to missing, least important key first (``importance``: key names,
   most important first; default sdcMicro's, more categories = less important), until every
   record agrees with at least k − 1 others on every key where neither is missing -- a
   missing value matches any value (sdcMicro's ``freqCalc`` rule);
3. every other value is released unchanged (no record is removed); the records in keyed
   random order unless order='input' (applied by the API, as for every method).

The guarantee is k-anonymity on the keys *under that rule*; the release is checked with the
exact f_k before it is returned.  The count of suppressions per key is a fact about the
original data: it goes to the private side (``info``, private notes), never into the
guarantee.  Keys are compared as category labels, whatever their dtype: sex = 1/2 stays 1
or 2 (or missing), never 1.5.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpstudio.engine.algorithms.frequencies import encode_keys, wildcard_counts
from dpstudio.engine.algorithms.local_suppression import local_suppression
from dpstudio.engine.errors import InputError, ParameterError
from dpstudio.engine.guarantee import Clause, Effect, Effects, Guarantee, GuaranteeContext, Model
from dpstudio.engine.hierarchies.hierarchy import load_hierarchy
from dpstudio.engine.notices import notice
from dpstudio.engine.params import Param
from dpstudio.engine.protection._common import ORDER_PARAM, as_k, k_param
from dpstudio.engine.protection._papers import TEMPL_2015_JSS
from dpstudio.engine.registry import MethodSpec
from dpstudio.engine.roles import Role
from dpstudio.engine.types import Job, Output

METHOD_ID = "local-suppression"

IMPORTANCE_PARAM = Param(
    "importance",
    "str",
    None,
    "The keys in order of importance, most important first, comma-separated (e.g. "
    "'SEX,AGE,MARSTAT'): the least important key is suppressed first. Empty = sdcMicro's "
    "default: keys with more categories are less important.",
    label="importance order",
)

RECODE_PARAM = Param(
    "recode_levels",
    "mapping",
    None,
    "Optional global recoding before suppression: key -> level of its loaded hierarchy "
    "(e.g. AGE:2). Every value of that key is generalised to that level first, as sdcMicro's "
    "globalRecode; fewer values then need to be suppressed.",
    label="global recoding (hierarchy levels)",
    advanced=True,
)

_PARAMS = (
    k_param(
        default=3,
        minimum=2,
        help="Every record must share its key combination "
        "with at least k − 1 others (a suppressed value matches any value).",
    ),
    IMPORTANCE_PARAM,
    RECODE_PARAM,
    ORDER_PARAM,
)


def guarantee(ctx: GuaranteeContext) -> Guarantee:
    keys = ctx.attributes
    named = f" ({', '.join(keys)})" if keys else ""
    clauses = [
        Clause("claim", f"{ctx.get('k')}-anonymity on the k-quasi-identifiers{named}"),
        Clause(
            "mechanism",
            " by local suppression: every record agrees with at least k − 1 others on every key "
            "where neither value is suppressed or missing (a missing value matches any value, "
            "sdcMicro's rule); key values are only set to missing, never changed",
        ),
    ]
    levels = ctx.get("recode_levels") or {}
    if levels:
        clauses.append(
            Clause(
                "mechanism",
                ", after global recoding of "
                + ", ".join(f"{c} to level {lv}" for c, lv in levels.items())
                + " of their hierarchies",
            )
        )
    clauses += [
        Clause("not-dp", ". Not differential privacy;"),
        Clause("not-covered", " the other columns are released unchanged."),
    ]
    return Guarantee(model=Model.K_ANONYMITY, clauses=tuple(clauses), k=as_k(ctx.get("k")), covered=keys)


def effects(ctx: GuaranteeContext) -> Effects:
    """As a step of a chain: key values set to missing where the data call for it (after an
    optional global recoding to hierarchy levels, a value-wise map); nothing else is read.
    """
    keys = ctx.columns(Role.K_QUASI) or list(ctx.attributes)
    return Effects(changes={c: Effect.SUPPRESS for c in keys}, keys=tuple(keys))


def parse_importance(text: str | None, keys: list[str]) -> list[str] | None:
    """``'SEX, AGE'`` -> ``['SEX', 'AGE']`` (most important first); every key must be named
    once.  Empty: None (sdcMicro's default order).
    """
    if text is None or not str(text).strip():
        return None
    names = [t.strip() for t in str(text).split(",") if t.strip()]
    unknown = [n for n in names if n not in keys]
    if unknown:
        raise ParameterError(
            f"The 'importance' parameter of method {METHOD_ID!r} must name the "
            f"k-quasi-identifiers ({', '.join(keys)}). Got {text!r} instead."
        )
    if sorted(names) != sorted(keys):
        missing = [k for k in keys if k not in names]
        raise ParameterError(
            f"The 'importance' parameter of method {METHOD_ID!r} must name every "
            f"k-quasi-identifier once, most important first; missing or "
            f"repeated: {', '.join(missing) or 'a repeated name'}. Got {text!r} "
            "instead."
        )
    return names


def _recode(job: Job, keys: list[str], levels: dict) -> tuple[pd.DataFrame, list[str]]:
    data = job.data
    if not levels:
        return data, []
    hier = job.hierarchies or {}
    data = data.copy()
    done = []
    for c, lv in levels.items():
        if c not in keys:
            raise ParameterError(
                f"The 'recode_levels' parameter of method {METHOD_ID!r} must "
                f"name k-quasi-identifiers ({', '.join(keys)}). Got {c!r} instead."
            )
        if hier.get(c) is None:
            raise ParameterError(
                f"Column {c!r}: global recoding needs its hierarchy; load one "
                f"(hierarchies={{{c!r}: file}} / --hierarchy {c}=FILE)."
            )
        h = load_hierarchy(hier[c], c)
        try:
            level = int(lv)
            if level != float(lv):
                raise ValueError
        except (TypeError, ValueError):
            level = -1
        if not 0 <= level < h.height:
            raise ParameterError(
                f"The 'recode_levels' parameter of method {METHOD_ID!r} must give "
                f"{c!r} a level in [0, {h.height - 1}] (its hierarchy's levels). "
                f"Got {lv!r} instead."
            )
        s = data[c]
        ok = s.notna().to_numpy()
        vals = np.full(len(s), None, dtype=object)
        if ok.any():
            vals[ok] = h.generalize(s[ok], level)
        data[c] = pd.Series(vals, index=s.index, dtype=object)
        done.append(c)
    return data, done


def run(job: Job) -> Output:
    keys = job.columns(Role.K_QUASI)
    k = int(job.params["k"])
    order = parse_importance(job.params.get("importance"), keys)
    levels = dict(job.params.get("recode_levels") or {})
    job.check_cancel()
    data, recoded = _recode(job, keys, levels)
    passes = [0]

    def on_pass(done: int) -> None:
        passes[0] = done
        job.check_cancel()
        job.progress(min(0.95, 1 - 1 / (1 + done)))

    out, rep = local_suppression(data, keys, k, importance=order, on_pass=on_pass)
    # the release is checked, not trusted: exact f_k under the missing-matches-any rule
    codes, cards = encode_keys(out, keys, "any")
    fk, _ = wildcard_counts(codes, cards)
    if len(fk) and fk.min() < k:  # pragma: no cover - a bug, never a data condition
        raise InputError(f"local suppression failed its own {k}-anonymity check; please report")
    info = {
        "suppression": rep,
        "recoded": recoded,
        "suppressed_per_key": rep["suppressed_per_key"],
        "suppressed_total": rep["suppressed_total"],
    }
    warns: list[str] = [
        notice(
            "values-suppressed",
            f"Local suppression set {rep['suppressed_total']} key value(s) to missing in "
            f"{rep['records_with_suppression']} record(s): "
            + ", ".join(f"{c} {n}" for c, n in rep["suppressed_per_key"].items())
            + ".",
        )
    ]
    job.progress(1.0)
    return Output(out, info=info, warnings=warns, protected=keys)


SPEC = MethodSpec(
    id=METHOD_ID,
    name="Local suppression (k-anonymity on categorical keys)",
    family="k-anonymity",
    description="Sets the fewest key values to missing until every record shares its key "
    "combination with at least k − 1 others; a missing value matches any value "
    "(sdcMicro's localSuppression, with fewer suppressions). For survey files with "
    "categorical keys (region, sex, age group, household type …). Optionally recodes "
    "keys globally with their hierarchies first.",
    paper=TEMPL_2015_JSS,
    params=_PARAMS,
    protects=(Role.K_QUASI,),
    requires=(Role.K_QUASI,),
    guarantee=guarantee,
    run=run,
    uses_k=True,
    uses_epsilon=False,
    numeric_only=False,
    min_k=2,
    k_anonymous=True,
    missing_matches_any=True,
    effects=effects,
)
