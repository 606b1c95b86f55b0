"""Former home of the measures, kept so that existing imports keep working.

The measures now live in :mod:`dpstudio.engine.measures` (``evaluate`` and the measurement
policy), :mod:`.utility`, :mod:`.risk` and :mod:`.kanon`; import from there.
"""

from dpstudio.engine.measures import (  # noqa: F401
    K_ANONYMOUS_METHODS,
    SCALAR_KEYS,
    TIE_RTOL,
    correlation_loss,
    delta_stats,
    evaluate,
    k_anonymity_check,
    record_linkage,
    register_method_measures,
    score,
    sse,
)

__all__ = ["sse", "record_linkage", "delta_stats", "correlation_loss", "score",
           "k_anonymity_check", "evaluate", "register_method_measures", "TIE_RTOL"]
