"""The query desk (thesis ch. 5, Protocol 2): answer a researcher's statistic under
differential privacy and charge it to the data set's private budget ledger.

The package (one module per concern; this module re-exports the API):

* :mod:`~dpstudio.engine.query.parser` -- the query language (filters, aggregates,
  multicomponent queries, disjointness of filters decided from the text alone);
* :mod:`~dpstudio.engine.query.ranges` -- declared ranges of the answer and priors;
* :mod:`~dpstudio.engine.query.refinement` -- knowledge refinement (Algorithm 5.1, exact);
* :mod:`~dpstudio.engine.query.multi` -- multicomponent answers (§5.3: joint, split);
* :mod:`~dpstudio.engine.query.mechanisms` -- noise mechanisms (and Δ for the comparison);
* :mod:`~dpstudio.engine.query.desk` -- :func:`answer_query` (any mechanism; ``auto``), the
  accuracy before spending (:func:`assess`), intervals, the researcher's answer file;
* :mod:`~dpstudio.engine.query.answer` -- :class:`QueryAnswer` and the one check of ε
  (through :func:`dpstudio.engine.params.check_epsilon`);
* :mod:`~dpstudio.engine.query.ledger` -- the private budget ledger with its OS lock.

>>> from dpstudio.engine.query import NumericRange, Prior, refine_query
>>> import pandas as pd
>>> ans = refine_query(pd.DataFrame({"x": [1, 2, 3]}), "count where x > 1",
...                    Prior.uniform(NumericRange(0, 3, 1)), 1.0, rng=0)
>>> ans.response in (0, 1, 2, 3)
True
"""

from __future__ import annotations

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.query.answer import EPSILON_MAX, EPSILON_MIN, QueryAnswer, check_epsilon
from dpstudio.engine.query.desk import answer_file, answer_query, assess, export_answer_file
from dpstudio.engine.query.ledger import (
    DEFAULT_WAIT,
    LEDGER_FORMAT,
    BudgetExceeded,
    BudgetLedger,
    LedgerBusy,
    LedgerError,
    eps_fraction,
    load_ledger,
    locked_ledger,
    resolve_ledger_path,
    save_ledger,
)
from dpstudio.engine.query.mechanisms import MECHANISMS, laplace_sensitivity
from dpstudio.engine.query.multi import DISTANCES, MODES, joint_distances, refine_multicomponent
from dpstudio.engine.query.parser import (
    AGGREGATES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_TERMS,
    MAX_NUMBER_CHARS,
    MAX_QUERY_CHARS,
    NEEDS_COLUMN,
    STATISTICAL,
    MultiQuery,
    Query,
    disjoint_components,
    evaluate_filter,
    filter_columns,
    parse_any,
    parse_filter,
    parse_query,
)
from dpstudio.engine.query.ranges import (
    MAX_SUPPORT,
    PRIOR_TOTAL,
    CategoricalRange,
    NumericRange,
    Prior,
    parse_literal,
    parse_prior,
    parse_range,
    resolve_range,
)
from dpstudio.engine.query.refinement import (
    ALPHA_BITS,
    exact_distribution,
    exp_bounds,
    factors,
    refine_query,
    refine_weights,
    refined_probabilities,
    sample_refined,
    true_answer,
    validate_request,
)

#: :func:`assess` under the name ``dpstudio.engine`` exports it (``engine.assess`` is the
#: release's one assess path, :mod:`dpstudio.engine.assessment`).
assess_query = assess

__all__ = [
    "AGGREGATES",
    "ALPHA_BITS",
    "DEFAULT_WAIT",
    "DISTANCES",
    "EPSILON_MAX",
    "EPSILON_MIN",
    "LEDGER_FORMAT",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_TERMS",
    "MAX_NUMBER_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SUPPORT",
    "MECHANISMS",
    "MODES",
    "NEEDS_COLUMN",
    "PRIOR_TOTAL",
    "STATISTICAL",
    "BudgetExceeded",
    "BudgetLedger",
    "CategoricalRange",
    "LedgerBusy",
    "LedgerError",
    "MultiQuery",
    "NumericRange",
    "ParameterError",
    "Prior",
    "Query",
    "QueryAnswer",
    "answer_file",
    "answer_query",
    "assess",
    "assess_query",
    "check_epsilon",
    "disjoint_components",
    "eps_fraction",
    "evaluate_filter",
    "exact_distribution",
    "export_answer_file",
    "exp_bounds",
    "factors",
    "filter_columns",
    "joint_distances",
    "laplace_sensitivity",
    "load_ledger",
    "locked_ledger",
    "parse_any",
    "parse_filter",
    "parse_literal",
    "parse_prior",
    "parse_query",
    "parse_range",
    "refine_multicomponent",
    "refine_query",
    "refine_weights",
    "refined_probabilities",
    "resolve_ledger_path",
    "resolve_range",
    "sample_refined",
    "save_ledger",
    "true_answer",
    "validate_request",
]
