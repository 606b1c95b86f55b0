"""What the desk returns (:class:`QueryAnswer`) and the one check of ε for every answer.

ε goes through :func:`dpstudio.engine.params.check_epsilon` (the engine's one range,
[:data:`~dpstudio.engine.params.EPSILON_MIN`, :data:`~dpstudio.engine.params.EPSILON_MAX`],
and its warning above :data:`~dpstudio.engine.params.LARGE_EPSILON`), like every release.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpstudio.engine.errors import ParameterError
from dpstudio.engine.params import EPSILON_MAX, EPSILON_MIN
from dpstudio.engine.params import check_epsilon as _params_check_epsilon
from dpstudio.engine.query.parser import _plain

__all__ = ["EPSILON_MAX", "EPSILON_MIN", "QueryAnswer", "check_epsilon", "positive_epsilon"]


def check_epsilon(epsilon) -> float:
    """ε of one answer (or one component), validated by the engine's one rule
    (:func:`dpstudio.engine.params.check_epsilon`): a float in [EPSILON_MIN, EPSILON_MAX];
    a :class:`~dpstudio.engine.errors.PrivacyLeakWarning` above LARGE_EPSILON.

    >>> check_epsilon(0.5)
    0.5
    """
    return _params_check_epsilon(float(epsilon) if _is_fraction(epsilon) else epsilon, name="ε")


def positive_epsilon(epsilon) -> float:
    """ε as a finite float > 0 (the ledger's refusal beyond the budget comes before the range
    check of :func:`check_epsilon`); anything else is refused in :func:`check_epsilon`'s words.
    """
    try:
        e = float(epsilon)
    except (TypeError, ValueError, OverflowError):
        e = math.nan
    if isinstance(epsilon, bool) or not (e > 0 and math.isfinite(e)):
        check_epsilon(epsilon)  # raises (one line, the engine's format)
        raise ParameterError(f"The 'ε' parameter must be a finite float > 0. Got {epsilon!r} instead.")
    return e


def _is_fraction(x) -> bool:
    from fractions import Fraction

    return isinstance(x, Fraction)


@dataclass
class QueryAnswer:
    """The result of :func:`refine_query`.

    Public (for the researcher): ``response``, ``guarantee``, ``epsilon``, ``query``,
    ``prior`` (see :meth:`public`).  PRIVATE (the office only: they depend on the true answer
    and would disclose it): ``true_value``, ``refined`` and ``notes``.
    """

    query: str
    kind: str
    epsilon: float
    response: Any
    guarantee: str
    prior: str
    support: list = field(default_factory=list)
    prior_probs: list = field(default_factory=list)
    refined: list = field(default_factory=list)  # PRIVATE
    true_value: Any = None  # PRIVATE
    notes: list = field(default_factory=list)  # PRIVATE
    groups: list | None = None
    remaining: float | None = None
    components: list[str] | None = None  # a multicomponent answer: one text per component
    mode: str | None = None  # multicomponent: 'joint' or 'split'
    epsilons: list[float] | None = None  # split: εi per component
    #: PRIVATE: the number of records the filter matched (one per group or component); the
    #: office's comparison with Laplace noise uses it (a mean's sensitivity is ≈ width / n)
    records: Any = None
    #: the mechanism that drew the response: 'refinement' or a noise mechanism (public)
    mechanism: str = "refinement"
    #: the 95 % interval computed from the released value(s) (public; None: see interval_note)
    interval: Any = None
    #: what the interval covers (public)
    interval_note: str = ""
    #: the planning accuracy of every mechanism and the choice of auto (public: no data)
    accuracy: dict | None = None
    #: Gaussian: δ and ρ (public)
    delta: float | None = None
    rho: float | None = None

    def guarantee_object(self):
        """The answer's guarantee as the engine's shared :class:`~dpstudio.engine.guarantee.
        Guarantee` (model ε-DP, its ε and δ; the desk's sentence as its one clause): other
        layers ask it (``is_dp``, ``epsilon``, ``delta``), never the wording.  The neighbouring
        relation is in the sentence: any two data sets (statistical refinement), one record's
        values (noise, bounded DP), or one record added or removed (an individual query).
        """
        from dpstudio.engine.guarantee import Clause, Guarantee, Model

        return Guarantee(
            model=Model.EPSILON_DP,
            clauses=(Clause("text", self.guarantee),),
            epsilon=float(self.epsilon),
            epsilon_total=float(self.epsilon),
            delta=float(self.delta or 0.0),
        )

    def public(self) -> dict:
        if self.components is not None:
            resp: Any = {c: _plain(r) for c, r in zip(self.components, self.response)}
        elif self.groups is None:
            resp = _plain(self.response)
        else:
            resp = {str(g): _plain(r) for g, r in zip(self.groups, self.response)}
        return {
            "query": self.query,
            "kind": self.kind,
            "epsilon": self.epsilon,
            "response": resp,
            "prior": self.prior,
            "guarantee": self.guarantee,
            "guarantee_model": {
                "model": "epsilon-dp",
                "epsilon": self.epsilon,
                "delta": float(self.delta or 0.0),
            },
            "remaining_budget": self.remaining,
            "mechanism": self.mechanism,
            "interval_95": _plain_interval(self.interval),
            "interval_note": self.interval_note,
            **({"delta": self.delta, "rho": self.rho} if self.rho is not None else {}),
            **({"accuracy": self.accuracy} if self.accuracy is not None else {}),
        }


def _plain_interval(iv):
    if iv is None:
        return None
    if isinstance(iv, list):
        return [_plain_interval(x) for x in iv]
    return [_plain(iv[0]), _plain(iv[1])]
