"""What the trade-off view plots for a method (issue 10 "App", issue 11 defect 7): the x axis
(k, or ε for a method without k), the measures the sweep asks the engine for, and which of
them are the information-loss and risk axes.  No Qt: the sweep's child process imports it.

* numeric methods: SSE (normalised or raw) and record linkage RL (%) against k;
* methods that suppress categorical key values (spec flag ``missing_matches_any``, e.g.
  local-suppression): the share of suppressed key values (%) and the expected number of
  re-identifications (sdcMicro's risk on the categorical keys) against k;
* k-anonymous generalising methods (spec flags ``k_anonymous`` and ``generalises``, e.g. k-eps):
  SSE and the expected re-identifications on the generalised keys (the engine's default sweep
  measures for them include ``reid``; the app computes exactly what ``dpstudio sweep`` computes);
* a method without k (laplace): the same measures against ε.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SweepView:
    x: str = "k"
    """``"k"`` or ``"epsilon"``: what the loss and risk curves are plotted against."""
    measures: tuple[str, ...] = ("sse", "rl")
    """The measures the sweep computes (engine names, :func:`dpstudio.engine.sweep`)."""
    loss: str | None = None
    """The SweepPoint value of the loss axis; ``None``: the SSE scale chosen in the view."""
    loss_label: str = "SSE"
    loss_scale: float = 1.0
    """Factor from the value to the axis (a share → %)."""
    risk: str = "rl"
    """The SweepPoint value of the risk axis (``rl`` when a point lacks it)."""
    risk_label: str = "RL (%)"

    @property
    def x_label(self) -> str:
        return "k" if self.x == "k" else "ε"

    @property
    def sse_plane(self) -> bool:
        """Whether the plane is SSE against RL (what the candidate releases are drawn in)."""
        return self.loss is None and self.risk == "rl"


NUMERIC = SweepView()
REID_LABEL = "expected re-identifications"


def sweep_view(method: str | None) -> SweepView:
    """The view of ``method``'s sweep (the numeric one for an unknown id)."""
    from dpstudio.engine.measures import default_measures
    from dpstudio.engine.registry import get_method

    try:
        spec = get_method(str(method))
    except (KeyError, ValueError):
        return NUMERIC
    x = "k" if spec.uses_k else "epsilon"
    if spec.missing_matches_any:
        return SweepView(
            x=x,
            measures=tuple(default_measures(spec.id)),
            loss="suppressed_share",
            loss_label="suppressed key values (%)",
            loss_scale=100.0,
            risk="expected_reidentifications",
            risk_label=REID_LABEL,
        )
    # the measures are the engine's defaults, as `dpstudio sweep` computes them: the app and the
    # CLI give the same points for the same settings
    measures = tuple(default_measures(spec.id))
    if spec.k_anonymous and spec.generalises and "reid" in measures:
        return SweepView(x=x, measures=measures, risk="expected_reidentifications", risk_label=REID_LABEL)
    return SweepView(x=x, measures=measures)
