"""The dpstudio engine: pure Python + numpy/pandas/scipy.  Never imports Qt.

>>> from dpstudio import engine
>>> any(m["id"] == "ir-dp" for m in engine.methods())
True

The names below are loaded on first use (PEP 562): importing a light submodule such as
``dpstudio.engine.errors`` (the command line's ``--version`` and ``--help``) does not import
pandas or scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it
_EXPORTS = {
    "assess": "dpstudio.engine.assessment",
    "Assessment": "dpstudio.engine.assessment",
    "ChainRun": "dpstudio.engine.chain",
    "protect_chain": "dpstudio.engine.chain",
    "check_applicable": "dpstudio.engine.api",
    "evaluate": "dpstudio.engine.api",
    "methods": "dpstudio.engine.api",
    "prepare": "dpstudio.engine.api",
    "protect": "dpstudio.engine.api",
    "run_prepared": "dpstudio.engine.api",
    "Cancelled": "dpstudio.engine.errors",
    "DPStudioError": "dpstudio.engine.errors",
    "InputError": "dpstudio.engine.errors",
    "NotApplicableError": "dpstudio.engine.errors",
    "ParameterError": "dpstudio.engine.errors",
    "PrivacyLeakWarning": "dpstudio.engine.errors",
    "sweep": "dpstudio.engine.sweeps",
    "ProtectionResult": "dpstudio.engine.types",
    "Role": "dpstudio.engine.roles",
    "RiskReport": "dpstudio.engine.measures.survey_risk",
    "assess_risk": "dpstudio.engine.measures.survey_risk",
    # the query desk (API users: a request, its declared range and prior, the answer, the ledger)
    "BudgetExceeded": "dpstudio.engine.query",
    "BudgetLedger": "dpstudio.engine.query",
    "CategoricalRange": "dpstudio.engine.query",
    "LedgerError": "dpstudio.engine.query",
    "MultiQuery": "dpstudio.engine.query",
    "NumericRange": "dpstudio.engine.query",
    "Prior": "dpstudio.engine.query",
    "Query": "dpstudio.engine.query",
    "QueryAnswer": "dpstudio.engine.query",
    "answer_query": "dpstudio.engine.query",
    "assess_query": "dpstudio.engine.query",  # the desk's accuracy before spending (not ``assess``)
    "export_answer_file": "dpstudio.engine.query",
    "load_ledger": "dpstudio.engine.query",
    "locked_ledger": "dpstudio.engine.query",
    "parse_any": "dpstudio.engine.query",
    "parse_prior": "dpstudio.engine.query",
    "parse_query": "dpstudio.engine.query",
    "parse_range": "dpstudio.engine.query",
    "refine_multicomponent": "dpstudio.engine.query",
    "refine_query": "dpstudio.engine.query",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value  # later look-ups skip this function (and win over a submodule
    return value  # of the same name, as the eager import did)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static checkers see the eager imports
    from dpstudio.engine.api import check_applicable, evaluate, methods, prepare, protect, run_prepared  # noqa: F401
    from dpstudio.engine.assessment import Assessment, assess  # noqa: F401
    from dpstudio.engine.chain import ChainRun, protect_chain  # noqa: F401
    from dpstudio.engine.errors import (  # noqa: F401
        Cancelled,
        DPStudioError,
        InputError,
        NotApplicableError,
        ParameterError,
        PrivacyLeakWarning,
    )
    from dpstudio.engine.measures.survey_risk import RiskReport, assess_risk  # noqa: F401
    from dpstudio.engine.query import (  # noqa: F401
        BudgetExceeded,
        BudgetLedger,
        CategoricalRange,
        LedgerError,
        MultiQuery,
        NumericRange,
        Prior,
        Query,
        QueryAnswer,
        answer_query,
        assess_query,
        export_answer_file,
        load_ledger,
        locked_ledger,
        parse_any,
        parse_prior,
        parse_query,
        parse_range,
        refine_multicomponent,
        refine_query,
    )
    from dpstudio.engine.roles import Role  # noqa: F401
    from dpstudio.engine.sweeps import sweep  # noqa: F401
    from dpstudio.engine.types import ProtectionResult  # noqa: F401
